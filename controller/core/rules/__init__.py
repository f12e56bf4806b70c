"""The rule registry: the only place that knows the rules, run in this order every cycle.

Each rule is a `RuleSpec` (core/context) that its own package exports: its name, its plan
function, and what the rest of the planner must know of it: whether its writes go out
first, its own exceptions to the guards, and the part of the memory it keeps. Adding a
rule is its package and one line here. Earlier rules win a contested object for
this cycle; the loser is retried on the next cycle, which the winner's write triggers at
once.
"""

from __future__ import annotations

from typing import Any

from controller.core.context import RuleSpec
from controller.core.rules import (
    adoption,
    failover,
    mirror,
    nodes,
    owners,
    preemption,
    rebalance,
    release,
    tidy,
)
from controller.policy import RuleSetting

RULES: tuple[RuleSpec, ...] = (
    # Every node write first (marks, health, quarantine, deny labels): an eviction lands
    # before the failover surge that replaces the evicted tasks at once.
    nodes.SPEC,
    # Services no longer managed, which no other rule writes. The node marks their
    # constraints need stay (the nodes rule keeps a mark a constraint requires), so this
    # runs after nodes: the constraint goes in this cycle, the mark in a later one.
    release.SPEC,
    # Its writes go out right after the node writes, together (failover/__init__).
    failover.FAILOVER_SPEC,
    # Right after failover, which leaves a `speculate` replica record alone and so never surges
    # twice for one loss; a confirmed loss's own surge still comes first for the room.
    failover.SPECULATIVE_SPEC,
    # Before every rule that reads the controller's labels on a service: those a deploy
    # replaced come back from the mirror first (a failover surge still beats it for the
    # one write).
    mirror.SPEC,
    # After failover, whose surge, trim or forget must land before a replica record is
    # reused; before steering, so room for a pending higher-priority service beats a move.
    preemption.PREEMPTION_SPEC,
    preemption.RESTORE_SPEC,
    adoption.SPEC,
    owners.SPEC,
    rebalance.SPEC,
    # Last: any other write to a service runs Swarm's updater too, which tidies it.
    tidy.SPEC,
)


def declared_settings(rules: tuple[RuleSpec, ...] = RULES) -> tuple[RuleSetting[Any], ...]:
    """The per-service settings the rules declare, for the policy to read (policy/rule_settings)."""
    return tuple(setting for spec in rules for setting in spec.settings)


def rule_named(name: str) -> RuleSpec:
    """The registered rule of that name (KeyError: none)."""
    for spec in RULES:
        if spec.name == name:
            return spec
    raise KeyError(name)


def rules_named(*names: str) -> tuple[RuleSpec, ...]:
    """The registered rules of those names, in the order given: a plan with only some."""
    return tuple(rule_named(name) for name in names)
