"""explain: what the rules weigh for each replica's node, and why pending tasks wait."""

from __future__ import annotations

from dataclasses import replace

from controller.core.decisions import LoggedDecision
from controller.core.explain import Past, explain_service
from controller.core.memory import Memory
from controller.core.model import Resources, Task, TaskState
from controller.core.plan import plan
from controller.policy import policy_from_data

from .builders import node, running, service, snapshot

POLICY = policy_from_data(
    {
        "apiVersion": "placement/v1",
        "services": [{"match": {"name": "db"}, "preferred-nodes": ["node-2", "node-3"]}],
    }
)
RACKS = [node(i, manager=i == 1, labels={"rack": f"r{(i + 1) // 2}"}) for i in (1, 2, 3)]


def _explain(svc, snap, history=()):  # type: ignore[no-untyped-def]
    result = plan(snapshot=snap, policy=POLICY, memory=Memory(), now=1_000_000.0)
    return explain_service(
        svc,
        snapshot=snap,
        policy=POLICY,
        resolved=result.resolved,
        decisions=result.decisions,
        history=history,
    )


def test_each_replica_says_which_owner_its_node_is_and_where_that_came_from() -> None:
    db = service("db", replicas=2, labels={"placement.managed": "true", "placement.spread": "rack"})
    snap = snapshot(RACKS, [db], [running(db, 2, 1), running(db, 1, 2)])
    moved = LoggedDecision("owners", "service db", "move", "a task from node-1 to node-2: failback")
    found = _explain(db, snap, [Past("2025-01-01T00:00:00Z", moved)])
    by_node = {r.node: r for r in found.replicas}
    assert (
        "preferred owner #1 (placement.preferred-nodes from file:services[0]"
        in (by_node["node-2"].reasons[0])
    )
    assert (
        by_node["node-1"].reasons[0].startswith("not a preferred owner (preferred: node-2, node-3")
    )
    assert any(
        r.startswith("rack r1; spread over rack (from label placement.spread)")
        for r in by_node["node-1"].reasons
    )
    assert by_node["node-2"].arrived is not None and by_node["node-2"].arrived.decision == moved
    assert by_node["node-1"].arrived is None
    assert any(d.rule == "owners" for d in found.now)
    sources = dict((name, src) for name, _, src in found.settings.setting_rows())  # type: ignore[union-attr]
    assert sources["preferred-nodes"].startswith("file:services[0]")
    assert sources["spread"] == "label placement.spread"


def test_a_pending_task_gets_swarm_s_reason_and_each_node_s_refusal() -> None:
    slots = [replace(n, capacity=Resources(generic={"slot": 2})) for n in RACKS]
    big = replace(
        service("big", replicas=1, constraints=["node.role==worker"]),
        reservations=Resources(generic={"slot": 3}),
    )
    waiting = Task(
        "t-big-1", big.id, "", 1, TaskState.RUNNING, TaskState.PENDING,
        error="no suitable node (insufficient resources on 3 nodes)",
    )  # fmt: skip
    found = _explain(big, snapshot(slots, [big], [waiting]))
    assert [p.swarm for p in found.pending] == [waiting.error]
    refusals = dict(found.pending[0].nodes)
    assert refusals["node-1"] == (
        "insufficient resources: needs slot=3, slot=2 free",
        "constraint node.role==worker is not met",
    )
    assert refusals["node-2"] == ("insufficient resources: needs slot=3, slot=2 free",)
    assert found.constraints == (("node.role==worker", "the operator's (the service spec)"),)
    assert not found.replicas
