from __future__ import annotations

from dataclasses import replace

from controller.core.actions import (
    Action,
    SetNodeAvailability,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
)
from controller.core.context import PlanContext, RuleOutput, RuleSpec
from controller.core.labels import EXCLUDED_LABEL, deny_label, steering_constraint
from controller.core.memory import Memory
from controller.core.model import Availability, NodeState, Service, Task, TaskState
from controller.core.plan import plan
from controller.core.replicas import (
    REPLICA_RECORD_LABELS,
    Operation,
    change_replicas,
    read_replica_record,
    restore_replicas,
)
from controller.core.rules import rule_named
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot


def _rule_proposing(*actions, by: str | None = None):  # type: ignore[no-untyped-def]
    """A rule that proposes `actions`: a rule of no name, or the registered rule `by` (its
    exceptions to the guards with it)."""

    def rule(ctx: PlanContext) -> RuleOutput:
        return RuleOutput(actions=tuple(actions))

    return (RuleSpec("test", rule) if by is None else replace(rule_named(by), plan=rule),)


def _plan(snap, *actions, by: str | None = None):  # type: ignore[no-untyped-def]
    return plan(
        snapshot=snap,
        policy=Policy.default(),
        memory=Memory(),
        now=0.0,
        rules=_rule_proposing(*actions, by=by),
    )


def test_writes_to_unmanaged_services_are_refused() -> None:
    snap = snapshot([node(1, manager=True)], [service("legacy", replicas=3)])
    result = _plan(snap, SetReplicas("s-legacy", "legacy", 100, 1))
    assert result.actions == ()
    assert any(d.rule == "guard" and d.outcome == "refuse" for d in result.decisions)


def test_the_last_active_manager_is_never_drained() -> None:
    snap = snapshot([node(1, manager=True), node(2)], [])
    drain = SetNodeAvailability("n1", "node-1", 11, Availability.DRAIN)
    pause = SetNodeAvailability("n1", "node-1", 11, Availability.PAUSE)
    assert _plan(snap, drain).actions == ()
    assert _plan(snap, pause).actions == ()
    # With another active manager it is allowed.
    snap3 = snapshot([node(1, manager=True), node(2, manager=True)], [])
    assert _plan(snap3, drain).actions == (drain,)


def test_disruptive_actions_are_capped_per_service() -> None:
    web = service("web", labels=MANAGED)
    snap = snapshot([node(1, manager=True), node(2), node(3)], [web])
    evict2 = SetNodeLabels("n2", "node-2", 12, set_labels={"x": "1"}, evicts_services=("s-web",))
    evict3 = SetNodeLabels("n3", "node-3", 13, set_labels={"x": "1"}, evicts_services=("s-web",))
    result = _plan(snap, evict2, evict3)
    assert result.actions == (evict2,)  # default budget: one disruptive action per service
    assert any(d.outcome == "defer" and "per service" in d.reason for d in result.decisions)


def test_one_write_per_object_per_cycle() -> None:
    web = service("web", labels=MANAGED)
    snap = snapshot([node(1, manager=True)], [web])
    first, second = SetReplicas("s-web", "web", 100, 2), SetReplicas("s-web", "web", 100, 3)
    result = _plan(snap, first, second)
    assert result.actions == (first,)
    assert any(d.outcome == "defer" for d in result.decisions)


# --- rollouts ------------------------------------------------------------------------------

ROLLOUT_STATES = ("updating", "paused", "rollback_started", "rollback_paused")


def _rolling(state: str | None, **changes):  # type: ignore[no-untyped-def]
    db = replace(service("db", replicas=2, labels=MANAGED, update_state=state), **changes)
    tasks = [running(db, 2, 1), running(db, 3, 2)]
    return db, snapshot([node(1, manager=True), node(2), node(3)], [db], tasks)


def _every_write(db: Service) -> list[Action]:
    surge = change_replicas(db, replicas=3, operation=Operation.SURGE, now=0.0)
    return [
        SetServiceConstraints(db.id, db.name, db.version, ("node.role==worker",)),
        SetServiceConstraints(db.id, db.name, db.version, ("node.id!=n2",), evicts_from=("n2",)),
        change_replicas(db, replicas=1, operation=Operation.PREEMPT, now=0.0),
        replace(surge, evicts_from=("n2",)),  # a surge-and-trim: it stops tasks later
        SetReplicas(db.id, db.name, db.version, 2, remove_labels=REPLICA_RECORD_LABELS),
        SetNodeLabels(
            "n2", "node-2", 12, set_labels={deny_label("db"): "true"}, evicts_services=(db.id,)
        ),
        SetNodeAvailability("n3", "node-3", 13, Availability.DRAIN),
    ]


