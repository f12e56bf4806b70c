"""The owners rule: preferred and possible owners, failback, anti-affinity, spread."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controller.core.actions import SetNodeLabels, SetReplicas, SetServiceConstraints
from controller.core.apply import apply_actions
from controller.core.clock import time_of_day
from controller.core.decisions import Code
from controller.core.labels import (
    EXCLUDED_LABEL,
    exclusion_constraint,
    exclusion_constraints,
    format_exclusions,
    possible_constraint,
    possible_label,
    steering_constraint,
)
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, NodeState, Service, Task, TaskState
from controller.core.plan import Plan, plan
from controller.core.rules import rules_named
from controller.policy import ControllerSettings, Policy, SteeringMode

from .builders import node, running, service, snapshot

NOW = 1_000_000.0
STABLE = Memory(node_ready_since={f"n{i}": 0.0 for i in range(1, 9)}, started=True)


def managed(name: str, replicas: int, *, steered: bool = True, **settings: str) -> Service:
    """A managed service; `steered` means the controller has steered it before."""
    labels = {"placement.managed": "true"}
    labels.update({f"placement.{k.replace('_', '-')}": v for k, v in settings.items()})
    if steered:
        labels[EXCLUDED_LABEL] = ""
    svc = service(name, replicas=replicas, labels=labels)
    return replace(svc, constraints=(steering_constraint(name),))


def owners_only(snap: ClusterSnapshot, memory: Memory = STABLE, now: float = NOW) -> Plan:
    return plan(
        snapshot=snap,
        policy=Policy.default(),
        memory=memory,
        now=now,
        rules=rules_named("owners"),
    )


def excluded_hosts(action: SetServiceConstraints) -> set[str]:
    return {
        c.removeprefix("node.id!=").replace("n", "node-")
        for c in action.constraints
        if c.startswith("node.id!=")
    }


def only_constraints(result: Plan) -> SetServiceConstraints:
    (action,) = result.actions
    assert isinstance(action, SetServiceConstraints)
    return action


def four_nodes(**labels: Mapping[str, str]) -> list:  # type: ignore[type-arg]
    return [node(1, manager=True), node(2), node(3), node(4)]


def test_preferred_owners_at_rest_keep_one_standby_and_move_nothing() -> None:
    db = managed("db", 2, preferred_nodes="node-2,node-3")
    snap = snapshot(four_nodes(), [db], [running(db, 2, 1), running(db, 3, 2)])
    action = only_constraints(owners_only(snap))
    assert action.evicts_from == ()
    # node-1 is the standby (fewest tasks, then hostname); node-4 is kept out.
    assert excluded_hosts(action) == {"node-4"}
    assert action.set_labels == {EXCLUDED_LABEL: "n4"}


def test_a_replica_off_its_preferred_owner_moves_back_when_failback_is_immediate() -> None:
    db = managed("db", 2, preferred_nodes="node-2,node-3", failback="immediate")
    snap = snapshot(four_nodes(), [db], [running(db, 1, 1), running(db, 3, 2)])
    result = owners_only(snap)
    action = only_constraints(result)
    assert action.evicts_from == ("n1",)
    assert excluded_hosts(action) == {"node-1", "node-4"}  # no standby while moving
    (move,) = [d for d in result.decisions if d.outcome == "move"]
    assert move.reason == "a task from node-1 to node-2: failback to preferred owner #1 node-2"
    assert move.code == Code.FAILBACK  # what the failback metric counts


def test_failback_waits_for_failback_delay_after_the_node_returns() -> None:
    db = managed("db", 1, preferred_nodes="node-2", failback="immediate", failback_delay="60s")
    snap = snapshot(four_nodes(), [db], [running(db, 1, 1)])
    just_back = replace(STABLE, node_ready_since={**STABLE.node_ready_since, "n2": NOW - 30})
    result = owners_only(snap, memory=just_back)
    assert all(not a.evicts_from for a in result.actions if isinstance(a, SetServiceConstraints))
    assert any(d.outcome == "keep" for d in result.decisions)
    later = owners_only(snap, memory=just_back, now=NOW + 31)
    assert only_constraints(later).evicts_from == ("n1",)


def test_failback_never_keeps_the_task_where_it_failed_over_to() -> None:
    db = managed("db", 1, preferred_nodes="node-2", failback="never")
    snap = snapshot(four_nodes(), [db], [running(db, 1, 1)])
    result = owners_only(snap)
    assert all(not a.evicts_from for a in result.actions if isinstance(a, SetServiceConstraints))
    (keep,) = [d for d in result.decisions if d.outcome == "keep"]
    assert "failback is never" in keep.reason


def test_failback_window_closed_then_open() -> None:
    db = managed("db", 1, preferred_nodes="node-2", failback="window 01:00-05:00")
    snap = snapshot(four_nodes(), [db], [running(db, 1, 1)])
    noon = 1_700_049_600.0  # 2023-11-15 12:00 UTC
    closed = owners_only(snap, now=noon)
    assert all(not a.evicts_from for a in closed.actions if isinstance(a, SetServiceConstraints))
    assert any("window 01:00-05:00 is closed (now 12:00 UTC)" in d.reason for d in closed.decisions)
    two_am = noon + 14 * 3600
    assert only_constraints(owners_only(snap, now=two_am)).evicts_from == ("n1",)


def test_no_moves_while_the_service_is_settling_or_cooling_down() -> None:
    db = managed("db", 1, preferred_nodes="node-2", failback="immediate")
    snap = snapshot(four_nodes(), [db], [running(db, 1, 1)])
    cooling = STABLE.note_move(db.id, NOW - 10)
    result = owners_only(snap, memory=cooling)
    assert all(not a.evicts_from for a in result.actions if isinstance(a, SetServiceConstraints))
    assert any("cooldown" in d.reason for d in result.decisions)


def test_a_lost_preferred_owner_is_excluded_and_the_standby_is_the_next_preferred() -> None:
    db = managed("db", 1, preferred_nodes="node-2,node-3")
    down2 = node(2, state=NodeState.DOWN)
    snap = snapshot([node(1, manager=True), down2, node(3), node(4)], [db], [running(db, 3, 1)])
    action = only_constraints(owners_only(snap))
    assert action.evicts_from == ()
    # Runs on node-3; standby is node-1 (next by load and name); node-2 and node-4 out.
    assert excluded_hosts(action) == {"node-2", "node-4"}


def test_possible_owners_wait_for_their_labels_then_constrain() -> None:
    web = managed("web", 2, possible_nodes="node-2,node-3")
    snap = snapshot(four_nodes(), [web], [running(web, 2, 1), running(web, 3, 2)])
    full = plan(snapshot=snap, policy=Policy.default(), memory=STABLE, now=NOW)
    labels = [a for a in full.actions if isinstance(a, SetNodeLabels)]
    assert sorted(a.hostname for a in labels) == ["node-2", "node-3"]
    assert all(a.set_labels == {possible_label("web"): "true"} for a in labels)
    assert not any(
        isinstance(a, SetServiceConstraints) and possible_constraint("web") in a.constraints
        for a in full.actions
    )
    labelled = snapshot(
        [
            node(1, manager=True),
            node(2, labels={possible_label("web"): "true"}),
            node(3, labels={possible_label("web"): "true"}),
            node(4),
        ],
        [web],
        snap.tasks,
    )
    action = only_constraints(owners_only(labelled))
    assert possible_constraint("web") in action.constraints
    assert action.evicts_from == ()


def test_a_possible_owner_mark_stays_while_tasks_run_there_and_goes_once_they_moved() -> None:
    """node-2 left the possible owners. Removing its mark would stop the task there at
    once (Swarm's constraint enforcer ignores the update order): the owners rule moves
    the task first, and the mark goes once nothing of the service runs there."""
    mark = {possible_label("web"): "true"}
    web = replace(
        managed("web", 2, possible_nodes="node-3,node-4"),
        constraints=(steering_constraint("web"), possible_constraint("web")),
    )
    nodes = [
        node(1, manager=True),
        node(2, labels=mark),
        node(3, labels=mark),
        node(4, labels=mark),
    ]
    snap = snapshot(nodes, [web], [running(web, 2, 1), running(web, 3, 2)])
    full = plan(snapshot=snap, policy=Policy.default(), memory=STABLE, now=NOW)
    assert not [a for a in full.actions if isinstance(a, SetNodeLabels)], full.actions
    assert any("stays while web still runs tasks here" in d.reason for d in full.decisions)
    (move,) = [a for a in full.actions if isinstance(a, SetServiceConstraints)]
    assert move.evicts_from == ("n2",)

    moved = snapshot(nodes, [web], [running(web, 4, 1), running(web, 3, 2)])
    after = plan(snapshot=moved, policy=Policy.default(), memory=STABLE, now=NOW + 1)
    (label,) = [a for a in after.actions if isinstance(a, SetNodeLabels)]
    assert label.hostname == "node-2" and label.remove_labels == (possible_label("web"),)


def test_every_possible_owner_down_leaves_replicas_pending() -> None:
    web = managed("web", 1, possible_nodes="node-2")
    snap = snapshot(
        [
            node(1, manager=True),
            node(2, state=NodeState.DOWN, labels={possible_label("web"): "true"}),
        ],
        [web],
    )
    result = owners_only(snap)
    (pending,) = [d for d in result.decisions if d.outcome == "pending"]
    assert "stay pending" in pending.reason


def test_soft_anti_affinity_separates_and_tolerates() -> None:
    a = managed("a", 1, anti_affinity="front")
    b = managed("b", 1, anti_affinity="front")
    together = snapshot(four_nodes(), [a, b], [running(a, 2, 1), running(b, 2, 1)])
    result = owners_only(together)
    moved = [x for x in result.actions if isinstance(x, SetServiceConstraints) and x.evicts_from]
    assert [x.service_name for x in moved] == ["b"]  # same priority: the later name moves
    # With only one node left, soft mates share it and nothing is pending.
    alone = snapshot(
        [node(1, manager=True, state=NodeState.DOWN), node(2)],
        [a, b],
        [running(a, 2, 1), running(b, 2, 1)],
    )
    result = owners_only(alone)
    assert not any(d.outcome == "pending" for d in result.decisions)


def test_hard_anti_affinity_never_shares_a_node_and_leaves_one_pending() -> None:
    a = managed("a", 1, anti_affinity="front", anti_affinity_mode="hard")
    b = managed("b", 1, anti_affinity="front", anti_affinity_mode="hard")
    snap = snapshot(
        [node(1, manager=True, state=NodeState.DOWN), node(2)], [a, b], [running(a, 2, 1)]
    )
    result = owners_only(snap)
    (b_action,) = [
        x for x in result.actions if isinstance(x, SetServiceConstraints) and x.service_name == "b"
    ]
    assert exclusion_constraint("n2") in b_action.constraints
    assert any(d.subject == "service b" and d.outcome == "pending" for d in result.decisions)


def test_spread_over_racks_moves_the_fewest_tasks() -> None:
    racks = {1: "r1", 2: "r1", 3: "r2", 4: "r2"}
    nodes = [node(i, manager=i == 1, labels={"rack": racks[i]}) for i in range(1, 5)]
    web = managed("web", 2, spread="rack")
    snap = snapshot(nodes, [web], [running(web, 1, 1), running(web, 2, 2)])
    result = owners_only(snap)
    action = only_constraints(result)
    assert len(action.evicts_from) == 1  # max-unavailable 1: one move per cycle
    (move,) = [d for d in result.decisions if d.outcome == "move"]
    assert "restore spread over rack" in move.reason


def test_nothing_is_written_while_a_move_is_in_flight() -> None:
    db = managed("db", 1, preferred_nodes="node-2", failback="immediate")
    moving = replace(
        db, constraints=(*db.constraints, "node.id!=n1"), labels={**db.labels, EXCLUDED_LABEL: "n1"}
    )
    starting = replace(running(db, 2, 2), state=TaskState.STARTING)
    snap = snapshot(four_nodes(), [moving], [running(db, 1, 1), starting])
    result = owners_only(snap)
    assert result.actions == ()
    assert [d.outcome for d in result.decisions] == ["wait"]
    updating = snapshot(
        four_nodes(), [replace(moving, update_state="updating")], [running(db, 1, 1)]
    )
    assert owners_only(updating).actions == ()


def test_a_never_steered_service_is_placed_on_its_preferred_owners_whatever_failback_says() -> None:
    db = managed("db", 1, steered=False, preferred_nodes="node-2", failback="never")
    snap = snapshot(four_nodes(), [db], [running(db, 1, 1)])
    result = owners_only(snap)
    assert only_constraints(result).evicts_from == ("n1",)
    (move,) = [d for d in result.decisions if d.outcome == "move"]
    assert "first placement on preferred owner #1 node-2" in move.reason
    assert move.code is None  # not a failback


def test_a_failover_of_a_never_steered_service_is_recorded_at_once() -> None:
    # The exclusion label is what makes the return a failback: a steering write held
    # back after a node went down (as a settle wait once did) left a service that had
    # never been steered looking unsteered, and node-2's quick return then moved the
    # task back as a first placement, whatever `failback: never` said.
    db = managed("db", 1, steered=False, preferred_nodes="node-2", failback="never")
    nodes = [node(1, manager=True), node(2, state=NodeState.DOWN), node(3), node(4)]
    lost = snapshot(nodes, [db], [running(db, 3, 1)])
    first = owners_only(lost)
    record = only_constraints(first)
    assert record.evicts_from == () and EXCLUDED_LABEL in record.set_labels
    back = replace(apply_actions(lost, first.actions), nodes=tuple(four_nodes()))
    result = owners_only(back, memory=first.memory, now=NOW + 600)
    assert all(not a.evicts_from for a in result.actions if isinstance(a, SetServiceConstraints))
    assert any("failback is never" in d.reason for d in result.decisions)


def test_spread_surplus_on_a_node_that_keeps_tasks_is_moved_by_surge_and_trim() -> None:
    racks = {1: "r1", 2: "r1", 3: "r2", 4: "r2"}
    nodes = [node(i, manager=i == 1, labels={"rack": racks[i]}) for i in range(1, 5)]
    web = managed("web", 4, spread="rack", max_unavailable="2")
    tasks = [running(web, 1, 1), running(web, 1, 2), running(web, 2, 3), running(web, 2, 4)]
    # All four nodes are targets, so the constraints already allow exactly them: no
    # node is vacated (nodes 1 and 2 keep a task each) and the surge goes out at once.
    (surge,) = owners_only(snapshot(nodes, [web], tasks)).actions
    assert isinstance(surge, SetReplicas) and surge.replicas == 6
    assert surge.set_labels["swarm-placement.replicas"] == "4"
    assert surge.set_labels["swarm-placement.operation"] == "rebalance"


def test_steering_modes_at_rest() -> None:
    db = managed("db", 1, preferred_nodes="node-2,node-3")
    snap = snapshot(four_nodes(), [db], [running(db, 2, 1)])

    def excluded(mode: SteeringMode) -> set[str]:
        policy = replace(Policy.default(), controller=ControllerSettings(steering=mode))
        result = plan(
            snapshot=snap, policy=policy, memory=STABLE, now=NOW, rules=rules_named("owners")
        )
        if not result.actions:  # nothing to change: the service has no exclusions
            return set()
        return excluded_hosts(only_constraints(result))

    assert excluded(SteeringMode.STANDBY) == {"node-1", "node-4"}  # node-3 is the standby
    assert excluded(SteeringMode.STRICT) == {"node-1", "node-3", "node-4"}
    assert excluded(SteeringMode.OPEN) == set()


def test_standby_past_the_exclusion_cap_is_open_at_rest_but_moves_stay_exact() -> None:
    db = managed("db", 1, preferred_nodes="node-2,node-3", failback="immediate")
    with_exclusions = replace(
        db,
        labels={**db.labels, EXCLUDED_LABEL: "n1,n4"},
        constraints=(*db.constraints, "node.id!=n1", "node.id!=n4"),
    )

    def run(svc: Service, on: int, cap: int) -> Plan:
        settings = ControllerSettings(steering_max_exclusions=cap)
        return plan(
            snapshot=snapshot(four_nodes(), [svc], [running(svc, on, 1)]),
            policy=replace(Policy.default(), controller=settings),
            memory=STABLE,
            now=NOW,
            rules=rules_named("owners"),
        )

    # At rest on node-2, standby would exclude node-1 and node-4: two, over a cap of one.
    lifted = run(with_exclusions, 2, cap=1)
    action = only_constraints(lifted)
    assert excluded_hosts(action) == set() and action.evicts_from == ()
    (steer,) = [d for d in lifted.decisions if d.outcome == "steer"]
    assert "steering-max-exclusions" in steer.reason
    assert not run(db, 2, cap=1).actions, "open at rest: nothing to write"
    assert not run(with_exclusions, 2, cap=2).actions, "within the cap: standby as before"
    # Off its owners (Swarm failed it over to node-4), the move back still excludes every
    # node but the target, whatever the cap: Swarm must land it exactly there.
    move = only_constraints(run(db, 4, cap=1))
    assert move.evicts_from == ("n4",)
    assert excluded_hosts(move) == {"node-1", "node-3", "node-4"}


def test_a_rolling_update_stuck_on_a_pending_task_does_not_block_steering() -> None:

    db = replace(managed("db", 1, preferred_nodes="node-2"), update_state="updating")
    pending = Task(
        "t-p", db.id, "", 1, TaskState.RUNNING, TaskState.PENDING, error="no suitable node"
    )
    snap = snapshot(four_nodes(), [db], [pending])
    result = owners_only(snap)
    assert not any(d.outcome == "wait" for d in result.decisions)
    assert result.actions, "the owners rule must be free to allow a node"


def test_a_written_move_that_swarm_has_not_started_is_not_undone() -> None:
    # The last cycle excluded node-1 to move the task off it; Swarm has not started the
    # rolling update yet, so the task is still there and no update is reported.
    db = managed("db", 1, preferred_nodes="node-2", failback="immediate")
    moving = replace(
        db,
        constraints=(*db.constraints, "node.id!=n1", "node.id!=n3", "node.id!=n4"),
        labels={**db.labels, EXCLUDED_LABEL: "n1,n3,n4"},
    )
    snap = snapshot(four_nodes(), [moving], [running(db, 1, 1)])
    cooling = STABLE.note_move(db.id, NOW - 0.2)
    result = owners_only(snap, memory=cooling)
    assert result.actions == ()
    assert [d.reason for d in result.decisions] == ["moving tasks off node-1"]


def test_a_task_being_scheduled_for_a_move_keeps_the_move_in_flight() -> None:
    db = managed("db", 1, preferred_nodes="node-2", failback="immediate")
    moving = replace(
        db,
        constraints=(*db.constraints, "node.id!=n1", "node.id!=n3", "node.id!=n4"),
        labels={**db.labels, EXCLUDED_LABEL: "n1,n3,n4"},
    )
    scheduling = Task("t-new", db.id, "", 2, TaskState.RUNNING, TaskState.PENDING)
    snap = snapshot(four_nodes(), [moving], [running(db, 1, 1), scheduling])
    result = owners_only(snap, memory=STABLE.note_move(db.id, NOW - 0.1))
    assert result.actions == ()


def test_no_standby_while_a_replica_is_missing() -> None:
    # Swarm's first task is still being scheduled: steer it exactly onto the target.
    db = managed("db", 1, steered=False, preferred_nodes="node-2", failback="never")
    scheduling = Task("t-new", db.id, "", 1, TaskState.RUNNING, TaskState.PENDING)
    action = only_constraints(owners_only(snapshot(four_nodes(), [db], [scheduling])))
    assert excluded_hosts(action) == {"node-1", "node-3", "node-4"}


def test_a_spread_move_onto_a_node_that_just_came_back_waits_for_it_to_settle() -> None:
    racks = {1: "r1", 2: "r1", 3: "r2", 4: "r2"}
    nodes = [node(i, manager=i == 1, labels={"rack": racks[i]}) for i in range(1, 5)]
    web = managed("web", 2, spread="rack")
    snap = snapshot(nodes, [web], [running(web, 1, 1), running(web, 2, 2)])
    back = {n: NOW - 10 for n in ("n3", "n4")}  # rack r2 returned 10 s ago
    downs = {n: (NOW - 40,) for n in ("n3", "n4")}  # after going down 40 s ago
    memory = replace(STABLE, node_ready_since={**STABLE.node_ready_since, **back}, node_downs=downs)
    held = owners_only(snap, memory=memory)
    assert held.actions == ()
    (keep,) = [d for d in held.decisions if d.outcome == "keep"]
    assert f"node-3 is ready since {time_of_day(NOW - 10)}" in keep.reason
    assert f"once ready 15 s (at {time_of_day(NOW + 5)})" in keep.reason
    # A second later the reason reads the same, so the log writes it once, not every cycle.
    later = owners_only(snap, memory=held.memory, now=NOW + 1)
    assert [d.reason for d in later.decisions if d.outcome == "keep"] == [keep.reason]
    assert not [d for d in held.decisions if d.outcome == "move"]
    # Ready past the settle time (15 s at the default aggressiveness): the move goes.
    assert len(only_constraints(owners_only(snap, memory=memory, now=NOW + 6)).evicts_from) == 1
    # A node that went down twice in ten minutes must stay ready twice as long.
    flapping = replace(memory, node_downs={**downs, "n3": (NOW - 200, NOW - 40)})
    assert owners_only(snap, memory=flapping, now=NOW + 6).actions == ()
    assert owners_only(snap, memory=flapping, now=NOW + 21).actions != ()


def test_tasks_leaving_a_node_the_policy_forbids_do_not_wait_for_a_returned_target() -> None:
    db = managed("db", 1, spread="rack")
    labelled = [node(i, manager=i == 1, labels={"rack": f"r{i}"}) for i in range(1, 5)]
    forbidding = replace(db, labels={**db.labels, "placement.possible-nodes": "node-2"})
    snap = snapshot(labelled, [forbidding], [running(db, 1, 1)])
    memory = replace(STABLE, node_ready_since={**STABLE.node_ready_since, "n2": NOW - 5})
    result = owners_only(snap, memory=memory)
    assert not [d for d in result.decisions if "is ready since" in d.reason]
    assert only_constraints(result).evicts_from == ("n1",)


def test_a_node_never_seen_going_down_is_no_return_to_wait_for() -> None:
    # A controller's first sight dates a node from its last update (a label written, say):
    # that is no return, and the first placement on a preferred owner goes at once.
    db = managed("db", 1, steered=False, preferred_nodes="node-2")
    snap = snapshot(four_nodes(), [db], [running(db, 1, 1)])
    fresh = replace(STABLE, node_ready_since={**STABLE.node_ready_since, "n2": NOW - 5})
    assert only_constraints(owners_only(snap, memory=fresh)).evicts_from == ("n1",)


def test_a_failback_after_a_failover_waits_for_failback_delay_not_the_move_cooldown() -> None:
    # The failover's trim started the move cooldown (300 s by default) 40 s ago; the
    # preferred owner has been back and ready for longer than failback-delay (30 s).
    db = managed(
        "db", 1, preferred_nodes="node-2,node-3", failback="immediate", failback_delay="30s"
    )
    snap = snapshot(four_nodes(), [db], [running(db, 3, 1)])
    memory = replace(
        STABLE,
        node_ready_since={**STABLE.node_ready_since, "n2": NOW - 35},
        last_move={db.id: NOW - 40},
    )
    result = owners_only(snap, memory=memory)
    action = only_constraints(result)
    assert action.evicts_from == ("n3",)
    (move,) = [d for d in result.decisions if d.outcome == "move"]
    assert move.code == Code.FAILBACK
    # Before failback-delay has passed it waits, and says so.
    early = replace(memory, node_ready_since={**memory.node_ready_since, "n2": NOW - 10})
    held = owners_only(snap, memory=early)
    assert all(not a.evicts_from for a in held.actions if isinstance(a, SetServiceConstraints))


def test_a_move_held_by_the_cooldown_is_said() -> None:
    # Spread wants a move; the cooldown holds it: a decision must say so.
    web = managed("web", 2, anti_affinity="front")
    api = managed("api", 1, anti_affinity="front")
    snap = snapshot(
        four_nodes(), [web, api], [running(web, 2, 1), running(web, 3, 2), running(api, 2, 1)]
    )
    cooling = replace(STABLE, last_move={api.id: NOW - 10, web.id: NOW - 10})
    result = owners_only(snap, memory=cooling)
    assert not any(isinstance(a, SetServiceConstraints) and a.evicts_from for a in result.actions)
    assert any("cooldown" in d.reason for d in result.decisions), [
        d.line() for d in result.decisions
    ]


def test_a_controller_that_just_started_watches_before_its_first_move() -> None:
    """Restarted because its manager's node died, a controller sees that node `ready` for
    a few seconds more: it moves no task onto any node until it has watched the swarm for
    the node's wait (failback-delay here, at most the 15 s settle time), as after a node's
    return."""
    db = managed("db", 1, preferred_nodes="node-2", failback="immediate", failback_delay="10s")
    up_for_an_hour = [replace(n, updated_at=NOW - 3600) for n in four_nodes()]
    snap = snapshot(up_for_an_hour, [db], [running(db, 1, 1)])
    first = owners_only(snap, memory=Memory(watches=True))
    assert all(not a.evicts_from for a in first.actions if isinstance(a, SetServiceConstraints))
    (keep,) = [d for d in first.decisions if d.outcome == "keep"]
    assert f"watches the swarm since {time_of_day(NOW)}" in keep.reason
    assert "onto node-2 once it has watched 10 s" in keep.reason
    assert first.memory.watching_since == NOW
    still = owners_only(snap, memory=first.memory, now=NOW + 9)
    assert all(not a.evicts_from for a in still.actions if isinstance(a, SetServiceConstraints))
    moved = owners_only(snap, memory=still.memory, now=NOW + 10)
    assert only_constraints(moved).evicts_from == ("n1",)
    # A failback-delay past the settle time: the watch stops at the settle time.
    slow = replace(db, labels={**db.labels, "placement.failback-delay": "1h"})
    waiting = owners_only(replace(snap, services=(slow,)), memory=Memory(watches=True))
    assert any("once it has watched 15 s" in d.reason for d in waiting.decisions)
    # With Swarm's heartbeat known, no longer than Swarm takes to mark a dead node down
    # after a leader change (6 heartbeats): 6 s at a 1 s heartbeat.
    quick = owners_only(replace(snap, heartbeat_seconds=1.0), memory=Memory(watches=True))
    assert any("once it has watched 6 s" in d.reason for d in quick.decisions)
    # A one-shot plan (`plan`, `run --once`) shows the move at once.
    assert only_constraints(owners_only(snap, memory=Memory())).evicts_from == ("n1",)


def test_services_alike_keep_their_standbys_on_different_nodes() -> None:
    """Seven services prefer node-8 and run there; node-1 is the busiest of the rest.
    Each keeps one standby for Swarm's failover. Had they all kept the least busy node,
    node-8's failure would send all seven replacements to it at once; counted as load,
    the standbys fill the least busy nodes evenly and node-1 keeps none."""
    hot = [managed(f"hot{i}", 1, preferred_nodes="node-8") for i in range(7)]
    filler = service("filler", replicas=2)
    nodes = [node(i, manager=i == 1) for i in range(1, 9)]
    tasks = [running(s, 8, 1) for s in hot] + [running(filler, 1, 1), running(filler, 1, 2)]
    result = owners_only(snapshot(nodes, [*hot, filler], tasks))
    standbys = []
    for action in result.actions:
        assert isinstance(action, SetServiceConstraints) and not action.evicts_from
        (standby,) = {f"node-{i}" for i in range(1, 8)} - excluded_hosts(action)
        standbys.append(standby)
    assert len(standbys) == 7
    assert sorted(set(standbys)) == [f"node-{i}" for i in range(2, 8)], standbys
    assert "node-1" not in standbys
    # Planned again from the same swarm, every standby is the same.
    again = owners_only(snapshot(nodes, [*hot, filler], tasks))
    assert [a.constraints for a in again.actions] == [a.constraints for a in result.actions]
    # Once written, a task started elsewhere (a new service on node-2 and node-3) moves
    # no standby: no service's constraints are written again for it.
    steered = apply_actions(snapshot(nodes, [*hot, filler], tasks), result.actions)
    new = service("new", replicas=2)
    busier = replace(
        steered,
        services=(*steered.services, new),
        tasks=(*steered.tasks, running(new, 2, 1), running(new, 3, 2)),
    )
    assert owners_only(busier).actions == ()


def _failing_back(
    *, own: bool = True, node_2: NodeState = NodeState.DOWN, on: int = 1
) -> ClusterSnapshot:
    """db's failback from node-1 to node-2 is rolling (start-first): its constraints allow
    node-2 alone, and its task runs on node `on`."""
    db = managed("db", 1, preferred_nodes="node-2", failback="immediate")
    away = frozenset({"n1", "n3", "n4"})
    db = replace(
        db,
        constraints=(*db.constraints, *exclusion_constraints(away)),
        labels={**db.labels, EXCLUDED_LABEL: format_exclusions(away)},
        update_order="start-first",
        update_state="updating",
        rollout_is_own=own,
    )
    nodes = [node(1, manager=True), node(2, state=node_2), node(3), node(4)]
    return snapshot(nodes, [db], [running(db, on, 1)])


def test_a_move_whose_every_target_went_down_is_called_off() -> None:
    # Swarm's updater waits for the move's task with no timeout, and the replacement it
    # restarts can only go to node-2: the move would finish the moment node-2 returns.
    result = owners_only(_failing_back())
    action = only_constraints(result)
    assert "node-2" in excluded_hosts(action) and "node-1" not in excluded_hosts(action)
    assert action.evicts_from == ()
    (steer,) = [d for d in result.decisions if d.outcome == "steer"]
    assert steer.reason.startswith("call off the move onto node-2")
    assert any(
        d.rule == "guard" and d.outcome == "allow" and "calls off" in d.reason
        for d in result.decisions
    )


def test_only_the_controller_s_own_stalled_move_is_called_off() -> None:
    # An operator's rollout, a move whose target is up, and a move that has replaced its
    # task already (Swarm's monitor period) are Swarm's to finish.
    for snap in (
        _failing_back(own=False),
        _failing_back(node_2=NodeState.READY),
        _failing_back(on=2),
    ):
        result = owners_only(snap)
        assert result.actions == (), result.decisions
        assert not any("call off" in d.reason for d in result.decisions)


def test_a_standby_that_went_down_is_not_taken_back_until_its_node_settles() -> None:
    """db runs on node-2, its preferred owner, with node-1 (empty) as its standby. node-1
    goes down: the standby becomes node-3. When node-1 returns, it is the least busy node
    again, but a node that has just come back may go down again: taking it back at once
    would write db's constraints on every flap. It is taken back once it has settled."""
    db = managed("db", 1, preferred_nodes="node-2")
    filler = service("filler", replicas=6)
    nodes = [node(1), node(2), node(3), node(4, manager=True)]
    tasks = [running(db, 2, 1)] + [running(filler, 3 + i % 2, i) for i in range(1, 7)]
    at_rest = snapshot(nodes, [db, filler], tasks)
    steered = apply_actions(at_rest, owners_only(at_rest).actions)
    (db_at_rest,) = [s for s in steered.services if s.name == "db"]
    assert EXCLUDED_LABEL in db_at_rest.labels and "n1" not in db_at_rest.labels[EXCLUDED_LABEL]

    down = replace(steered, nodes=(replace(nodes[0], state=NodeState.DOWN), *nodes[1:]))
    failed_over = only_constraints(owners_only(down))
    assert "node-1" in excluded_hosts(failed_over)
    standby_elsewhere = apply_actions(steered, (failed_over,))

    downs = {"n1": (NOW - 60,)}
    back = replace(
        STABLE, node_ready_since={**STABLE.node_ready_since, "n1": NOW - 5}, node_downs=downs
    )
    assert owners_only(standby_elsewhere, memory=back).actions == ()
    # Settled (15 s at the default aggressiveness), the least busy node is the standby again.
    settled = only_constraints(owners_only(standby_elsewhere, memory=back, now=NOW + 10))
    assert "node-1" not in excluded_hosts(settled) and settled.evicts_from == ()
