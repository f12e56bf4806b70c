"""The rule registry: the only place that knows the rules, run in this order every cycle.

Each rule is a `RuleSpec` (core/context): its name, its plan function, and what the rest
of the planner must know of it: whether its writes go out first, its own exceptions to
the guards, and the part of the memory it keeps. Earlier rules win a contested object for
this cycle; the loser is retried on the next cycle, which the winner's write triggers at
once.
"""

from __future__ import annotations

from controller.core.context import RuleSpec
from controller.core.rules.adoption import adopt_services
from controller.core.rules.failover import FAILOVER_EXEMPTIONS, plan_failover, plan_speculative
from controller.core.rules.mirror import plan_mirror
from controller.core.rules.nodes import plan_nodes
from controller.core.rules.owners import OWNER_EXEMPTIONS, plan_owners, salvage_widening
from controller.core.rules.preemption import plan_preemption, plan_restores
from controller.core.rules.rebalance import plan_rebalance
from controller.core.rules.release import plan_release, release_refusal
from controller.core.rules.tidy import plan_tidy

RULES: tuple[RuleSpec, ...] = (
    # Every node write first (marks, health, quarantine, deny labels): an eviction lands
    # before the failover surge that replaces the evicted tasks at once.
    RuleSpec("nodes", plan_nodes),
    # Services no longer managed, which no other rule writes. The node marks their
    # constraints need stay (the nodes rule keeps a mark a constraint requires), so this
    # runs after nodes: the constraint goes in this cycle, the mark in a later one.
    RuleSpec("release", plan_release, unmanaged=release_refusal),
    # Its writes go out right after the node writes, together: a surge must not wait
    # behind a slow or refused write of another rule.
    RuleSpec(
        "failover",
        plan_failover,
        writes_first=True,
        rollout_exemptions=FAILOVER_EXEMPTIONS,
        memory=("placing",),
    ),
    # Right after failover, which leaves a `speculate` replica record alone and so never surges
    # twice for one loss; a confirmed loss's own surge still comes first for the room.
    RuleSpec("speculative", plan_speculative, memory=("speculation", "lost")),
    # Before every rule that reads the controller's labels on a service: those a deploy
    # replaced come back from the mirror first (a failover surge still beats it for the
    # one write).
    RuleSpec("mirror", plan_mirror),
    # After failover, whose surge, trim or forget must land before a replica record is
    # reused; before steering, so room for a pending higher-priority service beats a move.
    RuleSpec("preemption", plan_preemption),
    RuleSpec("restore", plan_restores),
    RuleSpec("adoption", adopt_services),
    RuleSpec(
        "owners",
        plan_owners,
        rollout_exemptions=OWNER_EXEMPTIONS,
        salvage=salvage_widening,
        memory=("placing",),
    ),
    RuleSpec("rebalance", plan_rebalance, memory=("rebalance",)),
    # Last: any other write to a service runs Swarm's updater too, which tidies it.
    RuleSpec("tidy", plan_tidy),
)


def rule_named(name: str) -> RuleSpec:
    """The registered rule of that name (KeyError: none)."""
    for spec in RULES:
        if spec.name == name:
            return spec
    raise KeyError(name)


def rules_named(*names: str) -> tuple[RuleSpec, ...]:
    """The registered rules of those names, in the order given: a plan with only some."""
    return tuple(rule_named(name) for name in names)
