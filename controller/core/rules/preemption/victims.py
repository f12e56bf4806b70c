"""Who may give up tasks for a pending service, and how few tasks of theirs make room.

The victims are the managed, preemptible services far enough below the pending one in
priority that nothing else is changing this cycle; the search stops their tasks one at a
time, lowest priority first, counting only the room that frees whichever of its tied
choices Swarm's scale-down makes, then spares higher-priority victims again where the
room still suffices.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.actions import target_of
from controller.core.capacity import Room, scale_down, worst_case
from controller.core.context import PlanContext
from controller.core.kernel.ledger import scale_down_stops
from controller.core.kernel.local_data import local_data
from controller.core.model import Service, ServiceMode
from controller.core.replicas import Operation, operator_changed


def victims_for(ctx: PlanContext, pending: Service) -> tuple[list[Service], list[str]]:
    """Services that may be preempted for `pending`, lowest priority first, and notes on
    those left out for now."""
    ceiling = ctx.settings(pending.id).priority - ctx.policy.controller.preemption_gap
    victims: list[Service] = []
    skipped: list[str] = []
    # A service an earlier rule writes this cycle cannot take a scale-down too, and the
    # scale-downs of one preemption go out together or not at all.
    written = {target_of(a) for a in ctx.planned}
    for service in ctx.managed_services():
        settings = ctx.settings(service.id)
        if (
            service.id == pending.id
            or service.mode is not ServiceMode.REPLICATED
            or not settings.preemptible
            or settings.priority > ceiling
            or not service.replicas
        ):
            continue
        why = _not_now(service, settings.max_unavailable, ctx.memory.overridden)
        if why is None and local_data(service, settings):
            # Scaled down, its task's data stays on the node; scaled back, Swarm may
            # start the task anywhere, empty.
            why = f"its data is local to its node ({', '.join(local_data(service, settings))})"
        if ("service", service.id) in written:
            why = "already changed this cycle"
        if why is not None:
            skipped.append(f"{service.name} ({why})")
            continue
        victims.append(service)
    victims.sort(key=lambda s: (ctx.settings(s.id).priority, s.name))
    return victims, skipped


def _not_now(service: Service, max_unavailable: int, overridden: Mapping[str, float]) -> str | None:
    if max_unavailable <= 0:
        return "max-unavailable 0: the controller never stops its tasks"
    if service.in_rollout:
        # A scale-down is a spec write: it would resume a paused rollout.
        return f"Swarm is rolling an update ({service.update_state})"
    if service.replica_record_error is not None:
        return service.replica_record_error
    record = service.replica_record
    if record is None:
        return None
    if operator_changed(service, record, overridden):
        return "an operator scaled it; its record is being cleared"
    if record.operation == Operation.REBALANCE:
        return "a rebalancing move is in flight"
    if record.operation == Operation.SPECULATE:
        return "a speculative surge is in flight"
    return None


def search(
    ctx: PlanContext,
    pending: Service,
    *,
    room: Room,
    eligible: tuple[str, ...],
    victims: list[Service],
    need: int,
    already: int,
    limits: Mapping[str, int] | None = None,
) -> tuple[dict[str, int], int]:
    """The victim tasks to stop (service id -> count) and how many pending tasks then fit;
    `limits`: the most each victim may give up in this cycle (None: all of its tasks)."""

    def fits(plan: Mapping[str, int]) -> int:
        downs = [(v, scale_down(ctx.snapshot, v, plan[v.id])) for v in victims if plan.get(v.id)]
        return min(need, worst_case(room, downs, service=pending, eligible=eligible))

    best, best_plan = already, {}
    plan: dict[str, int] = {}
    for victim in victims:
        most = victim.replicas or 0
        if limits is not None:
            most = min(most, limits.get(victim.id, 0))
        for count in range(1, most + 1):
            plan[victim.id] = count
            fit = fits(plan)
            if fit > best:
                best, best_plan = fit, dict(plan)
            if fit >= need:
                break
        if best >= need:
            break
    # Reprieve: spare higher-priority victims first, as long as the room still suffices.
    for victim in reversed(victims):
        while best_plan.get(victim.id, 0) > 0:
            trial = {**best_plan, victim.id: best_plan[victim.id] - 1}
            if fits(trial) < best:
                break
            best_plan = trial
    return {k: v for k, v in best_plan.items() if v}, best


def ledger_limit(ctx: PlanContext, victim: Service) -> int:
    """The most tasks the victim may give up in this cycle: each one Swarm's scale-down
    stops while it runs is charged against its max-unavailable, like every other stop."""
    ledger = ctx.budget()
    left = ledger.stops_left(victim.id)
    replicas = victim.replicas or 0
    count = 0
    while count < replicas:
        _, stops = scale_down_stops(ctx.snapshot, victim, replicas - count - 1)
        if stops > left:
            break
        count += 1
    return count


def taken_from(ctx: PlanContext, victim: Service, count: int) -> tuple[str, ...]:
    """Nodes Swarm may stop the victim's tasks on when it scales it down by `count`: the
    nodes holding the most of its tasks (every tied candidate, as its pick is unknown)."""
    down = scale_down(ctx.snapshot, victim, count)
    return tuple(sorted({*down.certain, *(down.tied if down.picks else ())}))
