"""How the owners rule carries out moves: stop-first by surge, one placement not split by
the cooldown, and every write that may stop a task counted and explained."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import Action, SetReplicas, SetServiceConstraints
from controller.core.apply import apply_actions
from controller.core.clock import time_of_day
from controller.core.guards import disrupted_nodes
from controller.core.labels import EXCLUDED_LABEL, possible_constraint, possible_label
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, NodeState, Resources, Service, Task, TaskState
from controller.core.outside_inputs import LivenessSignal
from controller.core.plan import Plan, plan
from controller.core.replicas import REPLICA_RECORD_LABELS, VACATE_LABEL, read_replica_record
from controller.core.rules import rules_named
from controller.policy import Policy

from .builders import node, running, snapshot
from .test_owners import STABLE, excluded_hosts, managed

NOW = 1_000_000.0
RULES = rules_named("failover", "owners")


def cycle(snap: ClusterSnapshot, memory: Memory, now: float) -> tuple[Plan, Memory]:
    """One cycle, its memory updated as the reconciler does after executing the writes."""
    result = plan(snapshot=snap, policy=Policy.default(), memory=memory, now=now, rules=RULES)
    memory = result.memory
    for action in result.actions:
        if (left := disrupted_nodes(action)) and hasattr(action, "service_id"):
            memory = memory.note_move(action.service_id, now, left)
    return result, memory


def written(snap: ClusterSnapshot, result: Plan, tasks: list[Task]) -> ClusterSnapshot:
    after = apply_actions(snap, result.actions)
    return replace(after, tasks=tuple(tasks))


def explained(result: Plan) -> None:
    """Every write has a decision that names it."""
    named = [d.action for d in result.decisions]
    for action in result.actions:
        assert action in named, (action, result.decisions)


def four() -> list:  # type: ignore[type-arg]
    return [node(i, manager=i == 1) for i in range(1, 5)]


def one(result: Plan) -> Action:
    (action,) = result.actions
    explained(result)
    return action


def test_a_stop_first_service_moves_by_surge_and_stops_its_old_task_last() -> None:
    db = replace(
        managed("db", 1, steered=False, preferred_nodes="node-2"), update_order="stop-first"
    )
    snap = snapshot(four(), [db], [running(db, 1, 1)])

    # 1. Allow the target, keep the source: nothing stops.
    first, memory = cycle(snap, STABLE, NOW)
    allow = one(first)
    assert isinstance(allow, SetServiceConstraints) and allow.evicts_from == ()
    assert excluded_hosts(allow) == {"node-3", "node-4"}

    # 2. Surge onto the target, counted as the move it starts.
    snap = written(snap, first, [running(db, 1, 1)])
    second, memory = cycle(snap, memory, NOW + 1)
    surge = one(second)
    assert isinstance(surge, SetReplicas) and surge.replicas == 2
    assert surge.evicts_from == ("n1",) and surge.set_labels[VACATE_LABEL] == "n1"
    record = read_replica_record(surge.set_labels)
    assert record is not None and record.operation == "rebalance"

    # While the surged task starts, nothing is written, by either rule.
    snap = written(snap, second, [running(db, 1, 1)])
    db2 = snap.service_by_id[db.id]
    starting = replace(running(db2, 2, 2), state=TaskState.STARTING)
    waiting, memory = cycle(replace(snap, tasks=(running(db2, 1, 1), starting)), memory, NOW + 2)
    assert waiting.actions == ()

    # 3. It runs: now node-1 is excluded and its task stops, the count still raised
    # (and the cooldown the surge started does not hold the rest of the move).
    both = [running(db2, 1, 1), running(db2, 2, 2)]
    third, memory = cycle(replace(snap, tasks=tuple(both)), memory, NOW + 3)
    leave = one(third)
    assert isinstance(leave, SetServiceConstraints) and leave.evicts_from == ("n1",)
    assert excluded_hosts(leave) == {"node-1", "node-3", "node-4"}

    # 4. Its task is gone: the trim goes at once. Swarm's replacement for it has no node
    # yet (the only node allowed is full, say): the trim drops exactly that, stopping
    # nothing; or it runs on node-2 (the only node allowed) as a second copy there.
    # The exclusion started a rolling update, stuck on that replacement: the trim is the
    # one write that may go out during it, and it ends it.
    snap = written(replace(snap, tasks=tuple(both)), third, [])
    db3 = snap.service_by_id[db.id]
    unplaced = Task("t-db-1b", db.id, "", 1, TaskState.RUNNING, TaskState.PENDING, error="x")
    rolling = replace(snap, services=(replace(db3, update_state="updating"),))
    early, _ = cycle(replace(rolling, tasks=(unplaced, running(db3, 2, 2))), memory, NOW + 4)
    trim = one(early)
    assert isinstance(trim, SetReplicas) and trim.replicas == 1 and trim.evicts_from == ()
    replacement = replace(running(db3, 2, 1), id="t-db-1b")
    fourth, memory = cycle(replace(snap, tasks=(replacement, running(db3, 2, 2))), memory, NOW + 5)
    trim = one(fourth)
    assert isinstance(trim, SetReplicas) and trim.replicas == 1
    assert set(trim.remove_labels) == set(REPLICA_RECORD_LABELS) and trim.evicts_from == ("n2",)


def test_a_stop_first_service_with_a_record_of_its_count_is_not_surged() -> None:
    db = managed("db", 1, steered=False, preferred_nodes="node-2")
    held = {
        "swarm-placement.replicas": "2",
        "swarm-placement.replicas-set": "1",
        "swarm-placement.operation": "preempt",
    }
    db = replace(db, update_order="stop-first", labels={**db.labels, **held})
    first, memory = cycle(snapshot(four(), [db], [running(db, 1, 1)]), STABLE, NOW)
    snap = written(snapshot(four(), [db], [running(db, 1, 1)]), first, [running(db, 1, 1)])
    second, _ = cycle(snap, memory, NOW + 1)
    assert second.actions == ()
    (keep,) = [d for d in second.decisions if d.outcome == "keep"]
    assert "stop-first: its replica count is held by the controller (preempt)" in keep.reason


def test_a_stop_first_move_whose_surge_has_no_room_is_not_made() -> None:
    # node-2 has room for the task (a CPU free) but the surge must also leave node-1's
    # task running: with node-1 full too, a surge fits nowhere but node-2 - fine; with
    # node-2's room taken by a move planned earlier this cycle, the move is refused.
    big = Resources(2_000_000_000, 1 << 30)
    nodes = [replace(n, capacity=big) for n in four()]
    a = replace(
        managed("a", 1, steered=False, preferred_nodes="node-2", priority="high"),
        reservations=Resources(2_000_000_000),
    )
    b = replace(
        managed("b", 1, steered=False, preferred_nodes="node-2"),
        reservations=Resources(2_000_000_000),
        update_order="stop-first",
    )
    result, _ = cycle(snapshot(nodes, [a, b], [running(a, 1, 1), running(b, 3, 1)]), STABLE, NOW)
    explained(result)
    moved = [act for act in result.actions if disrupted_nodes(act)]
    assert [act.service_name for act in moved] == ["a"]  # type: ignore[union-attr]
    keep = [d.reason for d in result.decisions if d.subject == "service b" and d.outcome == "keep"]
    assert any("node-2 is preferred, but no room on node-2" in r for r in keep), keep


def two_preferred(**settings: str) -> Service:
    return managed("web", 2, steered=False, preferred_nodes="node-3,node-4", **settings)


def after_first_move(web: Service) -> tuple[ClusterSnapshot, Memory]:
    snap = snapshot(four(), [web], [running(web, 1, 1), running(web, 2, 2)])
    first, memory = cycle(snap, STABLE, NOW)
    move = one(first)
    assert isinstance(move, SetServiceConstraints) and len(move.evicts_from) == 1
    (left,) = move.evicts_from
    stays = 2 if left == "n1" else 1
    snap = written(snap, first, [])
    moved = snap.service_by_id[web.id]
    return replace(snap, tasks=(running(moved, stays, 1), running(moved, 3, 2))), memory


def test_one_placement_is_not_split_by_the_cooldown() -> None:
    web = two_preferred(failback="immediate", failback_delay="0s")
    snap, memory = after_first_move(web)
    second, _ = cycle(snap, memory, NOW + 6)
    move = one(second)
    assert isinstance(move, SetServiceConstraints) and move.evicts_from
    assert excluded_hosts(move) == {"node-1", "node-2"}
    assert not any("cooldown" in d.reason for d in second.decisions)


def test_a_first_placement_is_completed_under_failback_never() -> None:
    snap, memory = after_first_move(two_preferred())  # failback: never, the default
    second, _ = cycle(snap, memory, NOW + 6)
    move = one(second)
    assert isinstance(move, SetServiceConstraints) and move.evicts_from


def test_a_new_placement_still_waits_out_the_cooldown() -> None:
    web = two_preferred(failback="immediate", failback_delay="0s")
    snap, memory = after_first_move(web)
    # The operator now prefers node-3 and node-1: a placement of its own, held.
    changed = snap.service_by_id[web.id]
    changed = replace(
        changed,
        labels={**changed.labels, "placement.preferred-nodes": "node-3,node-1"},
    )
    snap = replace(snap, services=(changed,))
    second, _ = cycle(snap, memory, NOW + 6)
    assert not [a for a in second.actions if disrupted_nodes(a)]
    keep = [d.reason for d in second.decisions if d.outcome == "keep"]
    assert any("cooldown 300 s" in r for r in keep), second.decisions


def test_tasks_over_their_share_move_by_a_counted_surge_with_a_decision() -> None:
    web = managed("web", 2, preferred_nodes="node-2,node-3", failback="immediate")
    # Swarm failed node-3's task over to node-2; node-3 is back, the constraints allow
    # exactly the targets: a surge onto node-3 and a trim off node-2.
    web = replace(web, constraints=(*web.constraints, "node.id!=n1", "node.id!=n4"))
    web = replace(web, labels={**web.labels, EXCLUDED_LABEL: "n1,n4"})
    snap = snapshot(four(), [web], [running(web, 2, 1), running(web, 2, 2)])
    result, _ = cycle(snap, STABLE, NOW)
    surge = one(result)
    assert isinstance(surge, SetReplicas) and surge.replicas == 3
    assert surge.evicts_from == ("n2",)


def test_a_move_onto_a_preferred_owner_is_a_failback_even_to_even_out_tasks() -> None:
    web = managed("web", 2, preferred_nodes="node-2,node-3")  # failback: never
    web = replace(web, constraints=(*web.constraints, "node.id!=n1", "node.id!=n4"))
    web = replace(web, labels={**web.labels, EXCLUDED_LABEL: "n1,n4"})
    snap = snapshot(four(), [web], [running(web, 2, 1), running(web, 2, 2)])
    result, _ = cycle(snap, STABLE, NOW)
    assert result.actions == ()
    keep = [d.reason for d in result.decisions if d.outcome == "keep"]
    assert "its extra task(s) on node-2: failback is never" in keep


def test_tasks_over_their_share_stay_while_the_service_cools_down() -> None:
    web = managed("web", 2, preferred_nodes="node-2,node-3", failback="immediate")
    web = replace(web, constraints=(*web.constraints, "node.id!=n1", "node.id!=n4"))
    web = replace(web, labels={**web.labels, EXCLUDED_LABEL: "n1,n4"})
    snap = snapshot(four(), [web], [running(web, 2, 1), running(web, 2, 2)])
    cooling = replace(STABLE, last_move={web.id: NOW - 10})
    result, _ = cycle(snap, cooling, NOW)
    assert result.actions == ()
    keep = [d.reason for d in result.decisions if d.outcome == "keep"]
    moved = f"its extra task(s) on node-2: moved at {time_of_day(NOW - 10)} (cooldown"
    assert any(r.startswith(moved) for r in keep), keep


def test_a_failover_trim_that_stops_running_tasks_names_their_nodes() -> None:
    web = managed("web", 2)
    surge = {
        "swarm-placement.replicas": "2",
        "swarm-placement.replicas-set": "3",
        "swarm-placement.operation": "rebalance",
        "swarm-placement.operation-since": f"{NOW - 1}",
    }
    web = replace(web, replicas=3, labels={**web.labels, **surge})
    tasks = [running(web, 1, 1), running(web, 1, 2), running(web, 2, 3)]
    result, _ = cycle(snapshot(four(), [web], tasks), STABLE, NOW)
    trim = one(result)
    assert isinstance(trim, SetReplicas) and trim.replicas == 2 and trim.evicts_from == ("n1",)


def test_a_stop_first_surge_that_never_runs_is_withdrawn_and_not_retried_at_once() -> None:
    db = managed(
        "db", 1, steered=False, preferred_nodes="node-2", failback="immediate", failback_delay="0s"
    )
    db = replace(db, update_order="stop-first")
    snap = snapshot(four(), [db], [running(db, 1, 1)])
    first, memory = cycle(snap, STABLE, NOW)
    snap = written(snap, first, [running(db, 1, 1)])
    second, memory = cycle(snap, memory, NOW + 1)
    assert isinstance(one(second), SetReplicas)
    snap = written(snap, second, [])
    db2 = snap.service_by_id[db.id]
    failing = replace(running(db2, 2, 2), state=TaskState.STARTING)
    snap = replace(snap, tasks=(running(db2, 1, 1), failing))

    withdrawn, memory = cycle(snap, memory, NOW + 40)
    back = one(withdrawn)
    assert isinstance(back, SetReplicas) and back.replicas == 1 and back.evicts_from == ()
    (note,) = [d for d in withdrawn.decisions if d.outcome == "withdraw"]
    assert "the task(s) on node-1 stay" in note.reason
    assert db.id not in memory.placing

    # Back at one task on node-1, the move waits out the cooldown its surge started.
    snap = written(snap, withdrawn, [running(db2, 1, 1)])
    later, _ = cycle(snap, memory, NOW + 41)
    assert not [a for a in later.actions if disrupted_nodes(a) or isinstance(a, SetReplicas)]
    keep = [d.reason for d in later.decisions if d.outcome == "keep"]
    assert any("cooldown" in r for r in keep), later.decisions


def test_a_placement_does_not_go_on_to_a_node_that_went_down_since_it_began() -> None:
    web = two_preferred(failback="immediate", failback_delay="60s")
    snap, memory = after_first_move(web)
    four_down = [
        node(i, manager=i == 1, state=NodeState.DOWN if i == 4 else NodeState.READY)
        for i in range(1, 5)
    ]
    # While node-4 is down the service is busy (Swarm still rolls the first move), so the
    # placement is not re-planned and its destination still names node-4.
    busy = replace(snap.services[0], update_state="updating")
    down = replace(snap, nodes=tuple(four_down), services=(busy,))
    _, memory = cycle(down, memory, NOW + 2)
    assert web.id in memory.placing
    back, memory = cycle(snap, memory, NOW + 4)
    # node-4 is back for 2 s: neither the placement that began before it went down nor
    # failback (delay 60 s) sends a task there.
    assert not [a for a in back.actions if disrupted_nodes(a)], back.decisions


def test_stop_first_tasks_off_new_possible_owners_move_by_surge_before_the_constraint() -> None:
    """The possible-owner constraint would reject both tasks at once and Swarm's updater
    would stop each before its replacement starts: the tasks move by surge first, and
    the constraint follows once nothing runs where it would reject a task."""
    mark = {possible_label("api"): "true"}
    nodes = [node(1, manager=True), node(2), node(3, labels=mark), node(4, labels=mark)]
    api = replace(
        managed("api", 2, steered=False, possible_nodes="node-3,node-4"),
        update_order="stop-first",
    )
    snap = snapshot(nodes, [api], [running(api, 1, 1), running(api, 2, 2)])

    # Its constraints already allow every node: the surge comes first, the constraint waits.
    first, memory = cycle(snap, STABLE, NOW)
    surge = one(first)
    assert isinstance(surge, SetReplicas) and surge.replicas == 4
    assert surge.evicts_from == ("n1", "n2")
    assert any("possible-owner constraint follows" in d.reason for d in first.decisions)

    # Both surged tasks run on the possible owners: the sources are excluded, by ID only.
    snap = written(snap, first, [])
    api2 = snap.service_by_id[api.id]
    four_running = [running(api2, n, n) for n in range(1, 5)]
    second, memory = cycle(replace(snap, tasks=tuple(four_running)), memory, NOW + 1)
    leave = one(second)
    assert isinstance(leave, SetServiceConstraints) and leave.evicts_from == ("n1", "n2")
    assert possible_constraint("api") not in leave.constraints
    assert excluded_hosts(leave) == {"node-1", "node-2"}

    # Old tasks gone, the trim; then, with nothing left to reject, the constraint.
    snap = written(replace(snap, tasks=tuple(four_running)), second, [])
    api3 = snap.service_by_id[api.id]
    third, memory = cycle(
        replace(snap, tasks=(running(api3, 3, 3), running(api3, 4, 4))), memory, NOW + 2
    )
    trim = one(third)
    assert isinstance(trim, SetReplicas) and trim.replicas == 2 and trim.evicts_from == ()
    snap = written(snap, third, [running(api3, 3, 3), running(api3, 4, 4)])
    fourth, _ = cycle(snap, memory, NOW + 3)
    constrain = one(fourth)
    assert isinstance(constrain, SetServiceConstraints) and constrain.evicts_from == ()
    assert possible_constraint("api") in constrain.constraints


def test_a_start_first_service_gets_its_possible_owner_constraint_at_once() -> None:
    # Swarm's updater starts each replacement before it stops the old task.
    mark = {possible_label("api"): "true"}
    nodes = [node(1, manager=True), node(2), node(3, labels=mark), node(4, labels=mark)]
    api = managed("api", 2, steered=False, possible_nodes="node-3,node-4")
    snap = snapshot(nodes, [api], [running(api, 1, 1), running(api, 2, 2)])
    action = one(cycle(snap, STABLE, NOW)[0])
    assert isinstance(action, SetServiceConstraints)
    assert possible_constraint("api") in action.constraints
    assert action.evicts_from == ("n1", "n2")


def _stop_first_possible(tasks_on: tuple[int, ...], **settings: str) -> tuple[Service, list]:  # type: ignore[type-arg]
    """Four nodes, node-2 and node-3 the possible owners (marked), a stop-first service
    with one task on each node of `tasks_on`."""
    mark = {possible_label("api"): "true"}
    nodes = [node(1, manager=True), node(2, labels=mark), node(3, labels=mark), node(4)]
    api = replace(
        managed("api", len(tasks_on), steered=False, possible_nodes="node-2,node-3", **settings),
        update_order="stop-first",
    )
    return api, nodes


def _running_on(snap: ClusterSnapshot, service_id: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for task in snap.tasks:
        if task.service_id == service_id and task.is_running:
            out[task.node_id] = out.get(task.node_id, 0) + 1
    return out


def test_a_stop_first_task_on_a_node_that_is_no_possible_owner_moves_off_it() -> None:
    """Every node holds one task, so a surge of one could land back on node-4 (Swarm
    breaks the tie its own way): the surge is made large enough that, whichever node it
    lands on, enough new tasks run on the possible owners before node-4's task stops."""
    api, nodes = _stop_first_possible((2, 3, 4))
    tasks = [running(api, 2, 1), running(api, 3, 2), running(api, 4, 3)]
    snap = snapshot(nodes, [api], tasks)

    first, memory = cycle(snap, STABLE, NOW)
    allow = one(first)  # node-1 excluded, node-4 kept: nothing stops
    assert isinstance(allow, SetServiceConstraints) and allow.evicts_from == ()
    snap = written(snap, first, tasks)

    second, memory = cycle(snap, memory, NOW + 1)
    surge = one(second)
    assert isinstance(surge, SetReplicas) and surge.replicas == 5
    assert surge.evicts_from == ("n4",) and surge.set_labels[VACATE_LABEL] == "n4"
    assert any(
        d.code == "possible-unenforced" and "1 task(s) on node-4" in d.reason
        for d in second.decisions
    ), second.decisions

    # Swarm's worst tie-break: one new task on node-4, one on node-2. Still three run on
    # the possible owners, so node-4 is excluded now.
    snap = written(snap, second, [])
    api2 = snap.service_by_id[api.id]
    landed = [*(replace(t, service_id=api2.id) for t in tasks), running(api2, 4, 4)]
    landed.append(running(api2, 2, 5))
    third, memory = cycle(replace(snap, tasks=tuple(landed)), memory, NOW + 2)
    leave = one(third)
    assert isinstance(leave, SetServiceConstraints) and leave.evicts_from == ("n4",)
    assert "node-4" in excluded_hosts(leave)
    after = written(replace(snap, tasks=tuple(landed)), third, [])
    kept = [t for t in landed if t.node_id != "n4"]
    assert sum(_running_on(replace(after, tasks=tuple(kept)), api.id).values()) >= 3


