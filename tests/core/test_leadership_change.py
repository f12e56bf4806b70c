"""A Raft leadership change: Swarm calls every node `unknown` until it reports to the new
leader, and marks the silent ones down after the grace. Unknown is neither gone nor back:
no loss, no exit, no return, until a node is really marked down."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetReplicas, SetServiceConstraints
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, NodeState, Service, Task, TaskState
from controller.core.outside_inputs import LivenessSignal
from controller.core.plan import Plan, plan
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot

U, D = NodeState.UNKNOWN, NodeState.DOWN


def cluster(
    services: list[Service], tasks: list[Task], states: dict[int, NodeState]
) -> ClusterSnapshot:
    nodes = [node(i, manager=i <= 3, state=states.get(i, NodeState.READY)) for i in range(1, 6)]
    return snapshot(nodes, services, tasks)


def run(snap: ClusterSnapshot, memory: Memory, now: float) -> Plan:
    return plan(snapshot=snap, policy=Policy.default(), memory=memory, now=now)


def web_and_db() -> tuple[list[Service], list[Task]]:
    web = service("web", replicas=4, labels=MANAGED)
    db = service("db", replicas=1, labels={**MANAGED, "placement.failover-mode": "confirmed"})
    return [web, db], [*(running(web, i, i) for i in (1, 2, 3, 4)), running(db, 3, 1)]


def at_rest() -> tuple[list[Service], list[Task], Memory]:
    services, tasks = web_and_db()
    memory = Memory()
    for now in (100.0, 101.0):
        memory = run(cluster(services, tasks, {}), memory, now).memory
    return services, tasks, memory


def replicas_written(result: Plan) -> dict[str, int]:
    return {a.service_name: a.replicas for a in result.actions if isinstance(a, SetReplicas)}


def test_nodes_unknown_after_a_leadership_change_are_no_loss() -> None:
    services, tasks, memory = at_rest()
    unknown = run(cluster(services, tasks, {1: U, 3: U, 4: U, 5: U}), memory, 110.0)
    assert replicas_written(unknown) == {}, unknown.decisions
    back = run(cluster(services, tasks, {1: U}), unknown.memory, 112.0)
    assert replicas_written(back) == {}, back.decisions
    # Their ready-since is kept: nothing counts as a return (failback, rebalance joins).
    assert back.memory.node_ready_since == memory.node_ready_since
    assert not back.memory.node_downs


def test_an_unknown_node_marked_down_later_is_the_loss_it_held() -> None:
    services, tasks, memory = at_rest()
    unknown = run(cluster(services, tasks, {1: U, 3: U, 4: U}), memory, 110.0)
    back = run(cluster(services, tasks, {1: U}), unknown.memory, 112.0)
    left = [t for t in tasks if t.node_id != "n1"]
    down = run(cluster(services, left, {1: D}), back.memory, 125.0)
    assert replicas_written(down) == {"web": 5}  # node-1 held one task of web, none of db


def test_a_leadership_change_is_no_ungraceful_exit() -> None:
    services, tasks, memory = at_rest()
    for now in (110.0, 200.0, 300.0):  # three elections within the hour
        memory = run(cluster(services, tasks, {i: U for i in range(1, 6)}), memory, now).memory
        memory = run(cluster(services, tasks, {}), memory, now + 2).memory
    assert not memory.health.exits


def test_a_node_a_new_leader_marks_down_before_it_reports_is_no_ungraceful_exit() -> None:
    """Seen on a real 4-node swarm: after the leader's crash the new leader called every
    node unknown, marked the sound worker node-4 down (`heartbeat failure for node in
    "unknown" state`) and ready 2.3 s later. In a chaos run three such elections got
    node-4 quarantined for 2 h, leaving the managed services only the managers that the
    leader crashes kept failing."""
    services, tasks, memory = at_rest()
    for now in (110.0, 200.0, 300.0):  # three elections within the hour
        memory = run(cluster(services, tasks, {i: U for i in range(1, 6)}), memory, now).memory
        memory = run(cluster(services, tasks, {4: U}), memory, now + 1).memory
        memory = run(cluster(services, tasks, {4: D}), memory, now + 7).memory
        memory = run(cluster(services, tasks, {}), memory, now + 9).memory
    assert not memory.health.exits
    last = run(cluster(services, tasks, {}), memory, 310.0)
    assert not [d for d in last.decisions if d.outcome == "quarantine"]
    # A node that leaves while every node reports is an exit, as before.
    memory = run(cluster(services, tasks, {4: D}), memory, 320.0).memory
    assert list(memory.health.exits) == ["n4"]


def test_a_dead_old_leader_still_unknown_is_suspected_and_surged_for() -> None:
    services, tasks, memory = at_rest()
    gone = (
        LivenessSignal("n1", "probe", False, 109.0, "refused"),
        LivenessSignal("n1", "indirect", False, 109.0, "unreachable from node-2"),
    )
    snap = replace(cluster(services, tasks, {1: U}), liveness=gone)
    result = run(snap, memory, 112.0)
    assert replicas_written(result) == {"web": 5}, result.decisions
    assert any(
        d.outcome == "suspect" and "while Swarm says unknown" in d.reason for d in result.decisions
    )


def test_steering_waits_while_a_new_leader_has_not_heard_from_every_node() -> None:
    """Seen in a chaos run: planned from a view where every node was `unknown`, steering
    excluded all four nodes (the guards refused it), then wrote again as each reported."""
    db = service("db", replicas=1, labels={**MANAGED, "placement.preferred-nodes": "node-2"})
    settled = run(cluster([db], [running(db, 2, 1)], {}), Memory(), 100.0)
    (steer,) = [a for a in settled.actions if isinstance(a, SetServiceConstraints)]
    steered = replace(db, constraints=steer.constraints, labels={**db.labels, **steer.set_labels})
    tasks = [running(steered, 2, 1)]
    for states in ({i: U for i in range(1, 6)}, {1: U, 4: U}):
        held = run(cluster([steered], tasks, states), settled.memory, 110.0)
        assert held.actions == (), held.decisions
        (wait,) = [d for d in held.decisions if d.subject == "service db"]
        assert "unknown" in wait.reason and "steering waits" in wait.reason
    # Once every node has reported, steering goes on as before (here: nothing to change).
    after = run(cluster([steered], tasks, {}), settled.memory, 112.0)
    assert not [d for d in after.decisions if "steering waits" in d.reason]


def test_a_waiting_replica_is_let_onto_ready_nodes_only_its_steering_kept_it_off() -> None:
    """Seen in a chaos run: db's node failed with a Raft leader, its replacement waited
    `scheduling constraints not satisfied` on the one node taking tasks, which only the
    controller's exclusions kept it off, while steering waited for every node to report.
    Swarm alone would have placed it there: those exclusions go, and nothing else."""
    db = service("db", replicas=1, labels={**MANAGED, "placement.preferred-nodes": "node-2"})
    settled = run(cluster([db], [running(db, 2, 1)], {}), Memory(), 100.0)
    (steer,) = [a for a in settled.actions if isinstance(a, SetServiceConstraints)]
    steered = replace(db, constraints=steer.constraints, labels={**db.labels, **steer.set_labels})
    excluded = set(steered.labels["swarm-placement.excluded"].split(","))
    assert excluded == {"n3", "n4", "n5"}  # steered onto node-2, node-1 its standby
    pending = replace(running(steered, 2, 2), node_id="", state=TaskState.PENDING)
    # node-2 and its standby crashed; node-3 and node-5 report, node-4 not yet.
    states = {1: D, 2: D, 4: U}
    result = run(cluster([steered], [pending], states), settled.memory, 110.0)
    (opened,) = result.actions
    assert isinstance(opened, SetServiceConstraints) and opened.evicts_from == ()
    kept = set(opened.set_labels["swarm-placement.excluded"].split(","))
    assert kept == {"n4"}  # not reported yet: its exclusion stays
    assert set(opened.constraints) == set(steered.constraints) - {"node.id!=n3", "node.id!=n5"}
    (note,) = [d for d in result.decisions if d.rule == "owners"]
    assert note.outcome == "steer" and "placement only widens" in note.reason
    # A replica that runs needs nothing opened: steering just waits, as before.
    settled_view = run(cluster([steered], [running(steered, 3, 1)], states), settled.memory, 110.0)
    assert settled_view.actions == ()
