"""Properties of plan() over random swarms: determinism, convergence, safety."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.actions import SetNodeAvailability, target_of
from controller.core.apply import apply_actions
from controller.core.context import PlanContext, RuleOutput, RuleSpec
from controller.core.labels import deny_label
from controller.core.memory import Memory
from controller.core.model import Availability, ClusterSnapshot, NodeRole, NodeState
from controller.core.plan import plan
from controller.policy import Policy

from .builders import node, running, service, snapshot

MANAGED_VALUES = st.sampled_from(["true", "false", "yes", "off", None])


@st.composite
def swarms(draw: st.DrawFn) -> ClusterSnapshot:
    node_count = draw(st.integers(1, 6))
    managers = draw(st.integers(1, node_count))
    names = draw(st.lists(st.sampled_from(["web", "db", "batch", "api", "cache"]), unique=True))
    services = []
    for name in names:
        managed = draw(MANAGED_VALUES)
        labels = {} if managed is None else {"placement.managed": managed}
        services.append(service(name, replicas=draw(st.integers(0, 4)), labels=labels))
    nodes = []
    for n in range(1, node_count + 1):
        stale = draw(st.lists(st.sampled_from(["web", "gone", "db"]), unique=True))
        nodes.append(
            node(
                n,
                manager=n <= managers,
                state=draw(st.sampled_from([NodeState.READY, NodeState.DOWN])),
                availability=draw(st.sampled_from(list(Availability))),
                labels={deny_label(s): "true" for s in stale},
            )
        )
    tasks = [
        running(svc, draw(st.integers(1, node_count)), slot)
        for svc in services
        for slot in range(1, (svc.replicas or 0) + 1)
    ]
    return snapshot(nodes, services, tasks)


def _plan(snap: ClusterSnapshot):  # type: ignore[no-untyped-def]
    return plan(snapshot=snap, policy=Policy.default(), memory=Memory(), now=1000.0)


@settings(max_examples=150, deadline=None)
@given(swarms())
def test_plan_is_deterministic(snap: ClusterSnapshot) -> None:
    assert _plan(snap) == _plan(snap)


@settings(max_examples=150, deadline=None)
@given(swarms())
def test_replanning_after_applying_a_plan_yields_no_actions(snap: ClusterSnapshot) -> None:
    first = _plan(snap)
    after = apply_actions(snap, first.actions)
    assert _plan(after).actions == ()


@settings(max_examples=150, deadline=None)
@given(swarms())
def test_unmanaged_services_are_never_touched(snap: ClusterSnapshot) -> None:
    result = _plan(snap)
    managed = {sid for sid, r in result.resolved.items() if r.settings.managed}
    for action in result.actions:
        kind, ident = target_of(action)
        if kind == "service":
            assert ident in managed


@settings(max_examples=200, deadline=None)
@given(swarms(), st.data())
def test_the_last_active_manager_is_never_drained(
    snap: ClusterSnapshot, data: st.DataObject
) -> None:
    """Whatever availability changes a rule proposes, a manager stays active."""
    proposals = tuple(
        SetNodeAvailability(
            n.id, n.hostname, n.version, data.draw(st.sampled_from(list(Availability)))
        )
        for n in snap.nodes
        if data.draw(st.booleans())
    )

    def propose(ctx: PlanContext) -> RuleOutput:
        return RuleOutput(actions=proposals)

    result = plan(
        snapshot=snap,
        policy=Policy.default(),
        memory=Memory(),
        now=0.0,
        rules=(RuleSpec("t", propose),),
    )
    after = apply_actions(snap, result.actions)

    def active_managers(s: ClusterSnapshot) -> list[str]:
        return [n.id for n in s.nodes if n.role is NodeRole.MANAGER and n.accepts_tasks]

    if active_managers(snap):
        assert active_managers(after), f"{result.actions} left no active manager"
