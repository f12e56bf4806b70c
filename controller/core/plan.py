"""plan(): the functional core. Snapshot, policy, memory and time in; a Plan out.

Node health is assessed before any rule (core/health): the rules see the cluster with a
failed node down and a node the controller holds paused as paused, so failover, owners,
preemption and rebalancing treat a health-failed node as they treat a dead one.

Rules run in registry order, each seeing what the rules before it planned (they are
charged to the availability ledger). Each write is put to the guards as it is proposed:
one they hold or refuse claims nothing, so a later rule may write that object in the
same cycle. Each object is written at most once per cycle: a later rule that wants an
object an earlier one already changed is deferred to the next cycle, which the first
write's event triggers at once. That keeps every write version-checked against what was
observed, with no merging of intents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from controller.core.actions import Action, subject_of, target_of
from controller.core.context import PlanContext, RuleSpec
from controller.core.decisions import Decision, Outcome
from controller.core.guards import Guards
from controller.core.health.assess import assess_nodes
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot
from controller.core.rules import RULES
from controller.core.service_settings import resolve_settings
from controller.policy import Policy, ResolvedService


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...]
    decisions: tuple[Decision, ...]
    memory: Memory
    resolved: Mapping[str, ResolvedService] = field(default_factory=dict)
    # The actions of rules whose writes go out first (RuleSpec.writes_first).
    early: tuple[Action, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.actions


def plan(
    *,
    snapshot: ClusterSnapshot,
    policy: Policy,
    memory: Memory,
    now: float,
    rules: tuple[RuleSpec, ...] | None = None,
) -> Plan:
    ctx, decisions = _context(snapshot=snapshot, policy=policy, memory=memory, now=now)
    memory, resolved = ctx.memory, ctx.resolved

    actions: list[Action] = []  # every write the guards let through, in rule order
    early: list[Action] = []  # those of rules whose writes go first
    proposed: list[tuple[RuleSpec, Action]] = []  # every action proposed, with its rule
    written: set[tuple[str, str]] = set()
    guards = Guards(ctx)
    for spec in rules if rules is not None else RULES:
        # The guards' ledger is charged with `actions`, each once, as it was admitted.
        output = spec.plan(replace(ctx, planned=tuple(actions), ledger=guards.ledger))
        decisions.extend(output.decisions)
        if output.remember is not None:
            memory = output.remember(memory)
        for action in output.actions:
            target = target_of(action)
            if target in written:
                decisions.append(
                    Decision(
                        rule=spec.name,
                        subject=subject_of(action),
                        outcome=Outcome.DEFER,
                        reason="already changed this cycle; retried on the next one",
                        action=action,
                    )
                )
                continue
            proposed.append((spec, action))
            # Guarded at once: a write the guards hold does not claim its object, and the
            # next rule that wants it may write it this cycle.
            admitted = guards.admit(spec, action)
            if admitted is None:
                continue
            written.add(target)
            actions.append(admitted)
            if spec.writes_first:
                early.append(admitted)

    decisions.extend(unexplained(((s.name, a) for s, a in proposed), decisions))
    decisions.extend(guards.decisions)
    return Plan(
        actions=tuple(actions),
        decisions=tuple(decisions),
        memory=memory,
        resolved=resolved,
        early=tuple(early),
    )


def _context(
    *, snapshot: ClusterSnapshot, policy: Policy, memory: Memory, now: float
) -> tuple[PlanContext, list[Decision]]:
    """What every rule sees: the settings resolved, the nodes' health assessed and
    applied to the snapshot, and the memory that observed it; with the decisions so far."""
    resolved, decisions = resolve_settings(snapshot, policy, memory.resolved)
    # Health first: every rule then sees a failed node as down and a held node as paused.
    health = assess_nodes(
        snapshot=snapshot, policy=policy, memory=memory, now=now, resolved=resolved
    )
    decisions.extend(health.decisions)
    effective = health.effective(snapshot)
    memory = memory.observe(effective, now).with_resolved(resolved).with_health(health.memory)
    ctx = PlanContext(
        snapshot=effective,
        policy=policy,
        memory=memory,
        now=now,
        resolved=resolved,
        observed=snapshot,
        health=health,
    )
    return replace(ctx, ledger=ctx.fresh_ledger()), decisions  # standings computed once


def unexplained(
    proposed: Iterable[tuple[str, Action]], decisions: Iterable[Decision]
) -> list[Decision]:
    """A decision for every write a rule gave no reason for, so no write goes unlogged:
    every write must be named by a Decision (`Decision.action == action`)."""
    # A list, not a set: actions hold dicts and do not hash.
    named = [d.action for d in decisions if d.action is not None]
    return [
        Decision(
            rule=rule,
            subject=subject_of(action),
            outcome=Outcome.WRITE,
            reason="the rule gave no reason for this write (a bug in the rule: please report it)",
            action=action,
        )
        for rule, action in proposed
        if action not in named
    ]
