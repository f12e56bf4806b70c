"""Properties of preemption and restore over random swarms short of capacity.

Checked against `swarm_sim`, a model of Swarm's scale-down and scheduler written apart
from the core, so the core's own model of where room appears is not trusted blindly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from itertools import product

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from controller.core.actions import SetReplicas, describe
from controller.core.model import ClusterSnapshot, Service, Task
from controller.core.plan import Plan
from controller.core.replicas import (
    DETAIL_LABEL,
    REPLICA_RECORD_LABELS,
    ReplicaRecordError,
    read_replica_record,
)
from controller.policy import ControllerSettings, Policy

from .builders import snapshot
from .capacity_builders import on, pending, run, slot_nodes, svc
from .swarm_sim import execute, fit_count, free_room, removals

PRIORITIES = st.sampled_from([0, 500, 1000, 1500, 2000, 2500, 3000])
GAPS = st.sampled_from([1, 500, 1000])


@st.composite
def short_swarms(draw: st.DrawFn, *, uniform: bool = False) -> ClusterSnapshot:
    """Nodes with 1-3 slots, residents scheduled first (some with a preemption record),
    then a newcomer that may find no room (the simulated scheduler places it last)."""
    nodes = slot_nodes(*draw(st.lists(st.integers(1, 3), min_size=1, max_size=4)))
    services = []
    for i in range(draw(st.integers(1, 3))):
        replicas = draw(st.integers(0, 5))
        labels = {}
        if not uniform and draw(st.integers(0, 3)) == 0:
            labels = {
                "swarm-placement.replicas": str(replicas + draw(st.integers(0, 3))),
                "swarm-placement.replicas-set": str(replicas),
                "swarm-placement.operation": "preempt",
                "swarm-placement.operation-since": "1",
                DETAIL_LABEL: "earlier",
            }
        services.append(
            svc(
                f"r{i}",
                replicas,
                priority=draw(PRIORITIES),
                reserve=1 if uniform else draw(st.integers(1, 2)),
                preemptible=draw(st.sampled_from([True, True, True, False])),
                managed=draw(st.sampled_from([True, True, True, False])),
                labels=labels,
            )
        )
    if not uniform:
        services.append(
            svc(
                "z-new",
                draw(st.integers(0, 4)),
                priority=draw(PRIORITIES),
                reserve=draw(st.integers(1, 3)),
                preemptible=draw(st.booleans()),
            )
        )
    return execute(snapshot(nodes, services), ())


@st.composite
def full_swarms(draw: st.DrawFn) -> ClusterSnapshot:
    """Every node filled by residents, and a newcomer with all its tasks pending."""
    nodes = slot_nodes(*draw(st.lists(st.integers(1, 3), min_size=1, max_size=4)))
    residents = [
        svc(
            f"r{i}",
            0,
            priority=draw(PRIORITIES),
            reserve=draw(st.integers(1, 2)),
            preemptible=draw(st.sampled_from([True, True, True, False])),
            managed=draw(st.sampled_from([True, True, True, False])),
        )
        for i in range(draw(st.integers(1, 3)))
    ]
    tasks: list[Task] = []
    for number, node in enumerate(nodes, 1):
        free = node.capacity.generic["slot"]
        while free > 0:
            pick = residents[draw(st.integers(0, len(residents) - 1))]
            need = pick.reservations.generic["slot"]
            if need > free:
                break
            tasks += on(pick, number, first_slot=len(tasks) + 1)
            free -= need
    counts = Counter(t.service_id for t in tasks)
    residents = [replace(r, replicas=counts[r.id]) for r in residents]
    newcomer = svc(
        "z-new",
        draw(st.integers(1, 6)),
        priority=draw(st.sampled_from([1000, 2000, 2500, 3000])),
        reserve=draw(st.integers(1, 3)),
    )
    tasks += pending(newcomer, newcomer.replicas or 0)
    return snapshot(nodes, [*residents, newcomer], tasks)


ANY_SWARM = st.one_of(short_swarms(), full_swarms())


def _policy(gap: int) -> Policy:
    return replace(Policy.default(), controller=ControllerSettings(preemption_gap=gap))


def _by_rule(result: Plan) -> dict[str, list[SetReplicas]]:
    rules = {d.action_text: d.rule for d in result.decisions if d.action}
    out: dict[str, list[SetReplicas]] = {}
    for action in result.actions:
        assert isinstance(action, SetReplicas)
        out.setdefault(rules[describe(action)], []).append(action)
    return out


def _priority(snap: ClusterSnapshot, name: str) -> int:
    service = next(s for s in snap.services if s.name == name)
    return int(service.labels["placement.priority"])


@settings(max_examples=200, deadline=None)
@given(ANY_SWARM, GAPS)
def test_plans_are_deterministic(snap: ClusterSnapshot, gap: int) -> None:
    assert run(snap, policy=_policy(gap)) == run(snap, policy=_policy(gap))


@settings(max_examples=300, deadline=None)
@given(ANY_SWARM, GAPS)
def test_victims_are_lower_by_the_gap_preemptible_and_managed(
    snap: ClusterSnapshot, gap: int
) -> None:
    result = run(snap, policy=_policy(gap))
    for action in _by_rule(result).get("preemption", []):
        victim = snap.service_by_id[action.service_id]
        assert victim.labels.get("placement.managed") == "true"
        assert victim.labels["placement.preemptible"] == "true", "non-preemptible touched"
        pending_name = action.set_labels[DETAIL_LABEL].rsplit(" for ", 1)[1]
        assert _priority(snap, victim.name) <= _priority(snap, pending_name) - gap
        assert action.replicas < (victim.replicas or 0)


@settings(max_examples=300, deadline=None)
@given(ANY_SWARM, GAPS)
def test_restoring_never_exceeds_the_recorded_count(snap: ClusterSnapshot, gap: int) -> None:
    result = run(snap, policy=_policy(gap))
    for action in _by_rule(result).get("restore", []):
        service = snap.service_by_id[action.service_id]
        record = read_replica_record(service.labels)
        assert record is not None and record.operation == "preempt"
        assert (service.replicas or 0) <= action.replicas <= record.base


def _worst_fit_after(snap: ClusterSnapshot, pending: Service, cuts: Mapping[str, int]) -> int:
    """Tasks of `pending` that fit after the cuts, for the worst of Swarm's choices."""
    choices = []
    for service_id, count in cuts.items():
        own = [t for t in snap.tasks if t.service_id == service_id]
        choices.append(list(removals(own, count)))
    worst = 10**6
    for combo in product(*choices):
        gone = set().union(*combo)
        after = replace(snap, tasks=tuple(t for t in snap.tasks if t.id not in gone))
        worst = min(worst, fit_count(free_room(after), pending))
    return worst