def test_no_write_reaches_a_service_in_a_rollout() -> None:
    for state in ROLLOUT_STATES:
        db, snap = _rolling(state)
        for write in _every_write(db):
            result = _plan(snap, write)
            assert result.actions == (), (state, write)
            (wait,) = [d for d in result.decisions if d.rule == "guard"]
            assert wait.outcome == "wait" and wait.action == write
    # Once Swarm is done, no write waits for it.
    for state in (None, "completed", "rollback_completed"):
        db, snap = _rolling(state)
        for write in _every_write(db):
            assert not [d for d in _plan(snap, write).decisions if d.outcome == "wait"], (
                state,
                write,
            )


def test_the_decision_says_a_write_would_resume_a_paused_rollout() -> None:
    db, snap = _rolling("paused")
    (write, *_) = _every_write(db)
    (wait,) = [d for d in _plan(snap, write).decisions if d.rule == "guard"]
    assert wait.line().startswith(
        "[guard] service db: wait - rollout paused by Swarm; the controller waits: "
        "a write would resume it"
    )


def test_a_paused_rollout_of_the_controller_s_own_making_does_not_hold_its_writes() -> None:
    """Seed 45 of the chaos benchmark: the controller's steering started a rollout, Swarm
    paused it (a task of it died with its node), and every write to the service then
    waited for an operator, even the trim of a failover surge. A paused rollout of its
    own is resumed by its next write, with a decision that says so; an operator's paused
    rollout, or one of its own still running, still holds every write but the exceptions."""
    for state in ("paused", "rollback_paused"):
        db, snap = _rolling(state, rollout_is_own=True)
        assert not db.in_rollout
        for write in _every_write(db):
            result = _plan(snap, write)
            assert result.actions == (write,), (state, write, result.decisions)
            if isinstance(write, SetServiceConstraints | SetReplicas):
                (allow,) = [d for d in result.decisions if d.rule == "guard"]
                assert allow.outcome == "allow" and "own write started" in allow.reason
        db, snap = _rolling(state, rollout_is_own=False)
        assert all(_plan(snap, write).actions == () for write in _every_write(db))
    for state in ("updating", "rollback_started"):
        db, snap = _rolling(state, rollout_is_own=True)
        assert db.in_rollout
        assert all(_plan(snap, write).actions == () for write in _every_write(db))


def test_a_failover_raise_goes_through_only_while_the_rollout_runs() -> None:
    for state in ROLLOUT_STATES:
        for action in ("pause", "continue", "rollback"):
            db, snap = _rolling(state, update_failure_action=action)
            surge = change_replicas(db, replicas=3, operation=Operation.SURGE, now=0.0)
            allowed = state == "updating" and action != "rollback"
            result = _plan(snap, surge, by="failover")
            assert result.actions == ((surge,) if allowed else ()), (state, action)
            assert _plan(snap, surge).actions == (), "no other rule's raise goes"
            if allowed:
                assert [d.outcome for d in result.decisions if d.rule == "guard"] == ["allow"]
    # Raising it for any other reason, or lowering it, is no failover raise.
    db, snap = _rolling("updating")
    restore = change_replicas(db, replicas=3, operation=Operation.PREEMPT, now=0.0)
    trim = change_replicas(db, replicas=1, operation=Operation.SURGE, now=0.0)
    assert _plan(snap, restore, by="failover").actions == ()
    assert _plan(snap, trim, by="failover").actions == ()