def test_a_surge_that_started_on_the_node_it_leaves_is_raised_before_that_node_stops() -> None:
    """Swarm broke a tie otherwise than foreseen: one surged task runs on node-4 too.
    Stopping node-4 now would leave 2 of 3: the surge is raised first."""
    api, nodes = _stop_first_possible((2, 3, 4))
    record = {
        "swarm-placement.replicas": "3",
        "swarm-placement.replicas-set": "4",
        "swarm-placement.operation": "rebalance",
        "swarm-placement.operation-since": f"{NOW - 1}",
        VACATE_LABEL: "n4",
        EXCLUDED_LABEL: "n1",
    }
    api = replace(
        api,
        replicas=4,
        labels={**api.labels, **record},
        constraints=(*api.constraints, "node.id!=n1"),
    )
    tasks = [running(api, 2, 1), running(api, 3, 2), running(api, 4, 3), running(api, 4, 4)]
    result, _ = cycle(snapshot(nodes, [api], tasks), STABLE, NOW)
    more = one(result)
    assert isinstance(more, SetReplicas) and more.replicas == 5
    assert more.set_labels[VACATE_LABEL] == "n4" and read_replica_record(more.set_labels).base == 3  # type: ignore[union-attr]
    assert any("start 1 more first" in d.reason for d in result.decisions), result.decisions


