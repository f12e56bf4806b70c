"""Services with data on their node: the controller's own moves leave their tasks where
they are, failover still happens, and `placement.data: shared` lets them move.

The real-world case: the widely copied voting-app stack runs `postgres` with a named
local volume (`db-data:/var/lib/postgresql/data`) and `node.role == manager`.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.actions import SetReplicas, SetServiceConstraints
from controller.core.guards import disrupted_nodes
from controller.core.labels import EXCLUDED_LABEL, possible_constraint, possible_label
from controller.core.memory import Memory
from controller.core.model import NodeState, Service
from controller.core.plan import Plan, plan
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot
from .rebalance_builders import NOW as REBALANCE_NOW
from .rebalance_builders import layout, memory, nodes, outcomes, rebalancing, run
from .test_owners import NOW, STABLE

COUNT_KEY = "count:s-web"


def _postgres(**settings: str) -> Service:
    """The voting app's db: stop-first (Swarm's default), one replica on a manager, its
    data in the local volume db-data; preferred on node-1, failback at once."""
    labels = {**MANAGED, "placement.preferred-nodes": "node-1", "placement.failback": "immediate"}
    labels.update({"placement.failback-delay": "0s", EXCLUDED_LABEL: ""})
    labels.update({f"placement.{k}": v for k, v in settings.items()})
    db = service("db", replicas=1, labels=labels, constraints=["node.role==manager"])
    return replace(db, update_order="stop-first", local_data=("volume db-data",))


def _managers(down: int | None = None) -> list:  # type: ignore[type-arg]
    state = {down: NodeState.DOWN} if down else {}
    return [node(i, manager=True, state=state.get(i, NodeState.READY)) for i in (1, 2, 3)]


def _plan(snap, mem: Memory = STABLE, now: float = NOW) -> Plan:  # type: ignore[no-untyped-def]
    return plan(snapshot=snap, policy=Policy.default(), memory=mem, now=now)


def _moves(result: Plan) -> list:  # type: ignore[type-arg]
    return [a for a in result.actions if disrupted_nodes(a) or isinstance(a, SetReplicas)]


def test_postgres_with_a_local_volume_does_not_fail_back() -> None:
    """db failed over to node-2; node-1, its preferred owner, is back. Failing back would
    start postgres on node-1 without db-data: the task stays, and the decision says why."""
    db = _postgres()
    result = _plan(snapshot(_managers(), [db], [running(db, 2, 1)]))
    assert _moves(result) == [], result.actions
    assert not [d for d in result.decisions if d.outcome == "move"]
    keep = [d.reason for d in result.decisions if d.subject == "service db" and d.outcome == "keep"]
    assert any("its data is local to its node (volume db-data)" in r for r in keep), keep


def test_with_shared_data_the_same_postgres_fails_back() -> None:
    db = _postgres(data="shared")
    result = _plan(snapshot(_managers(), [db], [running(db, 2, 1)]))
    # The first step of a stop-first failback (the check above is not vacuous).
    assert [d.reason for d in result.decisions if d.outcome == "move"] == [
        "a task from node-2 to node-1: failback to preferred owner #1 node-1"
    ]


def test_data_local_set_by_policy_holds_a_service_without_mounts() -> None:
    db = replace(_postgres(data="local"), local_data=())
    result = _plan(snapshot(_managers(), [db], [running(db, 2, 1)]))
    assert _moves(result) == []
    assert any("placement.data: local" in d.reason for d in result.decisions)


def test_postgres_still_fails_over_when_its_node_goes_down() -> None:
    db = _postgres()
    snap = snapshot(_managers(), [db], [running(db, 2, 1)])
    before = _plan(snap)
    down = snapshot(_managers(down=2), [db], [running(db, 2, 1)])
    after = _plan(down, before.memory, NOW + 1)
    (surge,) = [a for a in after.actions if isinstance(a, SetReplicas)]
    assert surge.service_id == db.id and surge.replicas == 2
    assert any(d.rule == "failover" and d.outcome == "surge" for d in after.decisions)


def test_rebalancing_leaves_a_service_with_local_data_where_it_is() -> None:
    web = replace(rebalancing("web", 6), local_data=("bind /srv/web",))
    ns = nodes()
    mem = memory(ns, returned={"n3": 20.0}, persisted=[COUNT_KEY])
    result = run(snapshot(ns, [web], layout(web, [3, 3, 0])), mem)
    assert result.actions == ()
    assert "rebalance" not in outcomes(result)
    keep = [d.reason for d in result.decisions if d.outcome == "keep"]
    assert any("its data is local to its node (bind /srv/web)" in r for r in keep), keep
    # The same service with its data shared is rebalanced (the check is not vacuous).
    shared = replace(web, labels={**web.labels, "placement.data": "shared"})
    moved = run(snapshot(ns, [shared], layout(shared, [3, 3, 0])), mem, now=REBALANCE_NOW)
    assert "rebalance" in outcomes(moved)


@pytest.mark.parametrize("order", ["stop-first", "start-first"])
def test_a_task_with_local_data_on_a_node_no_possible_owner_stays_until_it_stops(
    order: str,
) -> None:
    """The operator's possible owners leave out node-2, where db runs with its data. The
    task is not moved off (postgres would start empty elsewhere): the constraints keep
    every other node out, the possible-owner constraint waits, and the gap is reported."""
    mark = {possible_label("db"): "true"}
    ns = [node(1, manager=True, labels=mark), node(2, manager=True), node(3, manager=True)]
    labels = {**MANAGED, "placement.possible-nodes": "node-1"}
    db = service("db", replicas=1, labels=labels, constraints=["node.role==manager"])
    db = replace(db, update_order=order, local_data=("volume db-data",))
    result = _plan(snapshot(ns, [db], [running(db, 2, 1)]))
    assert _moves(result) == [], result.actions
    (steer,) = [a for a in result.actions if isinstance(a, SetServiceConstraints)]
    assert steer.evicts_from == () and "node.id!=n3" in steer.constraints
    assert "node.id!=n2" not in steer.constraints
    assert possible_constraint("db") not in steer.constraints
    (gap,) = [d for d in result.decisions if d.code == "possible-unenforced"]
    assert "1 task(s) on node-2" in gap.reason and "volume db-data" in gap.reason, gap.reason

    # node-2 fails: failover replaces its task, and the only ready node the constraints
    # allow is node-1, a possible owner.
    down = [replace(n, state=NodeState.DOWN) if n.id == "n2" else n for n in ns]
    db2 = replace(db, constraints=steer.constraints, labels={**db.labels, **steer.set_labels})
    after = _plan(snapshot(down, [db2], [running(db2, 2, 1)]), result.memory, NOW + 1)
    assert [a.replicas for a in after.actions if isinstance(a, SetReplicas)] == [2]