def test_the_trim_of_a_failover_raise_goes_through_as_the_raise_does() -> None:
    """Seen in a chaos run: web was surged while Swarm rolled its update, its trim then
    waited for the rollout, Swarm paused the rollout, and web kept twice its replicas
    for as long as the pause lasted. The trim goes out when the raise would."""
    for state in ROLLOUT_STATES:
        for action in ("pause", "continue", "rollback"):
            db, _ = _rolling(state, update_failure_action=action)
            surge = change_replicas(db, replicas=3, operation=Operation.SURGE, now=0.0)
            surged = replace(db, replicas=3, labels={**db.labels, **surge.set_labels})
            snap = snapshot(
                [node(1, manager=True), node(2), node(3)],
                [surged],
                [running(surged, 2, 1), running(surged, 3, 2), running(surged, 3, 3)],
            )
            record = read_replica_record(surged.labels)
            assert record is not None
            trim = restore_replicas(surged, record, evicts_from=("n3",))
            allowed = state == "updating" and action != "rollback"
            result = _plan(snap, trim, by="failover")
            assert result.actions == ((trim,) if allowed else ()), (state, action)
            (guard,) = [d for d in result.decisions if d.rule == "guard"]
            if allowed:
                assert guard.outcome == "allow"
                assert "takes back the controller's failover raise" in guard.reason
            else:
                assert guard.outcome == "wait"
    # Only the surge's own trim: a record of another kind, or another count, still waits.
    db, _ = _rolling("updating")
    for operation, to in ((Operation.PREEMPT, 2), (Operation.SURGE, 1)):
        change = change_replicas(db, replicas=3, operation=operation, now=0.0)
        changed = replace(db, replicas=3, labels={**db.labels, **change.set_labels})
        snap = snapshot([node(1, manager=True), node(2), node(3)], [changed], [])
        back = SetReplicas(db.id, db.name, db.version, to, remove_labels=REPLICA_RECORD_LABELS)
        assert _plan(snap, back, by="failover").actions == (), operation


def test_a_write_that_only_lets_swarm_place_a_stuck_task_goes_through() -> None:
    """While a rollout runs with a task Swarm cannot place, a constraint write that stops
    nothing may go out: the controller's own constraints must not hold it up for good."""
    db, snap = _rolling("updating")
    stuck = Task("t-p", db.id, "", 3, TaskState.RUNNING, TaskState.PENDING, error="no node")
    snap = replace(snap, tasks=(*snap.tasks, stuck))
    widen = SetServiceConstraints(db.id, db.name, db.version, ())
    assert _plan(snap, widen, by="owners").actions == (widen,)
    assert _plan(snap, widen).actions == (), "only the owners rule's write goes"
    evict = replace(widen, evicts_from=("n2",))
    assert _plan(snap, evict, by="owners").actions == ()
    _, snap_paused = _rolling("paused")
    snap_paused = replace(snap_paused, tasks=(*snap_paused.tasks, stuck))
    assert _plan(snap_paused, widen, by="owners").actions == ()


def test_a_constraint_write_that_no_ready_node_satisfies_is_refused() -> None:
    """A new Raft leader reports every node `unknown` for a moment: steering computed
    then would exclude every node, and Swarm would stop every task. The owners rule waits
    out such a view (test_leadership_change); the guard refuses such a write whatever
    proposes it."""
    labels = {**MANAGED, "placement.preferred-nodes": "node-2", EXCLUDED_LABEL: "n3,n4"}
    db = replace(
        service("db", replicas=1, labels=labels),
        constraints=(steering_constraint("db"), "node.id!=n3", "node.id!=n4"),
    )
    nodes = [node(1, manager=True), *(node(i) for i in (2, 3, 4))]
    unknown = [replace(n, state=NodeState.UNKNOWN) for n in nodes]
    snap = snapshot(unknown, [db], [running(db, 2, 1)])
    everything = tuple(f"node.id!=n{i}" for i in range(1, 5))
    exclude = SetServiceConstraints(
        db.id, db.name, db.version, (steering_constraint("db"), *everything)
    )
    result = _plan(snap, exclude)
    assert result.actions == ()
    (refused,) = [d for d in result.decisions if d.rule == "guard" and d.outcome == "refuse"]
    assert "no ready, active node would satisfy its constraints" in refused.reason
    assert "node.id!=n2" in (refused.action_text or "")


