"""The panic threshold: a storm of bad reports, vetoes or failures takes nothing more away."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.actions import SetNodeAvailability, SetNodeLabels, SetReplicas
from controller.core.apply import apply_actions
from controller.core.decisions import Decision
from controller.core.health.node_marks import health_key
from controller.core.kernel.blast_radius import allowed
from controller.core.labels import DENY_LABEL_PREFIX, deny_label, steering_constraint
from controller.core.memory import Memory
from controller.core.model import Availability, ClusterSnapshot, NodeState
from controller.core.outside_inputs import (
    HealthReport,
    HealthState,
    PluginAdvice,
    PluginVeto,
    WorkloadEvent,
)
from controller.core.plan import Plan, plan
from controller.policy import Policy, policy_from_data

from .builders import MANAGED, node, replaced, running, service, snapshot

NOW = 30_000.0
LOW = {**MANAGED, "placement.priority": "low"}


def cluster(count: int = 4, *, down: frozenset[int] = frozenset()) -> ClusterSnapshot:
    """`web` with one replica on each node, `batch` (low priority) on node-2 and node-3."""
    web = service("web", replicas=count, labels=MANAGED, constraints=[steering_constraint("web")])
    batch = service("batch", replicas=2, labels=LOW, constraints=[steering_constraint("batch")])
    nodes = [
        node(n, manager=n == 1, state=NodeState.DOWN if n in down else NodeState.READY)
        for n in range(1, count + 1)
    ]
    tasks = [running(web, n, n) for n in range(1, count + 1)]
    tasks += [running(batch, 2, 1), running(batch, 3, 2)]
    return snapshot(nodes, [web, batch], tasks)


def word(n: int, state: HealthState = HealthState.FAILED, source: str = "webhook") -> HealthReport:
    return HealthReport(f"n{n}", state, source, NOW + 600, reason="monitor says so")


def storm(
    snap: ClusterSnapshot, *nodes: int, state: HealthState = HealthState.FAILED
) -> ClusterSnapshot:
    return replace(snap, health=tuple(word(n, state) for n in nodes))


def started(snap: ClusterSnapshot, policy: Policy) -> Memory:
    calm = replace(snap, health=(), workload=(), plugins=PluginAdvice())
    return plan(snapshot=calm, policy=policy, memory=Memory(), now=NOW - 1000).memory


def run(snap: ClusterSnapshot, policy: Policy | None = None, now: float = NOW) -> Plan:
    policy = policy or Policy.default()
    return plan(snapshot=snap, policy=policy, memory=started(snap, policy), now=now)


def settle(
    snap: ClusterSnapshot, policy: Policy | None = None, *, swarm_acts: bool = False
) -> ClusterSnapshot:
    """Apply the node writes of successive cycles until there are none (`swarm_acts`:
    Swarm replaces the tasks they evict between cycles)."""
    policy = policy or Policy.default()
    memory = started(snap, policy)
    for step in range(8):
        result = plan(snapshot=snap, policy=policy, memory=memory, now=NOW + step)
        writes = node_writes(result)
        if not writes:
            return snap
        snap, memory = apply_actions(snap, writes), result.memory
        if swarm_acts:
            snap = replaced(snap)
    raise AssertionError("node writes did not settle")


def node_writes(result: Plan) -> tuple[SetNodeLabels | SetNodeAvailability, ...]:
    return tuple(a for a in result.actions if isinstance(a, SetNodeLabels | SetNodeAvailability))


def surges(result: Plan) -> list[SetReplicas]:
    return [a for a in result.actions if isinstance(a, SetReplicas)]


def panic(result: Plan) -> Decision | None:
    found = [d for d in result.decisions if (d.rule, d.outcome) == ("health", "panic")]
    assert len(found) <= 1
    return found[0] if found else None


def denied(snap: ClusterSnapshot, n: int) -> set[str]:
    labels = snap.node_by_id[f"n{n}"].labels
    return {k.removeprefix(DENY_LABEL_PREFIX) for k in labels if k.startswith(DENY_LABEL_PREFIX)}


@pytest.mark.parametrize(
    ("share", "nodes", "expected"),
    [(0.34, 3, 1), (0.34, 4, 1), (0.34, 6, 2), (0.34, 2, 0), (1 / 3, 3, 1), (0.5, 4, 2), (1, 5, 5)],
)
def test_the_share_is_rounded_down_and_a_third_of_three_is_one(
    share: float, nodes: int, expected: int
) -> None:
    assert allowed(share, nodes) == expected


def test_every_node_reported_failed_changes_nothing_and_a_decision_says_why() -> None:
    result = run(storm(cluster(), 1, 2, 3, 4))
    assert result.actions == (), "no deny, pause, record or failover surge"
    decision = panic(result)
    assert decision is not None and decision.subject == "swarm"
    assert (
        "4 of 4 ready and active node(s) (100%) taken by outside inputs: "
        "4 reported failed or degraded" in decision.reason
    )
    assert "node-1, node-2, node-3, node-4" in decision.reason
    assert "by webhook" in decision.reason
    assert "controller.health-panic-threshold 34% (at most 1 node(s))" in decision.reason
    ignored = [d for d in result.decisions if d.outcome == "ignore" and d.rule == "health"]
    assert {d.subject for d in ignored} == {f"node node-{n}" for n in (1, 2, 3, 4)}
    assert not [d for d in result.decisions if d.outcome == "failed"]


def test_a_degraded_storm_pauses_nothing_and_plugin_sources_are_named() -> None:
    reports = (word(2, HealthState.DEGRADED), word(3, HealthState.DEGRADED, "plugin.topo"))
    result = run(replace(cluster(), health=reports))
    assert result.actions == ()
    decision = panic(result)
    assert decision is not None and "by plugin.topo, webhook" in decision.reason


def test_within_the_share_a_report_is_acted_on_as_before() -> None:
    result = run(storm(cluster(), 2))
    assert panic(result) is None
    [write] = [a for a in node_writes(result) if a.node_id == "n2"]
    assert isinstance(write, SetNodeLabels)
    assert (
        write.set_labels[deny_label("web")] == "true"
        and write.set_labels[deny_label("batch")] == "true"
    )
    assert [a.service_name for a in surges(result)] == ["batch", "web"]


@pytest.mark.parametrize(
    ("count", "reported", "acted"), [(3, 1, True), (3, 2, False), (6, 2, True), (6, 3, False)]
)
def test_more_than_a_third_is_a_panic(count: int, reported: int, acted: bool) -> None:
    result = run(storm(cluster(count), *range(2, 2 + reported)))
    assert (panic(result) is None) is acted
    assert bool(node_writes(result)) is acted


def test_the_threshold_is_a_policy_setting() -> None:
    half = policy_from_data(
        {"apiVersion": "placement/v1", "controller": {"health-panic-threshold": "50%"}}
    )
    assert panic(run(storm(cluster(), 2, 3), policy=half)) is None
    settled = settle(storm(cluster(), 2, 3), policy=half)
    assert denied(settled, 2) == denied(settled, 3) == {"web", "batch"}


def test_when_the_reports_fall_back_below_the_share_the_controller_acts_again() -> None:
    stormy = settle(storm(cluster(), 1, 2, 3, 4))
    assert all(not denied(stormy, n) for n in (1, 2, 3, 4)), "nothing was written"
    calmer = replace(
        stormy,
        health=(word(1, HealthState.OK), word(2), word(3, HealthState.OK), word(4, HealthState.OK)),
    )
    result = run(calmer, now=NOW + 10)
    assert panic(result) is None
    [write] = node_writes(result)
    assert write.node_id == "n2" and deny_label("web") in write.set_labels
    assert any(d.subject == "node node-2" and d.outcome == "failed" for d in result.decisions)
    assert surges(result)


def test_what_is_in_force_stays_through_a_storm_and_is_not_made_worse() -> None:
    """Of 6 nodes, node-2 failed and node-3 degraded before the storm (2 of 6: within the
    share): their denies stay; node-3 reported failed in the storm stays
    degraded; nothing new is written."""
    # Node-3 sheds its work only once node-2's runs elsewhere: max-unavailable 1.
    health = (word(2), word(3, HealthState.DEGRADED))
    before = settle(replace(cluster(6), health=health), swarm_acts=True)
    assert denied(before, 2) == {"web", "batch"}
    assert denied(before, 3) == {"batch", "web"}, "preemptible: both in one batch of 2"
    assert before.node_by_id["n2"].availability is Availability.ACTIVE, "never paused"
    assert before.node_by_id["n3"].availability is Availability.ACTIVE
    stormy = replace(before, health=tuple(word(n) for n in range(1, 7)))
    result = run(stormy, now=NOW + 20)
    assert panic(result) is not None
    assert node_writes(result) == (), "in force stays; nothing new, nothing worse"
    assert [d for d in result.decisions if d.subject == "node node-3" and d.outcome == "ignore"]
    assert any(d.subject == "node node-2" and d.outcome == "failed" for d in result.decisions)


def test_releases_go_on_during_a_storm() -> None:
    before = settle(replace(cluster(), health=(word(2),)))
    released = replace(before, health=(word(1), word(2, HealthState.OK), word(3), word(4)))
    result = run(released, now=NOW + 20)
    assert panic(result) is not None
    [write] = node_writes(result)
    assert isinstance(write, SetNodeLabels) and write.node_id == "n2"
    assert set(write.remove_labels) == {
        deny_label("web"),
        deny_label("batch"),
        health_key("webhook"),
    }


def test_a_degraded_node_sheds_no_next_batch_in_a_storm() -> None:
    crowded = cluster()
    extra = service("extra", replicas=1, labels=LOW, constraints=[steering_constraint("extra")])
    more = service("more", replicas=1, labels=LOW, constraints=[steering_constraint("more")])
    crowded = replace(
        crowded,
        services=(*crowded.services, extra, more),
        tasks=(*crowded.tasks, running(extra, 3, 1), running(more, 3, 1)),
    )
    first = settle(replace(crowded, health=(word(3, HealthState.DEGRADED),)))
    assert len(denied(first, 3)) == 2, "budgets.actions-per-node: 2 services a batch"
    # The first batch runs elsewhere now; in a storm the next one does not start.
    moved = replace(
        first,
        tasks=tuple(
            replace(t, node_id="n4")
            if t.node_id == "n3"
            and t.service_id != "s-web"
            and first.service_by_id[t.service_id].name in denied(first, 3)
            else t
            for t in first.tasks
        ),
    )
    calm = run(replace(moved, health=(word(3, HealthState.DEGRADED),)), now=NOW + 20)
    assert node_writes(calm), "without a storm the next batch follows"
    stormy = run(
        replace(moved, health=(word(1), word(2), word(3, HealthState.DEGRADED), word(4))),
        now=NOW + 20,
    )
    assert panic(stormy) is not None and node_writes(stormy) == ()
    assert any("degraded, but health panic" in d.reason for d in stormy.decisions)


def test_a_node_swarm_marks_down_is_failed_over_during_a_storm() -> None:
    policy = Policy.default()
    memory = started(cluster(), policy)  # node-3 was ready then
    snap = storm(cluster(down=frozenset({3})), 1, 2, 4)
    result = plan(snapshot=snap, policy=policy, memory=memory, now=NOW)
    decision = panic(result)
    assert decision is not None
    assert "3 of 3 ready and active node(s)" in decision.reason
    assert "1 node(s) Swarm marks down are no reports and fail over as usual" in decision.reason
    assert node_writes(result) == ()
    replicas = {a.service_name: a.replicas for a in surges(result)}
    assert replicas == {"web": 5, "batch": 3}, "node-3's tasks start elsewhere at once"


def test_a_plugin_vetoing_a_service_on_more_than_the_share_is_ignored() -> None:
    def vetoes(*pairs: tuple[str, int]) -> ClusterSnapshot:
        found = tuple(PluginVeto(p, "s-web", f"n{n}", "no path") for p, n in pairs)
        return replace(cluster(), plugins=PluginAdvice(vetoes=found, answered=("a", "b")))

    one = run(vetoes(("a", 2)))
    assert [a.node_id for a in node_writes(one)] == ["n2"]
    two = run(vetoes(("a", 2), ("a", 3)))
    assert node_writes(two) == ()
    assert any(
        d.rule == "plugins"
        and d.outcome == "ignore"
        and "plugin a vetoes 2 of the 4 ready and active" in d.reason
        for d in two.decisions
    )
    # Two plugins within the share each, over it together: set aside as well.
    both = run(vetoes(("a", 2), ("b", 3)))
    assert node_writes(both) == ()
    assert any(
        "the placement plugins veto it on 2 node(s)" in d.reason
        and "kept off 2 of the 4 ready and active node(s)" in d.reason
        for d in both.decisions
    )
    # A plugin over the share is set aside; another one within it still counts.
    mixed = run(vetoes(("a", 1), ("a", 2), ("b", 4)))
    assert [a.node_id for a in node_writes(mixed)] == ["n4"]


def test_no_quarantine_starts_in_a_storm() -> None:
    policy = policy_from_data(
        {"apiVersion": "placement/v1", "nodes": {"quarantine": {"failures": 2}}}
    )
    snap = cluster()
    events = tuple(WorkloadEvent(f"t{i}", "s-web", "n4", NOW - 100 + i) for i in range(3))
    quiet = run(replace(snap, workload=events), policy=policy)
    assert any(d.outcome == "quarantine" for d in quiet.decisions)
    stormy = run(replace(storm(snap, 1, 2, 3), workload=events), policy=policy)
    assert not any(d.outcome == "quarantine" for d in stormy.decisions)
    assert any("no quarantine starts in a health panic" in d.reason for d in stormy.decisions)


def test_a_storm_arriving_one_node_at_a_time_takes_only_the_first() -> None:
    """The monitor goes wrong node by node, a cycle apart: the first report is one node of
    four (within the share) and acted on; from the second on it is a storm."""
    snap, policy = cluster(), Policy.default()
    memory = started(snap, policy)
    for step, n in enumerate((2, 3, 4, 1)):
        snap = replace(snap, health=(*snap.health, word(n)))
        result = plan(snapshot=snap, policy=policy, memory=memory, now=NOW + step)
        snap, memory = apply_actions(snap, node_writes(result)), result.memory
    assert denied(snap, 2) == {"web", "batch"}
    assert [n for n in (1, 3, 4) if denied(snap, n)] == []
    assert panic(result) is not None


def test_a_storm_while_a_new_leader_calls_every_node_unknown_is_still_a_panic() -> None:
    # A new Raft leader reports every node `unknown` until it hears from it: a base of
    # ready nodes would be zero, and every report would be acted on.
    web = service("web", replicas=3, labels=MANAGED)
    nodes = [node(i, manager=i == 1, state=NodeState.UNKNOWN) for i in range(1, 5)]
    snap = snapshot(nodes, [web], [running(web, 1, 1), running(web, 3, 2), running(web, 4, 3)])
    storm = tuple(
        HealthReport(f"n{i}", HealthState.FAILED, "webhook", NOW + 300, reason="storm")
        for i in range(1, 5)
    )
    result = plan(
        snapshot=replace(snap, health=storm), policy=Policy.default(), memory=Memory(), now=NOW
    )
    assert any(
        d.outcome == "panic" and "4 of 4 ready and active node(s)" in d.reason
        for d in result.decisions
    )
    assert not [a for a in result.actions if isinstance(a, SetNodeLabels | SetNodeAvailability)]