@settings(max_examples=300, deadline=None)
@given(ANY_SWARM, GAPS)
def test_a_preemption_helps_whatever_swarm_picks_or_nothing_is_touched(
    snap: ClusterSnapshot, gap: int
) -> None:
    waiting = {t.service_id for t in snap.tasks if not t.node_id}
    assume(len(waiting) == 1)  # one pending service: no other claim on the room
    result = run(snap, policy=_policy(gap))
    preempted = _by_rule(result).get("preemption", [])
    (pending_id,) = waiting
    pending = snap.service_by_id[pending_id]
    if not preempted:
        return
    cuts = {
        a.service_id: (snap.service_by_id[a.service_id].replicas or 0) - a.replicas
        for a in preempted
    }
    before = fit_count(free_room(snap), pending)
    assert _worst_fit_after(snap, pending, cuts) > before


@settings(max_examples=300, deadline=None)
@given(ANY_SWARM, GAPS)
def test_a_preemption_that_cannot_help_touches_nothing(snap: ClusterSnapshot, gap: int) -> None:
    result = run(snap, policy=_policy(gap))
    helped = [d for d in result.decisions if d.rule == "preemption" and d.outcome == "preempt"]
    if not helped:
        assert "preemption" not in _by_rule(result)


def _counts(snap: ClusterSnapshot) -> dict[str, int]:
    """Each service's operator count: its record's base, else its replicas."""
    out = {}
    for service in snap.services:
        try:
            record = read_replica_record(service.labels)
        except ReplicaRecordError:
            record = None
        out[service.name] = record.base if record is not None else service.replicas or 0
    return out


def _settle(snap: ClusterSnapshot, counts: Mapping[str, int], rounds: int = 20) -> ClusterSnapshot:
    for _ in range(rounds):
        result = run(snap)
        if not result.actions:
            return snap
        snap = execute(snap, result.actions)
        now = _counts(snap)
        assert {name: now[name] for name in counts} == counts, "a recorded count was lost"
    raise AssertionError("no convergence")


@settings(max_examples=300, deadline=None)
@given(short_swarms(uniform=True), st.integers(1, 4))
def test_preempt_then_remove_the_preemptor_restores_every_count_exactly(
    snap: ClusterSnapshot, high_replicas: int
) -> None:
    # Start from a swarm where everything runs and nothing is recorded.
    assume(all(t.node_id for t in snap.tasks))
    assume(all(not any(k in s.labels for k in REPLICA_RECORD_LABELS) for s in snap.services))
    counts = _counts(snap)
    high = svc("zz-high", high_replicas, priority="high")
    snap = execute(replace(snap, services=(*snap.services, high)), ())
    settled = _settle(snap, counts)  # every round keeps each recorded count intact
    assert all(_counts(settled)[name] == n for name, n in counts.items())
    gone = replace(
        settled,
        services=tuple(s for s in settled.services if s.id != high.id),
        tasks=tuple(t for t in settled.tasks if t.service_id != high.id),
    )
    final = _settle(gone, counts)
    for service in final.services:
        assert service.replicas == counts[service.name], service.name
        assert not any(k in service.labels for k in REPLICA_RECORD_LABELS), service.name
