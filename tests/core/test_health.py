"""Node health in the planner: failed, degraded, released, durable across a restart."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetNodeAvailability, SetNodeLabels, SetReplicas
from controller.core.apply import apply_actions
from controller.core.health.node_marks import PAUSED, health_key
from controller.core.labels import deny_label, steering_constraint
from controller.core.memory import Memory
from controller.core.model import Availability, ClusterSnapshot
from controller.core.outside_inputs import HealthReport, HealthState
from controller.core.plan import Plan, plan
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot

NOW = 10_000.0


def web_snapshot(replicas: int = 3, *, labels2: dict[str, str] | None = None) -> ClusterSnapshot:
    web = service(
        "web", replicas=replicas, labels=MANAGED, constraints=[steering_constraint("web")]
    )
    nodes = [node(1, manager=True), node(2, labels=labels2), node(3)]
    tasks = [
        running(web, n, slot) for slot, n in zip(range(1, replicas + 1), [1, 2, 3], strict=False)
    ]
    return snapshot(nodes, [web], tasks)


def report(
    state: HealthState, *, node_id: str = "n2", ttl: float = 60.0, source: str = "webhook"
) -> HealthReport:
    return HealthReport(node_id, state, source, NOW + ttl, reason="disk gone")


def run(snap: ClusterSnapshot, *, memory: Memory | None = None, now: float = NOW) -> Plan:
    return plan(snapshot=snap, policy=Policy.default(), memory=memory or started(snap), now=now)


def started(snap: ClusterSnapshot) -> Memory:
    """The memory of a controller that saw this cluster, healthy, a while ago."""
    calm = replace(snap, health=(), workload=())
    return plan(snapshot=calm, policy=Policy.default(), memory=Memory(), now=NOW - 1000).memory


def node_action(result: Plan, node_id: str = "n2") -> SetNodeLabels | SetNodeAvailability:
    found = [
        a
        for a in result.actions
        if isinstance(a, SetNodeLabels | SetNodeAvailability) and a.node_id == node_id
    ]
    assert len(found) == 1, result.actions
    return found[0]


def node_writes(result: Plan) -> list[SetNodeLabels | SetNodeAvailability]:
    return [a for a in result.actions if isinstance(a, SetNodeLabels | SetNodeAvailability)]


def settle(snap: ClusterSnapshot, now: float = NOW) -> ClusterSnapshot:
    """Apply the node writes of successive cycles until there are none."""
    memory = started(snap)
    for _ in range(5):
        result = plan(snapshot=snap, policy=Policy.default(), memory=memory, now=now)
        writes = node_writes(result)
        if not writes:
            return snap
        snap, memory = apply_actions(snap, tuple(writes)), result.memory
    raise AssertionError("node writes did not settle")


def failed_snapshot() -> ClusterSnapshot:
    return settle(replace(web_snapshot(), health=(report(HealthState.FAILED),)))


def test_a_failed_node_refuses_its_tasks_surges_them_elsewhere_and_is_not_paused() -> None:
    snap = web_snapshot()
    result = run(replace(snap, health=(report(HealthState.FAILED),)))
    action = node_action(result)
    # Swarm's constraint enforcer evicts nothing from a paused node: refuse first.
    assert isinstance(action, SetNodeLabels)
    assert action.set_labels[deny_label("web")] == "true"
    assert action.set_labels[health_key("webhook")].startswith(f"failed,{NOW + 60:.3f},disk gone")
    assert PAUSED not in action.set_labels
    assert action.evicts_services == ("s-web",)
    surge = [a for a in result.actions if isinstance(a, SetReplicas)]
    assert [a.replicas for a in surge] == [4], "the lost replica starts at once elsewhere"
    assert result.actions.index(action) < result.actions.index(surge[0]), "evict first"
    assert any(d.rule == "health" and d.outcome == "failed" for d in result.decisions)
    # No pause follows: it would keep the unmanaged services' new tasks off the node too.
    labelled = apply_actions(replace(snap, health=(report(HealthState.FAILED),)), (action,))
    assert not node_writes(run(labelled, now=NOW + 1))


def test_the_failure_is_durable_and_released_by_ok_or_by_its_ttl() -> None:
    labelled = replace(failed_snapshot(), health=())
    assert labelled.node_by_id["n2"].availability is Availability.ACTIVE
    # A restarted controller (no report, empty memory) keeps the node failed.
    again = plan(snapshot=labelled, policy=Policy.default(), memory=Memory(), now=NOW + 1)
    assert not node_writes(again)
    assert any(d.outcome == "failed" for d in again.decisions if d.rule == "health")
    # `ok` releases it: labels gone; nothing is moved back by the release.
    ok = run(replace(labelled, health=(report(HealthState.OK),)), now=NOW + 2)
    release = node_action(ok)
    assert isinstance(release, SetNodeLabels)
    assert set(release.remove_labels) == {deny_label("web"), health_key("webhook")}
    assert release.evicts_services == ()
    # So does the ttl, without any report.
    lapsed = run(labelled, now=NOW + 61)
    assert node_action(lapsed).remove_labels == release.remove_labels


def test_a_repeated_report_does_not_rewrite_the_node() -> None:
    labelled = failed_snapshot()
    same = run(replace(labelled, health=(report(HealthState.FAILED, ttl=62.0),)), now=NOW + 1)
    assert not node_writes(same)


def test_the_worst_source_wins_and_each_source_releases_only_its_own_word() -> None:
    both = (report(HealthState.FAILED, source="plugin.topo"), report(HealthState.DEGRADED))
    labelled = settle(replace(web_snapshot(), health=both))
    assert set(labelled.node_by_id["n2"].labels) >= {
        health_key("plugin.topo"),
        health_key("webhook"),
    }
    ok = run(replace(labelled, health=(report(HealthState.OK),)), now=NOW + 1)
    action = node_action(ok)
    assert action.remove_labels == (health_key("webhook"),), "the plugin still says failed"


def test_a_node_an_earlier_version_paused_is_made_active_with_the_eviction() -> None:
    degraded = settle(replace(web_snapshot(replicas=1), health=(report(HealthState.DEGRADED),)))
    # web has no task on node-2 (1 replica on node-1): the node only carries its mark.
    assert degraded.node_by_id["n2"].availability is Availability.ACTIVE
    old_pause = {**degraded.node_by_id["n2"].labels, PAUSED: "health"}
    paused = replace(
        degraded,
        nodes=tuple(
            replace(n, availability=Availability.PAUSE, labels=old_pause) if n.id == "n2" else n
            for n in degraded.nodes
        ),
    )
    moved_in = replace(paused, tasks=tuple(replace(t, node_id="n2") for t in paused.tasks))
    failing = replace(moved_in, health=(report(HealthState.FAILED),))
    action = node_action(run(failing, now=NOW + 1))
    assert isinstance(action, SetNodeAvailability) and action.availability is Availability.ACTIVE
    assert action.set_labels[deny_label("web")] == "true" and action.evicts_services == ("s-web",)
    assert PAUSED in action.remove_labels
    after = apply_actions(failing, (action,))
    assert not node_writes(run(after, now=NOW + 2)), "and it is not paused again"


def test_a_degraded_node_sheds_preemptible_work_in_batches() -> None:
    services = [
        service(
            name,
            labels={**MANAGED, "placement.priority": prio},
            constraints=[steering_constraint(name)],
        )
        for name, prio in [("a", "low"), ("b", "low"), ("c", "medium"), ("keep", "high")]
    ]
    pinned = replace(services[3], labels={**services[3].labels, "placement.preemptible": "false"})
    services[3] = pinned
    nodes = [node(1, manager=True), node(2), node(3)]
    tasks = [running(s, 2, 1) for s in services]
    snap = replace(snapshot(nodes, services, tasks), health=(report(HealthState.DEGRADED),))
    action = node_action(run(snap))
    assert isinstance(action, SetNodeLabels), "refused by labels, never paused"
    denied = {k for k in action.set_labels if k.startswith("swarm-placement.deny.")}
    assert denied == {deny_label("a"), deny_label("b")}, "lowest priority first, 2 per node"
    labelled = apply_actions(snap, (action,))
    # The next batch waits until the first one runs elsewhere.
    waiting = run(labelled, now=NOW + 2)
    assert not node_writes(waiting)
    assert any(d.outcome == "wait" and "still moving off" in d.reason for d in waiting.decisions)
    moved = replace(
        labelled,
        tasks=tuple(
            replace(t, node_id="n3") if t.service_id in {"s-a", "s-b"} else t
            for t in labelled.tasks
        ),
    )
    following = node_action(run(moved, now=NOW + 3))
    assert isinstance(following, SetNodeLabels)
    assert set(following.set_labels) == {deny_label("c")}, "preemptible: false stays"


def test_the_last_manager_that_takes_tasks_is_never_paused() -> None:
    snap = web_snapshot()
    result = run(replace(snap, health=(report(HealthState.FAILED, node_id="n1"),)))
    action = node_action(result, "n1")
    assert isinstance(action, SetNodeLabels), "labels only, no pause"
    assert deny_label("web") in action.set_labels
    assert any("no other manager takes tasks" in d.reason for d in result.decisions)


def test_an_unknown_or_garbled_health_label_is_dropped() -> None:
    snap = web_snapshot(labels2={health_key("webhook"): "failed,soon,??"})
    result = run(snap)
    assert node_action(result).remove_labels == (health_key("webhook"),)


def test_agents_and_plugins_that_cannot_be_read_are_reported_and_nothing_else() -> None:
    from controller.core.outside_inputs import SourceStatus  # noqa: PLC0415

    snap = web_snapshot()
    gone = (
        SourceStatus("agent", "node-2", "no answer within 2 s"),
        SourceStatus("plugin", "topo", "refused"),
    )
    result = run(replace(snap, unavailable_sources=gone))
    assert result.actions == ()
    lines = [d.line() for d in result.decisions]
    assert any("agent node-2" in line and "no node failure" in line for line in lines)
    assert any("plugin topo" in line and "goes on without it" in line for line in lines)
