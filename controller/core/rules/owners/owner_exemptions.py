"""The owners rule's exceptions to the rollout rule of the guards (core/guards), and the
part of a refused steering write that may still go.

No write goes to a service Swarm is rolling an update for, but while Swarm actively
rolls one, two constraint writes of the owners rule that stop no task may: one that lets
Swarm place a task it could not (else the controller's own constraints could hold the
rollout up for good, which Swarm alone would not), and one that calls off the
controller's own move whose every node went down (core/rules/owners/stalled_moves).
"""

from __future__ import annotations

from controller.core.actions import Action, SetServiceConstraints
from controller.core.constraints import ConstraintError, node_filter, parse_constraint
from controller.core.context import PlanContext, RolloutExemption, Salvaged
from controller.core.kernel.ledger import disruption
from controller.core.model import Service
from controller.core.rules.owners.stalled_moves import stalled_on
from controller.core.rules.owners.widen_only import widening_part


def unblocks_rollout(ctx: PlanContext, service: Service, action: Action) -> bool:
    """While Swarm actively rolls an update and a task of it waits for a node Swarm
    cannot find, a constraint write that stops no task (widening placement)."""
    return (
        isinstance(action, SetServiceConstraints)
        and service.updating
        and disruption(action, ctx.snapshot) is None
        and any(t.is_pending and t.error for t in ctx.snapshot.tasks_of(service.id))
    )


def calls_off_stalled_move(ctx: PlanContext, service: Service, action: Action) -> bool:
    """The controller's own move, stalled because every node it allows went down,
    rewritten by a constraint write that stops no task and allows none of those nodes.
    Without it the move would finish onto one the moment it returns, however often it has
    just failed."""
    if not isinstance(action, SetServiceConstraints) or disruption(action, ctx.snapshot):
        return False
    stalled = stalled_on(ctx.snapshot, service)
    if not stalled:
        return False
    try:
        allows = node_filter(parse_constraint(c) for c in action.constraints)
    except ConstraintError:
        return False
    nodes = ctx.snapshot.node_by_id
    return not any(allows(nodes[n]) for n in stalled)


def _unblocks(ctx: PlanContext, service: Service, action: Action) -> str | None:
    if unblocks_rollout(ctx, service, action):
        return "it stops nothing and lets Swarm place a task it could not"
    return None


def _calls_off(ctx: PlanContext, service: Service, action: Action) -> str | None:
    if calls_off_stalled_move(ctx, service, action):
        return (
            "it stops nothing and calls off the controller's own move, every node of which "
            "went down before it finished"
        )
    return None


OWNER_EXEMPTIONS: tuple[RolloutExemption, ...] = (_unblocks, _calls_off)


def salvage_widening(ctx: PlanContext, action: Action) -> Salvaged | None:
    """Of a steering write the guards refuse, the exclusions it drops (core/rules/owners/
    widen_only): dropping a constraint only widens placement and stops no task."""
    widened = widening_part(ctx, action)
    if widened is None:
        return None
    return Salvaged(
        widened,
        part="only the exclusions it drops are written",
        why=(
            "it only drops exclusions of the controller's: placement widens, no task "
            "stops, and Swarm may place what they held pending"
        ),
    )