def test_a_constraint_write_never_stops_tasks_on_a_node_swarm_reports_unknown() -> None:
    # A new Raft leader reports node-2 unknown for a moment: the rules count no task there,
    # but the tasks run, and Swarm's enforcer would stop them once node-2 reports.
    web = replace(service("web", replicas=2, labels=MANAGED), constraints=())
    nodes = [node(1, manager=True), node(2, state=NodeState.UNKNOWN), node(3)]
    snap = snapshot(nodes, [web], [running(web, 2, 1), running(web, 3, 2)])
    exclude = SetServiceConstraints(web.id, web.name, web.version, ("node.id!=n2",))
    result = _plan(snap, exclude)
    assert result.actions == ()
    (refusal,) = [d for d in result.decisions if d.rule == "guard"]
    assert refusal.outcome == "refuse" and "on node-2" in refusal.reason
    # Naming node-2 makes it a move, which the other guards and the budget judge.
    moving = replace(exclude, evicts_from=("n2",))
    assert not [d for d in _plan(snap, moving).decisions if "on node-2" in d.reason]
    # A write that refuses no task there, or a node that is down, stops nothing.
    elsewhere = SetServiceConstraints(web.id, web.name, web.version, ("node.id!=n1",))
    assert _plan(snap, elsewhere).actions == (elsewhere,)
    down = replace(
        snap,
        nodes=tuple(replace(n, state=NodeState.DOWN) if n.id == "n2" else n for n in snap.nodes),
    )
    assert _plan(down, exclude).actions == (exclude,)


def _steered_db(labels: dict[str, str] | None = None) -> Service:
    """db steered onto node-2 with node-3 as its standby: node-1 and node-4 excluded."""
    recorded = {**MANAGED, "placement.preferred-nodes": "node-2,node-3", EXCLUDED_LABEL: "n1,n4"}
    return replace(
        service("db", replicas=1, labels={**recorded, **(labels or {})}),
        constraints=(steering_constraint("db"), "node.id!=n1", "node.id!=n4"),
    )


def _to_node_4(db: Service) -> SetServiceConstraints:
    """The steering a new placement on node-4 writes: every other node excluded."""
    return SetServiceConstraints(
        db.id,
        db.name,
        db.version,
        (steering_constraint("db"), "node.id!=n1", "node.id!=n2", "node.id!=n3"),
        set_labels={EXCLUDED_LABEL: "n1,n2,n3"},
    )


def test_a_refused_steering_still_drops_the_exclusions_it_would_drop() -> None:
    """Its target unknown (a new Raft leader) and its standby down: the new steering is
    refused (it would stop the task on node-2), and the part that only opens node-4 is
    written, so Swarm can place the replica there as it would without the controller."""
    db = _steered_db()
    nodes = [node(1, manager=True), node(2, state=NodeState.UNKNOWN), node(3, state=NodeState.DOWN)]
    snap = snapshot([*nodes, node(4)], [db], [running(db, 2, 1)])
    assert _plan(snap, _to_node_4(db)).actions == (), "only the owners rule salvages a part"
    result = _plan(snap, _to_node_4(db), by="owners")
    (widened,) = result.actions
    assert isinstance(widened, SetServiceConstraints)
    assert widened.constraints == (steering_constraint("db"), "node.id!=n1")
    assert widened.set_labels == {EXCLUDED_LABEL: "n1"} and widened.evicts_from == ()
    refused, allowed = [d for d in result.decisions if d.rule == "guard"]
    assert refused.outcome == "refuse" and "only the exclusions it drops" in refused.reason
    assert allowed.outcome == "allow" and allowed.action == widened


def test_the_widening_part_keeps_hard_rules_and_non_possible_nodes_excluded() -> None:
    nodes = [node(1, manager=True), node(2, state=NodeState.UNKNOWN), node(3), node(4)]
    hard = _steered_db({"placement.anti-affinity": "x", "placement.anti-affinity-mode": "hard"})
    result = _plan(snapshot(nodes, [hard], [running(hard, 2, 1)]), _to_node_4(hard), by="owners")
    assert result.actions == ()
    possible = _steered_db({"placement.possible-nodes": "node-2,node-3,node-1"})
    result = _plan(
        snapshot(nodes, [possible], [running(possible, 2, 1)]), _to_node_4(possible), by="owners"
    )
    assert result.actions == ()  # node-4 is no possible owner: its exclusion stays
    # A write that drops none of the controller's exclusions has no part to write.
    db = _steered_db()
    everything = replace(
        _to_node_4(db),
        constraints=(*_to_node_4(db).constraints, "node.id!=n4"),
        set_labels={EXCLUDED_LABEL: "n1,n2,n3,n4"},
    )
    assert _plan(snapshot(nodes, [db], [running(db, 2, 1)]), everything, by="owners").actions == ()
