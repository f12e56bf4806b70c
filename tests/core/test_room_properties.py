"""Properties of moves over random swarms with scarce room: a move never sends a task where
Swarm's scheduler (core/simulate) would leave it pending, a stop-first service is never
moved by an exclusion while its surge is not running, and every owners or failover write
has a decision that names it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.actions import SetReplicas, SetServiceConstraints, describe
from controller.core.apply import apply_actions
from controller.core.capacity import RESERVING_STATES
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, Resources, Service
from controller.core.plan import Plan, plan
from controller.core.rules import rules_named
from controller.core.simulate.scheduler import Scheduler
from controller.policy import Policy

from .builders import node, running, service, snapshot

HOSTS = [f"node-{i}" for i in range(1, 6)]
NOW = 1_000_000.0
STABLE = Memory(node_ready_since={f"n{i}": 0.0 for i in range(1, 6)}, started=True)
RULES = rules_named("failover", "owners")


@st.composite
def scarce_swarms(draw: st.DrawFn) -> ClusterSnapshot:
    count = draw(st.integers(2, 5))
    nodes = [
        replace(
            node(i, manager=i == 1), capacity=Resources(generic={"slot": draw(st.integers(0, 2))})
        )
        for i in range(1, count + 1)
    ]
    services: list[Service] = []
    tasks = []
    for name in draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, unique=True)):
        labels = {"placement.managed": draw(st.sampled_from(["true", "true", "false"]))}
        if draw(st.booleans()):
            labels["placement.preferred-nodes"] = ",".join(
                draw(st.lists(st.sampled_from(HOSTS[:count]), min_size=1, max_size=2, unique=True))
            )
        labels["placement.failback"] = draw(st.sampled_from(["never", "immediate"]))
        labels["placement.failback-delay"] = "0s"
        svc = replace(
            service(name, replicas=draw(st.integers(1, 3)), labels=labels),
            # Docker leaves a reservation of nothing out of the spec: none, or one slot.
            reservations=Resources(generic={"slot": 1}) if draw(st.booleans()) else Resources(),
            update_order=draw(st.sampled_from(["start-first", "stop-first"])),
            max_replicas_per_node=draw(st.sampled_from([0, 0, 1])),
        )
        services.append(svc)
        for slot in range(1, (svc.replicas or 0) + 1):
            if draw(st.booleans()):
                tasks.append(running(svc, draw(st.integers(1, count)), slot))
    return snapshot(nodes, services, tasks)


def _plan(snap: ClusterSnapshot) -> Plan:
    return plan(snapshot=snap, policy=Policy.default(), memory=STABLE, now=NOW, rules=RULES)


def _scheduler(snap: ClusterSnapshot) -> Scheduler:
    assigned = [
        (t.service_id, t.node_id) for t in snap.tasks if t.node_id and t.state in RESERVING_STATES
    ]
    return Scheduler(snap.nodes, snap.service_by_id, assigned)


@settings(max_examples=300, deadline=None)
@given(scarce_swarms())
def test_no_move_sends_a_task_where_swarm_would_leave_it_pending(snap: ClusterSnapshot) -> None:
    result = _plan(snap)
    after = apply_actions(snap, result.actions)
    for action in result.actions:
        svc = after.service_by_id[action.service_id]  # type: ignore[union-attr]
        if isinstance(action, SetServiceConstraints) and action.evicts_from:
            # Each evicted task gets a replacement: the scheduler must place every one.
            scheduler = _scheduler(snap)
            moved = sum(
                1 for t in snap.tasks_of(svc.id) if t.node_id in action.evicts_from and t.is_running
            )
            for _ in range(moved):
                target, error = scheduler.place(svc)
                assert target is not None, f"{describe(action)}: {error}"
                assert target not in action.evicts_from
        elif isinstance(action, SetReplicas) and action.evicts_from:
            scheduler = _scheduler(snap)
            before = snap.service_by_id[svc.id].replicas or 0
            for _ in range(action.replicas - before):
                target, error = scheduler.place(svc)
                assert target is not None, f"{describe(action)}: {error}"


@settings(max_examples=300, deadline=None)
@given(scarce_swarms())
def test_a_stop_first_service_is_never_excluded_from_a_node_it_runs_on_unsurged(
    snap: ClusterSnapshot,
) -> None:
    """An exclusion that stops a stop-first task only comes while a surge runs beside it."""
    result = _plan(snap)
    for action in result.actions:
        if not (isinstance(action, SetServiceConstraints) and action.evicts_from):
            continue
        svc = snap.service_by_id[action.service_id]
        if svc.update_order == "start-first":
            continue
        assert svc.labels.get("swarm-placement.operation") == "rebalance", describe(action)


@settings(max_examples=300, deadline=None)
@given(scarce_swarms())
def test_every_owners_and_failover_write_has_a_decision_naming_it(snap: ClusterSnapshot) -> None:
    result = _plan(snap)
    named = [d.action for d in result.decisions if d.rule in {"owners", "failover"}]
    for action in result.actions:
        assert action in named, describe(action)
