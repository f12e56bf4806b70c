"""Every write has a decision: each rule in RULES names every action it proposes in one
of its own decisions (`Decision.action == action`), over varied swarms (owners,
failover and its trims, preemption and restore, rebalancing, health), so plan()'s
fallback decision for an unexplained write never has to fire. And each rule's memory
update changes only the part of the memory its registry entry declares."""

from __future__ import annotations

from dataclasses import fields, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.actions import describe
from controller.core.apply import apply_actions
from controller.core.context import PlanContext, Rule, RuleOutput, RuleSpec
from controller.core.labels import steering_constraint
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, NodeState
from controller.core.plan import Plan, plan
from controller.core.rules import RULES
from controller.policy import Policy

from . import test_health_properties as health
from . import test_owners_properties as owners
from . import test_plan_properties as generic
from . import test_preemption_properties as preemption
from . import test_rebalance_properties as rebalance
from .builders import MANAGED, node, running, service, snapshot


def _checked(spec: RuleSpec, missing: list[str]) -> Rule:
    def check(ctx: PlanContext) -> RuleOutput:
        output = spec.plan(ctx)
        named = [d.action for d in output.decisions if d.rule == spec.name]
        missing.extend(
            f"{spec.name}: decided {d.outcome} {d.code or ''}, not in its spec"
            for d in output.decisions
            if d.rule == spec.name
            and (
                d.outcome not in spec.outcomes or (d.code is not None and d.code not in spec.codes)
            )
        )
        missing.extend(f"{spec.name}: {describe(a)}" for a in output.actions if a not in named)
        if output.remember is None:
            return output
        remember = output.remember

        def kept_to_its_slice(memory: Memory) -> Memory:
            after = remember(memory)
            changed = {
                f.name
                for f in fields(Memory)
                if f.name != "slices" and getattr(after, f.name) != getattr(memory, f.name)
            }
            missing.extend(
                f"{spec.name}: changed memory.{field}, not in its fields {spec.memory}"
                for field in sorted(changed - set(spec.memory))
            )
            # Of the rules' own memories, only its own.
            missing.extend(
                f"{spec.name}: changed the memory of {kind.rule}"
                for kind in {*after.slices, *memory.slices}
                if kind is not spec.own_memory and after.slice(kind) != memory.slice(kind)
            )
            return after

        return replace(output, remember=kept_to_its_slice)

    return check


def _adopted(snap: ClusterSnapshot, adopt: bool) -> ClusterSnapshot:
    """The swarm with every service carrying its steering constraint, when `adopt`: the
    adoption write then leaves the later rules free to write the service this cycle."""
    if not adopt:
        return snap
    services = tuple(
        s
        if steering_constraint(s.name) in s.constraints
        else replace(s, constraints=(*s.constraints, steering_constraint(s.name)))
        for s in snap.services
    )
    return replace(snap, services=services)


def _assert_explained(snap: ClusterSnapshot, *, memory: Memory, policy: Policy, now: float) -> Plan:
    missing: list[str] = []
    rules = tuple(replace(spec, plan=_checked(spec, missing)) for spec in RULES)
    result = plan(snapshot=snap, policy=policy, memory=memory, now=now, rules=rules)
    assert not missing, f"writes with no decision of their rule: {missing}"
    assert not [d for d in result.decisions if d.outcome == "write"], "a fallback fired"
    return result


@settings(max_examples=100, deadline=None)
@given(generic.swarms(), st.booleans())
def test_generic_swarms(snap: ClusterSnapshot, adopt: bool) -> None:
    snap = _adopted(snap, adopt)
    _assert_explained(snap, memory=Memory(), policy=Policy.default(), now=1000.0)


@settings(max_examples=100, deadline=None)
@given(owners.swarms(), st.booleans())
def test_owners_swarms(snap: ClusterSnapshot, adopt: bool) -> None:
    snap = _adopted(snap, adopt)
    _assert_explained(snap, memory=owners.STABLE, policy=Policy.default(), now=owners.NOW)


@settings(max_examples=100, deadline=None)
@given(st.one_of(preemption.short_swarms(), preemption.full_swarms()), st.booleans())
def test_swarms_short_of_room(snap: ClusterSnapshot, adopt: bool) -> None:
    snap = _adopted(snap, adopt)
    _assert_explained(snap, memory=Memory(), policy=Policy.default(), now=1000.0)


@settings(max_examples=100, deadline=None)
@given(rebalance.swarms(usage=True), rebalance.policies(), st.booleans())
def test_rebalancing_swarms(snap: ClusterSnapshot, pol: Policy, adopt: bool) -> None:
    snap = _adopted(snap, adopt)
    _assert_explained(snap, memory=rebalance.settled(snap), policy=pol, now=rebalance.NOW)


@settings(max_examples=100, deadline=None)
@given(health.troubled_swarms())
def test_troubled_swarms(snap: ClusterSnapshot) -> None:
    _assert_explained(snap, memory=health._memory(snap), policy=health.POLICY, now=health.NOW)


@st.composite
def failing_swarms(draw: st.DrawFn) -> tuple[ClusterSnapshot, ClusterSnapshot]:
    """A swarm at rest, then the same with some nodes down: failover surges, holds (priority
    none) and, once the surged tasks run, trims."""
    count = draw(st.integers(2, 5))
    nodes = [node(n, manager=n == 1) for n in range(1, count + 1)]
    services, tasks = [], []
    for name in draw(st.lists(st.sampled_from(["web", "db", "api"]), min_size=1, unique=True)):
        labels = {**MANAGED, "placement.priority": draw(st.sampled_from(["none", "high", "low"]))}
        svc = service(name, replicas=draw(st.integers(1, 4)), labels=labels)
        services.append(svc)
        tasks += [
            running(svc, draw(st.integers(1, count)), slot)
            for slot in range(1, (svc.replicas or 0) + 1)
        ]
    calm = snapshot(nodes, services, tasks)
    down = set(draw(st.sets(st.integers(2, count), min_size=1)))
    failed = replace(
        calm,
        nodes=tuple(
            replace(n, state=NodeState.DOWN) if int(n.id[1:]) in down else n for n in nodes
        ),
    )
    return calm, failed


@settings(max_examples=100, deadline=None)
@given(failing_swarms(), st.booleans(), st.booleans())
def test_failing_swarms(
    swarms: tuple[ClusterSnapshot, ClusterSnapshot], replaced: bool, adopt: bool
) -> None:
    calm, failed = (_adopted(s, adopt) for s in swarms)
    memory = _assert_explained(calm, memory=Memory(), policy=Policy.default(), now=100.0).memory
    surged = _assert_explained(failed, memory=memory, policy=Policy.default(), now=110.0)
    after = apply_actions(failed, surged.actions)
    if replaced:  # the surged tasks run on nodes that are up: surges get trimmed
        up = [int(n.id[1:]) for n in after.nodes if n.is_ready]
        extra = [
            running(s, up[i % len(up)], 100 + i)
            for s in after.services
            for i in range(s.replicas or 0)
        ]
        after = replace(after, tasks=(*after.tasks, *extra))
    _assert_explained(after, memory=surged.memory, policy=Policy.default(), now=200.0)
