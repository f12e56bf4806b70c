"""A service failing on one node leaves it; one failing everywhere is not chased; plugins."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetNodeLabels, SetServiceConstraints
from controller.core.health.node_marks import unhealthy_key
from controller.core.labels import deny_label, exclusion_constraint, steering_constraint
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot
from controller.core.outside_inputs import (
    PluginAdvice,
    PluginVeto,
    WorkloadEvent,
    WorkloadEventKind,
)
from controller.core.plan import Plan, plan
from controller.policy import policy_from_data

from .builders import MANAGED, node, running, service, snapshot

T0 = 50_000.0
NOW = T0 + 1000
THRESHOLD = {**MANAGED, "placement.failover-threshold": "3/10m"}
# Failures of a service on one node also count against the node (quarantine); here only
# the service's side is looked at (tests/core/test_quarantine.py has the node's).
POLICY = policy_from_data({"apiVersion": "placement/v1", "nodes": {"quarantine": {"failures": 99}}})


def cluster(
    *, labels: dict[int, dict[str, str]] | None = None, constraints: tuple[str, ...] = ()
) -> ClusterSnapshot:
    web = service(
        "web", replicas=3, labels=THRESHOLD, constraints=[*constraints, steering_constraint("web")]
    )
    nodes = [node(n, manager=n == 1, labels=(labels or {}).get(n)) for n in range(1, 6)]
    tasks = [running(web, n, slot) for slot, n in [(1, 1), (2, 2), (3, 3)]]
    return snapshot(nodes, [web], tasks)


def failing(
    node_id: str, n: int = 3, *, kind: WorkloadEventKind = WorkloadEventKind.FAILED
) -> tuple[WorkloadEvent, ...]:
    return tuple(
        WorkloadEvent(f"t-{node_id}-{i}", "s-web", node_id, NOW - 100 + i, kind) for i in range(n)
    )


def run(snap: ClusterSnapshot, now: float = NOW) -> Plan:
    memory = plan(
        snapshot=replace(snap, workload=()), policy=POLICY, memory=Memory(), now=T0
    ).memory
    return plan(snapshot=snap, policy=POLICY, memory=memory, now=now)


def node_labels(result: Plan) -> dict[str, SetNodeLabels]:
    return {a.node_id: a for a in result.actions if isinstance(a, SetNodeLabels)}


def test_three_failures_on_one_node_move_the_service_off_it() -> None:
    unhealthy_then_failed = (
        *failing("n2", 2),
        WorkloadEvent("t-n2-1", "s-web", "n2", NOW - 50, WorkloadEventKind.UNHEALTHY),
    )
    assert not node_labels(run(replace(cluster(), workload=unhealthy_then_failed))), (
        "one task is one failure"
    )
    result = run(replace(cluster(), workload=failing("n2")))
    action = node_labels(result)["n2"]
    assert action.set_labels == {deny_label("web"): "true", unhealthy_key("web"): f"{NOW:.3f}"}
    assert action.evicts_services == ("s-web",)
    assert any(
        d.outcome == "move-off" and "3 task failure(s) on node-2" in d.reason
        for d in result.decisions
    )


def test_the_node_is_the_services_again_after_the_period() -> None:
    since = NOW - 601
    snap = cluster(labels={2: {deny_label("web"): "true", unhealthy_key("web"): f"{since:.3f}"}})
    action = node_labels(run(snap))["n2"]
    assert set(action.remove_labels) == {deny_label("web"), unhealthy_key("web")}
    assert action.evicts_services == ()


def test_a_service_failing_everywhere_is_not_chased_and_says_so() -> None:
    moved = {
        n: {deny_label("web"): "true", unhealthy_key("web"): f"{NOW - 300:.3f}"} for n in (2, 3, 4)
    }
    result = run(replace(cluster(labels=moved), workload=failing("n1")))
    assert not node_labels(result)
    hold = [d for d in result.decisions if d.outcome == "hold"]
    assert hold and "failover-threshold 3/10 min reached" in hold[0].reason


def test_never_off_the_last_node_it_may_run_on() -> None:
    snap = cluster(constraints=("node.hostname==node-2",))
    result = run(replace(snap, workload=failing("n2")))
    assert not node_labels(result)
    assert any("no other node may run it" in d.reason for d in result.decisions)


def test_a_plugin_veto_refuses_the_node_and_a_veto_of_every_node_is_set_aside() -> None:
    veto = PluginVeto("topo", "s-web", "n2", "no path to san-a")
    result = run(replace(cluster(), plugins=PluginAdvice(vetoes=(veto,), answered=("topo",))))
    action = node_labels(result)["n2"]
    assert action.set_labels == {deny_label("web"): "true"} and action.evicts_services == ("s-web",)
    assert any("vetoed by plugin topo: no path to san-a" in d.reason for d in result.decisions)
    everywhere = tuple(PluginVeto("topo", "s-web", f"n{n}") for n in range(1, 6))
    result = run(replace(cluster(), plugins=PluginAdvice(vetoes=everywhere)))
    assert not node_labels(result)
    assert any(d.outcome == "ignore" for d in result.decisions)
    unmanaged = PluginVeto("topo", "s-other", "n2")
    assert not node_labels(run(replace(cluster(), plugins=PluginAdvice(vetoes=(unmanaged,)))))


def test_plugin_scores_rank_nodes_the_policy_leaves_equal() -> None:
    db = service("db", replicas=2, labels={**MANAGED, "placement.preferred-nodes": "node-1"})
    snap = snapshot([node(n, manager=n == 1) for n in range(1, 5)], [db])

    def excluded(result: Plan) -> set[str]:
        [action] = [a for a in result.actions if isinstance(a, SetServiceConstraints)]
        return {c for c in action.constraints if c.startswith("node.id!=")}

    # The second replica goes to node-2 by hostname order, to node-4 by the plugin's score.
    without = {exclusion_constraint("n3"), exclusion_constraint("n4")}
    assert excluded(run(snap)) == without
    scored = replace(snap, plugins=PluginAdvice(scores={"s-db": {"n4": 10.0, "n3": 5.0}}))
    assert excluded(run(scored)) == {exclusion_constraint("n2"), exclusion_constraint("n3")}


def test_failing_everywhere_at_once_moves_it_off_no_more_than_the_panic_threshold() -> None:
    """A shared dependency down: 5 failures on each of 5 nodes in one go, `5/10m`. Without
    the cap it would leave four nodes at once; controller.health-panic-threshold (0.34 of
    the 5 nodes that may take it) lets it leave one."""
    snap = cluster()
    web = replace(snap.services[0], labels={**MANAGED, "placement.failover-threshold": "5/10m"})
    everywhere = tuple(e for n in range(1, 6) for e in failing(f"n{n}", 5))
    result = run(replace(snap, services=(web,), workload=everywhere))
    moved = [a for a in node_labels(result).values() if unhealthy_key("web") in a.set_labels]
    assert len(moved) == 1
    assert any(
        d.outcome == "hold" and "controller.health-panic-threshold 34% allows 1" in d.reason
        for d in result.decisions
    )
