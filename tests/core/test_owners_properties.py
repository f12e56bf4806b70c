"""Properties of the owners rule over random swarms and random placement settings."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.actions import SetServiceConstraints
from controller.core.apply import apply_actions
from controller.core.constraints import node_satisfies, parse_constraint
from controller.core.kernel.candidates import expand_owner_list
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, NodeState, Service
from controller.core.plan import plan
from controller.policy import Policy

from .builders import node, running, service, snapshot

HOSTS = [f"node-{i}" for i in range(1, 7)]
NOW = 1_796_152_964.0  # a moment of today: epoch seconds have ten digits


@st.composite
def placement_labels(draw: st.DrawFn) -> dict[str, str]:
    labels = {"placement.managed": "true"}
    if draw(st.booleans()):
        labels["placement.preferred-nodes"] = ",".join(
            draw(st.lists(st.sampled_from(HOSTS), min_size=1, max_size=3, unique=True))
        )
    if draw(st.booleans()):
        labels["placement.possible-nodes"] = ",".join(
            draw(st.lists(st.sampled_from(HOSTS), min_size=1, max_size=4, unique=True))
        )
    if draw(st.booleans()):
        labels["placement.anti-affinity"] = "front"
        labels["placement.anti-affinity-mode"] = draw(st.sampled_from(["soft", "hard"]))
    if draw(st.booleans()):
        labels["placement.spread"] = "rack"
    labels["placement.failback"] = draw(st.sampled_from(["never", "immediate"]))
    labels["placement.failback-delay"] = "0s"
    labels["placement.priority"] = draw(st.sampled_from(["high", "medium", "low"]))
    return labels


@st.composite
def swarms(draw: st.DrawFn) -> ClusterSnapshot:
    count = draw(st.integers(2, 6))
    nodes = [
        node(
            i,
            manager=i == 1,
            state=draw(st.sampled_from([NodeState.READY, NodeState.READY, NodeState.DOWN])),
            labels={"rack": f"r{(i + 1) // 2}"},
        )
        for i in range(1, count + 1)
    ]
    services: list[Service] = []
    tasks = []
    for name in draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, unique=True)):
        svc = service(name, replicas=draw(st.integers(1, 4)), labels=draw(placement_labels()))
        services.append(svc)
        for slot in range(1, (svc.replicas or 0) + 1):
            if draw(st.booleans()):
                tasks.append(running(svc, draw(st.integers(1, count)), slot))
    return snapshot(nodes, services, tasks)


STABLE = Memory(node_ready_since={f"n{i}": 0.0 for i in range(1, 7)}, started=True)


def _plan(snap: ClusterSnapshot, memory: Memory = STABLE):  # type: ignore[no-untyped-def]
    return plan(snapshot=snap, policy=Policy.default(), memory=memory, now=NOW)


def _effective_constraints(snap: ClusterSnapshot, result) -> dict[str, tuple[str, ...]]:  # type: ignore[no-untyped-def]
    after = apply_actions(snap, result.actions)
    return {s.id: s.constraints for s in after.services}


@settings(max_examples=200, deadline=None)
@given(swarms())
def test_owners_plan_is_deterministic(snap: ClusterSnapshot) -> None:
    assert _plan(snap) == _plan(snap)


@settings(max_examples=200, deadline=None)
@given(swarms())
def test_a_possible_owner_constraint_never_allows_another_node(snap: ClusterSnapshot) -> None:
    """Once the owners rule has written a service's constraints, no node outside its
    possible owners satisfies them (before it has, the service was never steered)."""
    result = _plan(snap)
    written = {a.service_id: a for a in result.actions if isinstance(a, SetServiceConstraints)}
    for svc in snap.services:
        settings_ = result.resolved[svc.id].settings
        action = written.get(svc.id)
        if not settings_.possible_nodes or action is None:
            continue
        possible = set(expand_owner_list(settings_.possible_nodes, snap.nodes, {}))
        parsed = tuple(parse_constraint(c) for c in action.constraints)
        for n in snap.nodes:
            if n.id not in possible:
                assert not node_satisfies(n, parsed), f"{svc.name} allowed on {n.hostname}"


@settings(max_examples=200, deadline=None)
@given(swarms())
def test_hard_anti_affinity_mates_never_both_allow_an_occupied_node(snap: ClusterSnapshot) -> None:
    """For every ready node holding a task of a hard-anti-affinity service, no other
    member of its class is allowed there by the constraints after the plan, unless that
    member is the one staying (a tie goes to the member planned first)."""
    result = _plan(snap)
    constraints = _effective_constraints(snap, result)
    hard = [
        s
        for s in snap.services
        if result.resolved[s.id].settings.anti_affinity
        and result.resolved[s.id].settings.anti_affinity_mode.value == "hard"
    ]
    ready = {n.id: n for n in snap.nodes if n.is_ready}
    for a in hard:
        a_nodes = {t.node_id for t in snap.tasks_of(a.id) if t.node_id in ready}
        for b in hard:
            if b.id == a.id or not result.resolved[b.id].settings.anti_affinity:
                continue
            written = [
                x
                for x in result.actions
                if isinstance(x, SetServiceConstraints) and x.service_id == b.id
            ]
            if not written:
                continue  # b was not (re)steered this cycle: it waits or is unchanged
            parsed = tuple(parse_constraint(c) for c in constraints[b.id])
            b_nodes = {t.node_id for t in snap.tasks_of(b.id) if t.node_id in ready}
            for node_id in a_nodes - b_nodes:
                assert not node_satisfies(ready[node_id], parsed), (
                    f"{b.name} may be placed on {ready[node_id].hostname} beside {a.name}"
                )


@settings(max_examples=200, deadline=None)
@given(swarms())
def test_replanning_after_applying_converges_to_no_actions(snap: ClusterSnapshot) -> None:
    """Applying each plan and planning again reaches a plan with no actions. It may take
    a few rounds: node labels land before the constraint that needs them, and budgets
    defer some writes to the next cycle; it must never oscillate."""
    memory = STABLE
    for _ in range(8):
        result = _plan(snap, memory)
        if not result.actions:
            return
        snap, memory = apply_actions(snap, result.actions), result.memory
    raise AssertionError(f"still acting after 8 rounds: {result.actions}")


def test_possible_nodes_from_builders_are_resolved_by_hostname() -> None:
    snap = snapshot([node(1), node(2)], [])
    assert expand_owner_list(["node-2"], snap.nodes, {}) == ("n2",)
    assert replace(snap) == snap
