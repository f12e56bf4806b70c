"""The one disruption budget: preemption scale-downs, health denies, drains and moves
spend it alike, and what exceeds it waits for a later cycle."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import (
    SetNodeAvailability,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
)
from controller.core.context import PlanContext, RuleOutput, RuleSpec
from controller.core.kernel.ledger import AvailabilityLedger, disrupted_nodes, disruption
from controller.core.memory import Memory
from controller.core.model import Availability, NodeState, TaskState
from controller.core.plan import Plan, plan
from controller.core.replicas import Operation, change_replicas
from controller.core.rules import rule_named
from controller.policy import Budgets, ControllerSettings, Policy

from .builders import MANAGED, node, running, service, snapshot
from .capacity_builders import ROOMY, on, pending, run, slot_nodes, svc


def _policy(**budgets: int) -> Policy:
    return replace(Policy.default(), controller=ControllerSettings(budgets=Budgets(**budgets)))


def _proposing(*actions):  # type: ignore[no-untyped-def]
    def rule(ctx: PlanContext) -> RuleOutput:
        return RuleOutput(actions=tuple(actions))

    return (RuleSpec("test", rule),)


def _plan(snap, *actions, policy: Policy | None = None) -> Plan:  # type: ignore[no-untyped-def]
    return plan(
        snapshot=snap,
        policy=policy or Policy.default(),
        memory=Memory(),
        now=0.0,
        rules=_proposing(*actions),
    )


def _deferred(result: Plan) -> list[str]:
    return [d.reason for d in result.decisions if d.rule == "guard" and d.outcome == "defer"]


# --- preemption scale-downs ---------------------------------------------------------------


def _short() -> tuple:  # type: ignore[type-arg]
    low = svc("low", 6, priority="low", labels=ROOMY)
    high = svc("high", 2, priority="high")
    return (
        low,
        high,
        snapshot(slot_nodes(2, 2, 2), [high, low], on(low, 1, 1, 2, 2, 3, 3) + pending(high, 2)),
    )


def test_a_preemption_scale_down_names_the_nodes_swarm_may_take_tasks_from() -> None:
    _, _, snap = _short()
    (action,) = run(snap).actions
    assert isinstance(action, SetReplicas) and action.replicas == 4
    # 2 tasks on each node: Swarm's pick of the 2 among them is not known, all may lose one.
    assert action.evicts_from == ("n1", "n2", "n3")
    assert disrupted_nodes(action) == ("n1", "n2", "n3")  # so the move cooldown starts


def test_a_scale_down_of_a_busier_node_names_that_node_only() -> None:
    keep = svc("keep", 3, priority="low", preemptible=False)
    low = svc("low", 3, priority="low")
    high = svc("high", 1, priority="high")
    tasks = on(low, 1, 1, 2) + on(keep, 2, 3, 3) + pending(high, 1)
    (action,) = run(snapshot(slot_nodes(2, 2, 2), [high, low, keep], tasks)).actions
    assert isinstance(action, SetReplicas) and action.replicas == 2
    assert action.evicts_from == ("n1",)  # Swarm scales down the node with the most


def test_a_preemption_scale_down_is_deferred_when_the_budget_is_spent() -> None:
    _, _, snap = _short()
    for spent in ({"actions_per_cycle": 0}, {"actions_per_node": 0}, {"actions_per_service": 0}):
        result = run(snap, policy=_policy(**spent))
        assert result.actions == (), spent
        (reason,) = [
            d.reason for d in result.decisions if d.rule == "preemption" and d.outcome == "wait"
        ]
        assert "stopping low -2 would make room, but budget: 0 disruptive actions" in reason


def test_a_preemption_waits_for_a_node_an_earlier_rule_spent() -> None:
    _, _, snap = _short()
    # The nodes rule evicts another service from node-1 first this cycle.
    other = svc("other", 0, priority="high")
    snap = replace(snap, services=(*snap.services, other))
    evict = SetNodeLabels("n1", "node-1", 11, set_labels={"x": "1"}, evicts_services=(other.id,))

    def first(ctx: PlanContext) -> RuleOutput:
        return RuleOutput(actions=(evict,))

    result = plan(
        snapshot=snap,
        policy=_policy(actions_per_node=1),
        memory=Memory(),
        now=1000.0,
        rules=(RuleSpec("nodes", first), rule_named("preemption")),
    )
    assert result.actions == (evict,)
    assert any("budget: 1 disruptive actions per node" in d.reason for d in result.decisions)
    assert not any(d.rule == "guard" for d in result.decisions)  # the rule knew


def test_a_scale_down_a_rule_forgot_to_name_is_still_counted() -> None:
    """A count lowered with no nodes named is counted where Swarm will stop tasks."""
    web = service("web", replicas=3, labels=MANAGED)
    tasks = [running(web, 1, 1), running(web, 1, 2), running(web, 2, 3)]
    snap = snapshot([node(1, manager=True), node(2)], [web], tasks)
    down = change_replicas(web, replicas=2, operation=Operation.PREEMPT, now=0.0)
    found = disruption(down, snap)
    assert found is not None and found.nodes == ("n1",)
    result = _plan(snap, down, policy=_policy(actions_per_node=0))
    assert result.actions == () and _deferred(result)


def test_dropping_only_unassigned_slots_stops_nothing() -> None:
    web = service("web", replicas=3, labels=MANAGED)
    tasks = [running(web, 1, 1), running(web, 1, 2), *pending(web, 1)]
    snap = snapshot([node(1, manager=True)], [web], tasks)
    trim = SetReplicas(web.id, web.name, web.version, 2)
    assert disruption(trim, snap) is None
    assert _plan(snap, trim, policy=_policy(actions_per_cycle=0)).actions == (trim,)


# --- health denies, drains and moves share it --------------------------------------------


def _three() -> tuple:  # type: ignore[type-arg]
    web = service("web", replicas=3, labels=MANAGED)
    db = service("db", replicas=3, labels=MANAGED)
    tasks = [running(web, n, n) for n in (1, 2, 3)] + [running(db, n, 10 + n) for n in (1, 2, 3)]
    return web, db, snapshot([node(1, manager=True), node(2), node(3)], [web, db], tasks)


def test_a_health_deny_and_a_scale_down_share_the_per_node_budget() -> None:
    web, db, snap = _three()
    deny = SetNodeLabels(
        "n2",
        "node-2",
        12,
        set_labels={"swarm-placement.deny.web": "true"},
        evicts_services=(web.id,),
    )
    down = replace(
        change_replicas(db, replicas=2, operation=Operation.PREEMPT, now=0.0), evicts_from=("n2",)
    )
    result = _plan(snap, deny, down, policy=_policy(actions_per_node=1))
    assert result.actions == (deny,)
    assert _deferred(result) == ["budget: 1 disruptive actions per node"]


def test_a_drain_spends_the_budget_of_every_service_on_the_node() -> None:
    web, db, snap = _three()
    drain = SetNodeAvailability("n2", "node-2", 12, Availability.DRAIN)
    found = disruption(drain, snap)
    assert found is not None and set(found.services) == {web.id, db.id}
    move = SetServiceConstraints(db.id, db.name, db.version, ("node.id!=n3",), evicts_from=("n3",))
    result = _plan(snap, drain, move)
    assert result.actions == (drain,)  # db's one disruptive action this cycle was the drain
    assert _deferred(result) == ["budget: 1 disruptive actions per service"]


def test_drains_and_denies_spend_the_cycle_budget() -> None:
    web, _, snap = _three()
    deny = SetNodeLabels("n3", "node-3", 13, set_labels={"x": "1"}, evicts_services=(web.id,))
    drain = SetNodeAvailability("n2", "node-2", 12, Availability.DRAIN)
    result = _plan(snap, deny, drain, policy=_policy(actions_per_cycle=1))
    assert result.actions == (deny,)
    assert _deferred(result) == ["budget: 1 disruptive actions per cycle"]


def test_max_unavailable_caps_tasks_stopped_at_once() -> None:
    web = service("web", replicas=4, labels=MANAGED)
    tasks = [running(web, 2, 1), running(web, 2, 2), running(web, 3, 3), running(web, 3, 4)]
    snap = snapshot([node(1, manager=True), node(2), node(3)], [web], tasks)
    deny = SetNodeLabels("n2", "node-2", 12, set_labels={"x": "1"}, evicts_services=(web.id,))
    result = _plan(snap, deny)
    assert result.actions == ()
    assert _deferred(result) == [
        "budget: max-unavailable 1 for web, and this write stops 2 of its task(s) at once"
    ]
    roomy = replace(web, labels={**MANAGED, "placement.max-unavailable": "2"})
    assert _plan(replace(snap, services=(roomy,)), deny).actions == (deny,)


def test_tasks_on_a_node_that_is_down_are_unavailable_already() -> None:
    web = service("web", replicas=2, labels=MANAGED)
    tasks = [running(web, 2, 1), running(web, 2, 2)]
    snap = snapshot([node(1, manager=True), node(2, state=NodeState.DOWN), node(3)], [web], tasks)
    deny = SetNodeLabels("n2", "node-2", 12, set_labels={"x": "1"}, evicts_services=(web.id,))
    assert _plan(snap, deny).actions == (deny,)


def test_a_start_first_move_leaves_no_task_unavailable() -> None:
    web = service("web", replicas=2, labels=MANAGED)  # the builders' services are start-first
    snap = snapshot(
        [node(1, manager=True), node(2)], [web], [running(web, 2, 1), running(web, 2, 2)]
    )
    move = SetServiceConstraints(
        web.id, web.name, web.version, ("node.id!=n2",), evicts_from=("n2",)
    )
    assert _plan(snap, move).actions == (move,)
    stop_first = replace(web, update_order="stop-first")
    result = _plan(replace(snap, services=(stop_first,)), move)
    assert result.actions == () and "max-unavailable 1" in _deferred(result)[0]


def test_a_constraint_write_stops_at_most_what_swarm_s_updater_stops_at_once() -> None:
    """A stop-first spec change is rolled out UpdateConfig.Parallelism tasks at a time,
    each once the last one's replacement runs; a node write's enforcer stops all at once.
    Counting the write's two evictions as two at once left a service both of whose tasks
    ran off its new possible owners unmoved for good (max-unavailable 1)."""
    db = replace(service("db", replicas=2, labels=MANAGED), update_order="stop-first")
    tasks = [running(db, 2, 1), running(db, 3, 2)]
    nodes = [node(1, manager=True), node(2), node(3), node(4)]
    off = SetServiceConstraints(
        db.id, db.name, db.version, ("node.id!=n2", "node.id!=n3"), evicts_from=("n2", "n3")
    )
    unbounded = snapshot(nodes, [db], tasks)
    result = _plan(unbounded, off)
    assert result.actions == () and "stops 2 of its task(s)" in _deferred(result)[0]
    one_at_a_time = replace(db, update_batch=1)
    assert _plan(replace(unbounded, services=(one_at_a_time,)), off).actions == (off,)
    two_at_a_time = replace(db, update_batch=2)
    result = _plan(replace(unbounded, services=(two_at_a_time,)), off)
    assert result.actions == () and "stops 2 of its task(s)" in _deferred(result)[0]
    # A node write is not rolled out: Swarm's constraint enforcer stops both at once.
    both = SetNodeLabels("n2", "node-2", 12, set_labels={"x": "1"}, evicts_services=(db.id,))
    twice = snapshot(nodes, [one_at_a_time], [running(db, 2, 1), running(db, 2, 2)])
    assert _plan(twice, both).actions == ()


def test_tasks_a_stop_first_surge_made_spare_stop_without_spending_max_unavailable() -> None:
    """Two tasks leave node-1 and node-2 once the surge of two runs on node-3 and node-4:
    the service never runs fewer than its operator's two, whatever Swarm's batch."""
    db = replace(service("db", replicas=2, labels=MANAGED), update_order="stop-first")
    surged = change_replicas(db, replicas=4, operation=Operation.REBALANCE, now=0.0)
    db4 = replace(db, replicas=4, labels={**db.labels, **surged.set_labels})
    nodes = [node(1, manager=True), node(2), node(3), node(4)]
    off = SetServiceConstraints(
        db.id, db.name, db.version, ("node.id!=n1", "node.id!=n2"), evicts_from=("n1", "n2")
    )
    four = [running(db4, n, n) for n in range(1, 5)]
    assert _plan(snapshot(nodes, [db4], four), off).actions == (off,)
    # One surged task not running yet: one replica would be missing, within the budget.
    one_starting = [*four[:3], replace(four[3], state=TaskState.STARTING)]
    assert _plan(snapshot(nodes, [db4], one_starting), off).actions == (off,)
    # Neither runs yet: two would be missing.
    both_starting = [*four[:2], *(replace(t, state=TaskState.STARTING) for t in four[2:])]
    result = _plan(snapshot(nodes, [db4], both_starting), off)
    assert result.actions == () and "stops 2 of its task(s)" in _deferred(result)[0]


def test_a_rules_copy_of_the_budget_is_its_own() -> None:
    _, db, snap = _three()
    budget = AvailabilityLedger(Budgets(actions_per_cycle=1), snap, {db.id: 1})
    deny = SetNodeLabels("n3", "node-3", 13, set_labels={"x": "1"}, evicts_services=())
    assert budget.refusal(deny) is None  # stops nothing: never refused
    move = replace(
        change_replicas(db, replicas=2, operation=Operation.PREEMPT, now=0.0), evicts_from=("n2",)
    )
    mine = budget.copy()
    mine.spend(move)
    assert mine.refusal(move) is not None and budget.refusal(move) is None


def test_a_constraint_that_rules_out_a_running_task_is_counted_even_unnamed() -> None:
    web, _, snap = _three()
    forgot = SetServiceConstraints(web.id, web.name, web.version, ("node.id!=n2",))
    found = disruption(forgot, snap)
    assert found is not None and found.nodes == ("n2",)
    result = _plan(snap, forgot, policy=_policy(actions_per_node=0))
    assert result.actions == () and _deferred(result)
    # Excluding a node that is down, or one the service does not run on, stops nothing.
    down = replace(
        snap,
        nodes=tuple(replace(n, state=NodeState.DOWN) if n.id == "n2" else n for n in snap.nodes),
    )
    assert disruption(forgot, down) is None
    widen = SetServiceConstraints(web.id, web.name, web.version, ("node.role!=nobody",))
    assert disruption(widen, snap) is None
