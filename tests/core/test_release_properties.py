"""Properties of releasing services over random swarms: letting go never stops a task.

Services carry random mixes of the controller's constraints and labels, replica records,
operator constraints and labels; some are managed, some not (`managed=false`, or a
label error with nothing to fall back on); nodes carry random possible-owner marks. The
plan is applied cycle after cycle, as Swarm would apply the writes.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.actions import Action, SetNodeAvailability, SetNodeLabels
from controller.core.apply import apply_actions
from controller.core.constraints import node_satisfies, parse_constraint
from controller.core.labels import (
    EXCLUDED_LABEL,
    exclusion_constraint,
    is_own_constraint,
    is_own_label,
    possible_constraint,
    possible_label,
    steering_constraint,
)
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, Node, Service
from controller.core.plan import Plan, plan
from controller.core.replicas import BASE_LABEL, OPERATION_LABEL, SET_LABEL
from controller.core.rules.release.release_plan import (
    ReleaseConstraints,
    ReleaseReplicas,
    release_refusal,
)
from controller.policy import Policy

from .builders import node, running, service, snapshot

NAMES = ("a", "b", "c", "d")
OPERATOR = ("node.role==worker", "node.labels.rack!=r9", "node.id!=n4")


@st.composite
def services(draw: st.DrawFn, name: str, node_ids: list[str]) -> Service:
    labels = {"team": name}
    labels["placement.managed"] = draw(st.sampled_from(["true", "false"]))
    if draw(st.booleans()):
        labels["placement.priority"] = draw(st.sampled_from(["high", "hihg"]))  # a typo
    if labels["placement.managed"] == "true" and draw(st.booleans()):
        hosts = draw(st.lists(st.sampled_from(node_ids), min_size=1, max_size=3, unique=True))
        labels["placement.possible-nodes"] = ",".join(f"node-{h[1:]}" for h in hosts)
    constraints = list(draw(st.lists(st.sampled_from(OPERATOR), unique=True, max_size=2)))
    if draw(st.booleans()):
        constraints.append(steering_constraint(name))
    if draw(st.booleans()):
        constraints.append(possible_constraint(name))
    excluded = draw(st.lists(st.sampled_from(node_ids), unique=True, max_size=2))
    if excluded:
        labels[EXCLUDED_LABEL] = ",".join(sorted(excluded))
        constraints.extend(exclusion_constraint(n) for n in sorted(excluded))
    if draw(st.booleans()):
        labels["swarm-placement.adopted"] = "true"
    replicas = draw(st.integers(1, 4))
    if draw(st.booleans()):
        base = draw(st.integers(1, 5))
        written = draw(st.sampled_from([replicas, replicas + 1]))  # +1: the operator scaled
        labels.update({BASE_LABEL: str(base), SET_LABEL: str(written), OPERATION_LABEL: "hold"})
    return service(name, replicas=replicas, labels=labels, constraints=constraints)


@st.composite
def swarms(draw: st.DrawFn) -> ClusterSnapshot:
    count = draw(st.integers(2, 5))
    node_ids = [f"n{i}" for i in range(1, count + 1)]
    svcs = [draw(services(name, node_ids)) for name in NAMES[: draw(st.integers(1, 4))]]
    nodes = []
    for i in range(1, count + 1):
        marked = draw(st.lists(st.sampled_from([s.name for s in svcs]), unique=True))
        labels = {possible_label(m): "true" for m in marked}
        nodes.append(node(i, manager=i == 1, labels=labels))
    tasks = []
    for s in svcs:
        fits = [n for n in nodes if node_satisfies(n, _parsed(s))]
        for slot in range(s.replicas or 0):
            if fits:
                tasks.append(running(s, int(fits[slot % len(fits)].id[1:]), slot))
    return snapshot(nodes, svcs, tasks)


def _parsed(s: Service):  # type: ignore[no-untyped-def]
    return tuple(parse_constraint(c) for c in s.constraints)


def _plan(snap: ClusterSnapshot, memory: Memory) -> Plan:
    return plan(snapshot=snap, policy=Policy.default(), memory=memory, now=1000.0)


def _unmanaged(result: Plan, snap: ClusterSnapshot) -> list[Service]:
    return [s for s in snap.services if not result.resolved[s.id].settings.managed]


def _removed(action: Action) -> tuple[str, ...]:
    if isinstance(action, SetNodeLabels):
        return action.remove_labels
    if isinstance(action, SetNodeAvailability):
        return action.remove_labels
    return ()


def _nodes_allowing(s: Service, nodes: tuple[Node, ...]) -> set[str]:
    return {n.id for n in nodes if node_satisfies(n, _parsed(s))}


@settings(max_examples=150, deadline=None)
@given(swarms())
def test_releasing_never_stops_a_task_and_takes_back_only_ours(snap: ClusterSnapshot) -> None:
    memory = Memory()
    for _ in range(6):
        result = _plan(snap, memory)
        unmanaged = _unmanaged(result, snap)
        by_id = {s.id: s for s in unmanaged}
        for action in result.actions:
            target = by_id.get(getattr(action, "service_id", ""))
            if target is None:
                continue
            # Only a release touches an unmanaged service, and only to take back ours.
            assert isinstance(action, ReleaseConstraints | ReleaseReplicas), action
            assert release_refusal(target, action) is None
            assert not action.set_labels and all(is_own_label(k) for k in action.remove_labels)
            if isinstance(action, ReleaseConstraints):
                gone = set(target.constraints) - set(action.constraints)
                assert all(is_own_constraint(c, target.name, target.labels) for c in gone)
        # The writes land one at a time, in plan order: after each, every node running a
        # task of an unmanaged service still allows it (no node label its constraint
        # needs went before the constraint, and its constraints only widened).
        after = snap
        for action in result.actions:
            after = apply_actions(after, (action,))
            for s in unmanaged:
                hosting = {t.node_id for t in snap.tasks_of(s.id)}
                allowed_before = _nodes_allowing(s, snap.nodes) & hosting
                allowed_after = _nodes_allowing(after.service_by_id[s.id], after.nodes)
                assert allowed_before <= allowed_after, (s.name, result.actions)
        snap, memory = after, result.memory
    # Converged: no unmanaged service keeps anything of ours.
    final = _plan(snap, memory)
    for s in _unmanaged(final, snap):
        assert not any(is_own_constraint(c, s.name, s.labels) for c in s.constraints), s
        assert not any(is_own_label(k) for k in s.labels), s


@settings(max_examples=150, deadline=None)
@given(swarms())
def test_a_mark_a_constraint_requires_goes_only_by_its_own_services_policy(
    snap: ClusterSnapshot,
) -> None:
    """No node label that any service's constraint requires is removed, but a managed
    service's own mark on a node its possible owners no longer name (a deliberate move)."""
    result = _plan(snap, Memory())
    for action in result.actions:
        node_id = getattr(action, "node_id", None)
        if node_id is None:
            continue
        before = snap.node_by_id[node_id]
        for s in snap.services:
            settings_ = result.resolved[s.id].settings
            for c in _parsed(s):
                label = c.key.removeprefix("node.labels.")
                if not (c.equal and label in _removed(action) and c.matches(before)):
                    continue
                own = label == possible_label(s.name)
                followed = settings_.managed and bool(settings_.possible_nodes)
                assert own and followed and before.hostname not in settings_.possible_nodes, (
                    f"{label} removed from {before.hostname}: {s.name} needs it"
                )
