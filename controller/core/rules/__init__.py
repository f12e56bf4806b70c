"""The rule registry: one module per rule, run in this order every cycle.

Earlier rules win a contested object for this cycle; the loser is retried on the next
cycle, which the winner's write triggers at once.
"""

from __future__ import annotations

from controller.core.context import Rule
from controller.core.rules.adoption import adopt_services
from controller.core.rules.failover import plan_failover, plan_speculative
from controller.core.rules.nodes import plan_nodes
from controller.core.rules.owners import plan_owners
from controller.core.rules.preemption import plan_preemption, plan_restores
from controller.core.rules.rebalance import plan_rebalance
from controller.core.rules.records import plan_records
from controller.core.rules.release import plan_release
from controller.core.rules.tidy import plan_tidy

RULES: tuple[tuple[str, Rule], ...] = (
    # Every node write first (marks, health, quarantine, deny labels): an eviction lands
    # before the failover surge that replaces the evicted tasks at once.
    ("nodes", plan_nodes),
    # Services no longer managed, which no other rule writes. The node marks their
    # constraints need stay (the nodes rule keeps a mark a constraint requires), so this
    # runs after nodes: the constraint goes in this cycle, the mark in a later one.
    ("release", plan_release),
    ("failover", plan_failover),
    # Right after failover, which leaves a `speculate` record alone and so never surges
    # twice for one loss; a confirmed loss's own surge still comes first for the room.
    ("speculative", plan_speculative),
    # Before every rule that reads a service's record: one a deploy replaced comes back
    # from the mirror first (a failover surge still beats it for the one write).
    ("records", plan_records),
    # After failover, whose surge, trim or forget must land before a record is reused;
    # before steering, so room for a pending higher-priority service beats a move.
    ("preemption", plan_preemption),
    ("restore", plan_restores),
    ("adoption", adopt_services),
    ("owners", plan_owners),
    ("rebalance", plan_rebalance),
    # Last: any other write to a service runs Swarm's updater too, which tidies it.
    ("tidy", plan_tidy),
)
