"""The blast-radius cap over random mixes of outside inputs, cycle after cycle.

Health reports (failed, degraded, ok), suspicions, task failures (quarantine and
move-offs) and plugin vetoes, on swarms with nodes down, drained or paused by an
operator: however they mix, no managed service is kept off (refused, held paused,
quarantined, reported or suspected) more of the nodes it may run on than
controller.health-panic-threshold of the ready and active nodes allows.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.actions import SetNodeAvailability, SetNodeLabels
from controller.core.apply import apply_actions
from controller.core.constraints import node_filter, parse_constraint
from controller.core.health.node_marks import (
    PAUSED,
    QUARANTINE_UNTIL,
    read_float,
    read_health_marks,
)
from controller.core.kernel.blast_radius import allowed
from controller.core.labels import deny_label, steering_constraint
from controller.core.memory import Memory
from controller.core.model import Availability, ClusterSnapshot, Node, NodeState, Service
from controller.core.outside_inputs import (
    HealthReport,
    HealthState,
    LivenessSignal,
    PluginAdvice,
    PluginVeto,
    WorkloadEvent,
)
from controller.core.plan import Plan, plan
from controller.policy import policy_from_data

from .builders import node, running, service, snapshot

NOW = 1_796_152_964.0
CYCLES = 4


@st.composite
def mixed_inputs(draw: st.DrawFn) -> tuple[ClusterSnapshot, float]:
    count = draw(st.integers(3, 8))
    nodes = [
        node(
            n,
            manager=n == 1,
            state=draw(st.sampled_from([NodeState.READY] * 4 + [NodeState.DOWN])),
            availability=draw(
                st.sampled_from(
                    [Availability.ACTIVE] * 4 + [Availability.DRAIN, Availability.PAUSE]
                )
            ),
        )
        for n in range(1, count + 1)
    ]
    ids = [n.id for n in nodes]
    services = []
    for name in draw(st.lists(st.sampled_from(["web", "api", "batch"]), min_size=1, unique=True)):
        labels = {"placement.managed": "true", "placement.failover-threshold": "2/10m"}
        if draw(st.booleans()):
            labels["placement.priority"] = "low"
        constraints = [steering_constraint(name)]
        if draw(st.booleans()):  # the operator keeps it off node-1
            constraints.insert(0, "node.hostname!=node-1")
        services.append(
            service(name, replicas=draw(st.integers(1, 3)), labels=labels, constraints=constraints)
        )
    tasks = [
        running(svc, draw(st.integers(1, count)), slot)
        for svc in services
        for slot in range(1, (svc.replicas or 0) + 1)
    ]
    reports = tuple(
        HealthReport(
            draw(st.sampled_from(ids)),
            draw(st.sampled_from(list(HealthState))),
            draw(st.sampled_from(["webhook", "plugin.topo"])),
            NOW + 3600,
            "monitor",
        )
        for _ in range(draw(st.integers(0, 4)))
    )
    failures = tuple(
        WorkloadEvent(f"f{i}-{k}", svc.id, at, NOW - 200 + 10 * i + k)
        for i, (svc, at, times) in enumerate(
            draw(
                st.lists(
                    st.tuples(st.sampled_from(services), st.sampled_from(ids), st.integers(1, 3)),
                    max_size=4,
                )
            )
        )
        for k in range(times)
    )
    vetoes = tuple(
        PluginVeto(draw(st.sampled_from(["a", "b"])), draw(st.sampled_from(services)).id, n)
        for n in draw(st.lists(st.sampled_from(ids), max_size=4))
    )
    suspected = draw(st.lists(st.sampled_from(ids), max_size=3, unique=True))
    liveness = tuple(
        LivenessSignal(n, source, False, NOW - 60, "lost")
        for n in suspected
        for source in ("gossip", "probe")
    )
    share = draw(st.sampled_from([0.25, 0.34, 0.5]))
    snap = replace(
        snapshot(nodes, services, tasks),
        health=reports,
        workload=failures,
        plugins=PluginAdvice(vetoes=vetoes, answered=("a", "b")),
        liveness=liveness,
    )
    return snap, share


def ready_and_active(snap: ClusterSnapshot) -> list[Node]:
    return [
        n
        for n in snap.nodes
        if n.state is not NodeState.DOWN
        and (n.availability is Availability.ACTIVE or PAUSED in n.labels)
    ]


def kept_off(snap: ClusterSnapshot, svc: Service, suspected: set[str], now: float) -> set[str]:
    """The nodes, not down and allowed by the operator's constraints, that outside inputs
    keep the service off."""
    allows = node_filter(parse_constraint(c) for c in svc.constraints[:-1])

    def off(n: Node) -> bool:
        return (
            n.labels.get(deny_label(svc.name)) == "true"
            or PAUSED in n.labels
            or (read_float(n.labels, QUARANTINE_UNTIL) or 0.0) > now
            or any(m.until > now for m in read_health_marks(n.labels))
            or n.hostname in suspected
        )

    return {
        n.hostname for n in snap.nodes if n.state is not NodeState.DOWN and allows(n) and off(n)
    }


def acted_suspicions(result: Plan) -> set[str]:
    said = {d.subject for d in result.decisions if d.rule == "suspicion" and d.outcome == "suspect"}
    dropped = {
        d.subject for d in result.decisions if d.rule == "suspicion" and d.outcome == "ignore"
    }
    return {s.removeprefix("node ") for s in said - dropped}


@settings(max_examples=120, deadline=None)
@given(mixed_inputs())
def test_no_service_is_kept_off_more_than_the_one_cap(case: tuple[ClusterSnapshot, float]) -> None:
    snap, share = case
    policy = policy_from_data(
        {
            "apiVersion": "placement/v1",
            "controller": {"health-panic-threshold": share},
            "nodes": {"quarantine": {"failures": 2, "max-fraction": 1.0}},
        }
    )
    base = len(ready_and_active(snap))
    cap = allowed(share, base)
    calm = replace(snap, health=(), workload=(), plugins=PluginAdvice(), liveness=())
    memory = plan(snapshot=calm, policy=policy, memory=Memory(), now=NOW - 3000).memory
    for step in range(CYCLES):
        now = NOW + step
        result = plan(snapshot=snap, policy=policy, memory=memory, now=now)
        writes = tuple(
            a for a in result.actions if isinstance(a, SetNodeLabels | SetNodeAvailability)
        )
        snap, memory = apply_actions(snap, writes), result.memory
        assert len(ready_and_active(snap)) == base, "the controller's own pause stays in the base"
        suspected = acted_suspicions(result)
        for svc in snap.services:
            off = kept_off(snap, svc, suspected, now)
            assert len(off) <= cap, (step, svc.name, sorted(off), cap, result.decisions)
