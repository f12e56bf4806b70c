from __future__ import annotations

from controller.core.actions import SetNodeAvailability, SetNodeLabels, SetReplicas
from controller.core.context import PlanContext, RuleOutput
from controller.core.memory import Memory
from controller.core.model import Availability
from controller.core.plan import plan
from controller.policy import Policy

from .builders import MANAGED, node, service, snapshot


def _rule_proposing(*actions):  # type: ignore[no-untyped-def]
    def rule(ctx: PlanContext) -> RuleOutput:
        return RuleOutput(actions=tuple(actions))

    return (("test", rule),)


def _plan(snap, *actions):  # type: ignore[no-untyped-def]
    return plan(
        snapshot=snap,
        policy=Policy.default(),
        memory=Memory(),
        now=0.0,
        rules=_rule_proposing(*actions),
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
    evict2 = SetNodeLabels("n2", "node-2", 12, set={"x": "1"}, evicts=("s-web",))
    evict3 = SetNodeLabels("n3", "node-3", 13, set={"x": "1"}, evicts=("s-web",))
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