def test_possible_owners_with_no_room_are_reported_not_yet_enforced() -> None:
    """node-2 and node-3 are full: no surge fits, the task stays on node-4, and the
    decision says the possible owners are not enforced yet, and why."""
    cpu = Resources(2_000_000_000, 1 << 30)
    api, nodes = _stop_first_possible((2, 2, 3, 3, 4))
    nodes = [replace(n, capacity=cpu) for n in nodes]
    api = replace(api, reservations=Resources(1_000_000_000))
    tasks = [running(api, n, i) for i, n in enumerate((2, 2, 3, 3, 4), start=1)]
    snap = snapshot(nodes, [api], tasks)
    first, memory = cycle(snap, STABLE, NOW)
    snap = written(snap, first, tasks)
    second, _ = cycle(snap, memory, NOW + 1)
    assert not [a for a in second.actions if disrupted_nodes(a) or isinstance(a, SetReplicas)]
    (gap,) = [d for d in second.decisions if d.code == "possible-unenforced"]
    assert gap.reason.startswith("possible owners not yet enforced: 1 task(s) on node-4: ")
    assert "no larger surge fits" in gap.reason, gap.reason


def test_a_stop_first_move_waits_while_its_surged_task_runs_on_a_node_in_doubt() -> None:
    """The surged task reads running on node-2, which Swarm still calls ready but whose
    engine the liveness signals say is gone (a crashed engine's tasks read running until
    Swarm marks the node down). The old task on node-1 stops only once the surge runs on
    a live node, as the availability ledger counts what is up: stopping it now would
    leave nothing really running."""
    db = replace(
        managed("db", 2, steered=False, preferred_nodes="node-2"), update_order="stop-first"
    )
    record = {
        "swarm-placement.replicas": "1",
        "swarm-placement.replicas-set": "2",
        "swarm-placement.operation": "rebalance",
        "swarm-placement.operation-since": f"{NOW - 5}",
        VACATE_LABEL: "n1",
        EXCLUDED_LABEL: "n3,n4",
    }
    db = replace(
        db,
        labels={**db.labels, **record},
        constraints=(*db.constraints, "node.id!=n3", "node.id!=n4"),
    )
    gone = (
        LivenessSignal("n2", "gossip", False, NOW - 2, "left the peers"),
        LivenessSignal("n2", "probe", False, NOW - 2, "connect refused"),
    )
    snap = replace(snapshot(four(), [db], [running(db, 1, 1), running(db, 2, 2)]), liveness=gone)
    result, _ = cycle(snap, STABLE, NOW)
    explained(result)
    leaves = [
        a for a in result.actions if isinstance(a, SetServiceConstraints) and "n1" in a.evicts_from
    ]
    assert not leaves, [d.reason for d in result.decisions]
    assert any("1 of 2 running" in d.reason for d in result.decisions), result.decisions
