"""Properties of health planning over random swarms, reports, failures and vetoes."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.actions import SetNodeAvailability, SetNodeLabels
from controller.core.apply import apply_actions
from controller.core.health.node_marks import QUARANTINE_UNTIL, read_float, read_health_marks
from controller.core.kernel.blast_radius import allowed
from controller.core.labels import DENY_LABEL_PREFIX, steering_constraint
from controller.core.memory import Memory
from controller.core.model import Availability, ClusterSnapshot, NodeRole, NodeState
from controller.core.outside_inputs import (
    HealthReport,
    HealthState,
    PluginAdvice,
    PluginVeto,
    WorkloadEvent,
)
from controller.core.plan import Plan, plan
from controller.policy import policy_from_data

from .builders import node, running, service, snapshot

NOW = 1_796_152_964.0  # a moment of today: epoch seconds have ten digits
POLICY = policy_from_data(
    {"apiVersion": "placement/v1", "nodes": {"quarantine": {"failures": 2, "max-fraction": 0.5}}}
)
NAMES = ["web", "db", "batch", "api"]


@st.composite
def troubled_swarms(draw: st.DrawFn) -> ClusterSnapshot:
    count = draw(st.integers(1, 6))
    managers = draw(st.integers(1, count))
    services = []
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True)):
        labels = {"placement.managed": draw(st.sampled_from(["true", "false"]))}
        if draw(st.booleans()):
            labels["placement.failover-threshold"] = "2/10m"
        if draw(st.booleans()):
            labels["placement.preemptible"] = "false"
        services.append(
            service(
                name,
                replicas=draw(st.integers(0, 3)),
                labels=labels,
                constraints=[steering_constraint(name)],
            )
        )
    nodes = [
        node(
            n,
            manager=n <= managers,
            state=draw(st.sampled_from([NodeState.READY, NodeState.READY, NodeState.DOWN])),
            availability=draw(st.sampled_from(list(Availability))),
        )
        for n in range(1, count + 1)
    ]
    tasks = [
        running(svc, draw(st.integers(1, count)), slot)
        for svc in services
        for slot in range(1, (svc.replicas or 0) + 1)
    ]
    node_ids = [n.id for n in nodes]
    reports = tuple(
        HealthReport(
            draw(st.sampled_from(node_ids)),
            draw(st.sampled_from(list(HealthState))),
            draw(st.sampled_from(["webhook", "plugin.topo"])),
            NOW + draw(st.sampled_from([-10.0, 30.0, 600.0])),
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    events = tuple(
        WorkloadEvent(
            f"t{i}",
            draw(st.sampled_from([s.id for s in services] or ["s-x"])),
            draw(st.sampled_from(node_ids)),
            NOW - draw(st.sampled_from([5.0, 100.0, 5000.0])),
        )
        for i in range(draw(st.integers(0, 6)))
    )
    vetoes = tuple(
        PluginVeto(
            "topo", draw(st.sampled_from([s.id for s in services])), draw(st.sampled_from(node_ids))
        )
        for _ in range(draw(st.integers(0, 3)) if services else 0)
    )
    return replace(
        snapshot(nodes, services, tasks),
        health=reports,
        workload=events,
        plugins=PluginAdvice(vetoes=vetoes),
    )


def _memory(snap: ClusterSnapshot) -> Memory:
    calm = replace(snap, health=(), workload=(), plugins=PluginAdvice())
    return plan(snapshot=calm, policy=POLICY, memory=Memory(), now=NOW - 3000).memory


def _plan(snap: ClusterSnapshot, memory: Memory) -> Plan:
    return plan(snapshot=snap, policy=POLICY, memory=memory, now=NOW)


def _node_writes(result: Plan) -> tuple[SetNodeLabels | SetNodeAvailability, ...]:
    return tuple(a for a in result.actions if isinstance(a, SetNodeLabels | SetNodeAvailability))


@settings(max_examples=200, deadline=None)
@given(troubled_swarms())
def test_health_planning_is_deterministic(snap: ClusterSnapshot) -> None:
    memory = _memory(snap)
    assert _plan(snap, memory) == _plan(snap, memory)


@settings(max_examples=200, deadline=None)
@given(troubled_swarms())
def test_node_writes_converge(snap: ClusterSnapshot) -> None:
    """Applying the node writes and planning again settles: the disruption budgets may
    defer some writes to later cycles, but nothing is written back and forth."""
    memory = _memory(snap)
    seen: list[tuple[SetNodeLabels | SetNodeAvailability, ...]] = []
    for _ in range(len(snap.nodes) + 2):
        result = _plan(snap, memory)
        writes = _node_writes(result)
        if not writes:
            return
        assert writes not in seen, "the same writes again: they oscillate"
        seen.append(writes)
        snap, memory = apply_actions(snap, writes), result.memory
    raise AssertionError(f"node writes did not settle: {seen}")


@settings(max_examples=200, deadline=None)
@given(troubled_swarms())
def test_safety(snap: ClusterSnapshot) -> None:
    memory = _memory(snap)
    result = _plan(snap, memory)
    after = apply_actions(snap, _node_writes(result))
    # Never more than max-fraction of the nodes quarantined.
    cap = math.floor(0.5 * len(snap.nodes))
    held = [n for n in after.nodes if (read_float(n.labels, QUARANTINE_UNTIL) or 0) > NOW]
    assert len(held) <= cap
    # Deny labels only ever refuse managed services.
    managed = {s.name for s in snap.services if result.resolved[s.id].settings.managed}
    for action in _node_writes(result):
        labels = action.set_labels
        for key in labels:
            if key.startswith(DENY_LABEL_PREFIX):
                assert key.removeprefix(DENY_LABEL_PREFIX) in managed

    # A manager that took tasks is never the last one to stop taking them.
    def takers(s: ClusterSnapshot) -> list[str]:
        return [n.id for n in s.nodes if n.role is NodeRole.MANAGER and n.accepts_tasks]

    if takers(snap):
        assert takers(after), result.actions
    # No health write is one the guards have to refuse.
    assert not [d for d in result.decisions if d.rule == "guard" and d.outcome == "refuse"]


@settings(max_examples=200, deadline=None)
@given(troubled_swarms())
def test_health_reports_take_no_more_ready_nodes_than_the_share(snap: ClusterSnapshot) -> None:
    """However many nodes are reported, cycle after cycle the ready nodes that carry a
    report in force (refused every service, or paused) stay within the panic threshold."""
    share = POLICY.controller.health_panic_threshold
    memory = _memory(snap)
    for step in range(len(snap.nodes) + 2):
        result = plan(snapshot=snap, policy=POLICY, memory=memory, now=NOW + step)
        snap, memory = apply_actions(snap, _node_writes(result)), result.memory
        ready = [n for n in snap.nodes if n.is_ready]
        taken = [n for n in ready if any(r.until > NOW + step for r in read_health_marks(n.labels))]
        assert len(taken) <= allowed(share, len(ready)), result.decisions
