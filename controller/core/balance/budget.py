"""The disruption budgets as the rebalance rule spends them, so it proposes only what the
guards will let through (they still check every rule's actions together)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from controller.policy import Budgets


@dataclass
class BudgetTracker:
    budgets: Budgets
    spent: int = 0
    per_node: Counter[str] = field(default_factory=Counter)
    per_service: Counter[str] = field(default_factory=Counter)

    def refusal(self, service_id: str, nodes: Iterable[str]) -> str | None:
        """Why a disruptive action on these nodes may not go out this cycle, or None."""
        b = self.budgets
        if self.spent >= b.actions_per_cycle:
            return f"budget: {b.actions_per_cycle} disruptive actions per cycle"
        if any(self.per_node[n] >= b.actions_per_node for n in nodes):
            return f"budget: {b.actions_per_node} disruptive actions per node"
        if self.per_service[service_id] >= b.actions_per_service:
            return f"budget: {b.actions_per_service} disruptive actions per service"
        return None

    def spend(self, service_id: str, nodes: Iterable[str]) -> None:
        self.spent += 1
        self.per_node.update(set(nodes))
        self.per_service[service_id] += 1
