"""The rule registry: one module per rule, run in this order every cycle.

Earlier rules win a contested object for this cycle; the loser is retried on the next
cycle, which the winner's write triggers at once.
"""

from __future__ import annotations

from controller.core.context import Rule
from controller.core.rules.adoption import adopt_services
from controller.core.rules.failover import plan_failover
from controller.core.rules.node_labels import plan_node_labels
from controller.core.rules.owners import plan_owners

RULES: tuple[tuple[str, Rule], ...] = (
    ("failover", plan_failover),
    ("adoption", adopt_services),
    ("node-labels", plan_node_labels),
    ("owners", plan_owners),
)
