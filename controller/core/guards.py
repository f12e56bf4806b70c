"""Guards: the invariants no rule may break, and the disruption budgets.

They run after every rule, so a rule bug can at worst propose something a guard drops
(with a decision saying so), never write it.
"""

from __future__ import annotations

from collections import Counter

from controller.core.actions import (
    Action,
    SetNodeAvailability,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
    SetServiceLabels,
    describe,
)
from controller.core.context import PlanContext
from controller.core.decisions import Decision
from controller.core.model import Availability, NodeRole
from controller.core.release import release_refusal
from controller.policy import Budgets


def disrupted_nodes(action: Action) -> tuple[str, ...]:
    """Nodes on which the action stops tasks; empty for non-disruptive writes."""
    match action:
        case SetServiceConstraints(evicts_from=nodes) | SetReplicas(evicts_from=nodes):
            return nodes
        case SetNodeLabels(node_id=node, evicts=services) if services:
            return (node,)
        case SetNodeAvailability(node_id=node, availability=Availability.DRAIN):
            return (node,)
        case SetNodeAvailability(node_id=node, evicts=services) if services:
            return (node,)
    return ()


def _service_of(action: Action) -> str | None:
    if isinstance(action, SetServiceConstraints | SetReplicas | SetServiceLabels):
        return action.service_id
    return None


def _drains_last_manager(
    ctx: PlanContext, action: SetNodeAvailability, taken_out: set[str]
) -> bool:
    """True if, with the nodes this plan already takes out, no manager stays active."""
    if action.availability is Availability.ACTIVE:
        return False
    node = ctx.snapshot.node_by_id.get(action.node_id)
    if node is None or node.role is not NodeRole.MANAGER:
        return False
    others = [
        n
        for n in ctx.snapshot.nodes
        if n.role is NodeRole.MANAGER
        and n.id != node.id
        and n.id not in taken_out
        and n.accepts_tasks
    ]
    return not others


class _Spent:
    """Disruptive actions kept so far, counted per cycle, per node and per service."""

    def __init__(self, budgets: Budgets) -> None:
        self._budgets = budgets
        self._spent: Counter[tuple[str, str]] = Counter()

    def _scopes(
        self, nodes: tuple[str, ...], services: tuple[str, ...]
    ) -> tuple[tuple[str, tuple[str, ...], int], ...]:
        b = self._budgets
        return (
            ("cycle", ("",), b.actions_per_cycle),
            ("node", nodes, b.actions_per_node),
            ("service", services, b.actions_per_service),
        )

    def refusal(self, nodes: tuple[str, ...], services: tuple[str, ...]) -> str | None:
        """The budget one more such action would exceed, if any."""
        for scope, keys, limit in self._scopes(nodes, services):
            if any(self._spent[scope, key] >= limit for key in keys):
                return f"budget: {limit} disruptive actions per {scope}"
        return None

    def spend(self, nodes: tuple[str, ...], services: tuple[str, ...]) -> None:
        for scope, keys, _ in self._scopes(nodes, services):
            self._spent.update((scope, key) for key in keys)


def apply_guards(
    ctx: PlanContext, actions: tuple[Action, ...]
) -> tuple[tuple[Action, ...], list[Decision]]:
    spent = _Spent(ctx.policy.controller.budgets)
    kept: list[Action] = []
    decisions: list[Decision] = []
    taken_out: set[str] = set()  # nodes this plan pauses or drains

    def drop(action: Action, outcome: str, reason: str) -> None:
        decisions.append(
            Decision(
                rule="guard",
                subject=describe(action).split(":")[0],
                outcome=outcome,
                reason=reason,
                action=describe(action),
            )
        )

    for action in actions:
        service_id = _service_of(action)
        if service_id is not None and not ctx.is_managed(service_id):
            # Only a release (core/release) may write it, and only to take back ours.
            refusal = release_refusal(ctx.snapshot.service_by_id.get(service_id), action)
            if refusal is not None:
                drop(action, "refuse", refusal)
                continue
            drop(action, "allow", "not managed: this write only takes back the controller's")
        if isinstance(action, SetNodeAvailability) and _drains_last_manager(ctx, action, taken_out):
            drop(action, "refuse", "it would leave no active manager")
            continue
        nodes = disrupted_nodes(action)
        if nodes:
            services = (
                action.evicts
                if isinstance(action, SetNodeLabels | SetNodeAvailability)
                else (service_id or "",)
            )
            over = spent.refusal(nodes, services)
            if over is not None:
                drop(action, "defer", over)
                continue
            spent.spend(nodes, services)
        if (
            isinstance(action, SetNodeAvailability)
            and action.availability is not Availability.ACTIVE
        ):
            taken_out.add(action.node_id)
        kept.append(action)
    return tuple(kept), decisions
