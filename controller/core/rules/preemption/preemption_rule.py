"""Preemption: a service pending for resources takes room from lower-priority services.

Trigger: a managed service has tasks Swarm left unassigned for insufficient resources
(the scheduler's reason in `Status.Err`). Victims: managed, preemptible services whose
priority is lower by at least `controller.preemption-gap`.

Lever: the victim's replica count, lowered in a raw spec write that carries the replica
record (`operation=preempt`, the operator's count as base), so the change and what it
means land together and survive a crash. Swarm chooses which tasks a scale-down stops
(see `capacity.scale_down`); a preemption is planned only if it makes room for the
pending tasks whichever of its tied choices Swarm makes. That rules out evicting from
one named node by constraint or node label: those make Swarm *replace* the victim's
tasks elsewhere, where they would take room or go pending, and the owners rule owns a
service's constraints. The price is that room needed on one node whose victims are not
Swarm's first pick costs more tasks; the search then takes more or reports it cannot
help.

A scale-down names the nodes it may stop tasks on (`evicts_from`, predicted as Swarm
picks), and each running task it stops is charged to the victim's `max-unavailable` in
the availability ledger like any other stop (core/kernel/ledger): a victim gives up at
most that many tasks per cycle, and the next cycle, which sees the count lowered, may
take more (the victim's `preemptible` is its consent to a lower count, not to more
stops at once). The scale-downs of one preemption go out together or not at all.

A service whose data is local to its node (core/kernel/local_data.py) is never a victim,
preemptible or not: a task stopped by a scale-down leaves its data behind, and the task
that replaces it later may start on another node, empty.

Victims: lowest priority first, a victim's tasks one at a time until the pending tasks
fit; then higher-priority victims are spared again where the room still suffices (as
the Kubernetes scheduler's reprieve). Nothing is touched when no victim set helps, and
a decision says why. One pending service is served per cycle: its writes trigger the
next cycle at once, which then sees the room those writes freed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.actions import Action
from controller.core.capacity import (
    Room,
    copies_fitting,
    demand,
    describe_resources,
    eligible_nodes,
    is_short_of_resources,
    observe_room,
)
from controller.core.constraints import ConstraintError
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Decision, Outcome
from controller.core.model import Resources, Service
from controller.core.replica_operations import transition
from controller.core.replicas import Operation
from controller.core.rules.preemption.name import PREEMPTION as RULE
from controller.core.rules.preemption.victims import (
    ledger_limit,
    search,
    taken_from,
    victims_for,
)


@dataclass(frozen=True, slots=True)
class _Outcome:
    actions: tuple[Action, ...] = ()
    decisions: tuple[Decision, ...] = ()


def plan_preemption(ctx: PlanContext) -> RuleOutput:
    room: Room | None = None  # observed once some service has tasks to place
    decisions: list[Decision] = []
    for service in ctx.replicated_by_priority():
        wanted = demand(ctx.snapshot, service)
        if not wanted:
            continue  # nothing pending: it neither preempts nor claims room
        if room is None:
            room = observe_room(ctx.snapshot)
        try:
            eligible = eligible_nodes(ctx.snapshot, service)
        except ConstraintError as exc:
            if ctx.is_managed(service.id) and _is_triggered(ctx, service):
                decisions.append(
                    Decision(
                        RULE, f"service {service.name}", Outcome.SKIP, f"{exc}: cannot plan room"
                    )
                )
            continue
        if ctx.is_managed(service.id) and _is_triggered(ctx, service):
            outcome = _preempt_for(ctx, service, room, eligible)
            decisions.extend(outcome.decisions)
            if outcome.actions:
                return RuleOutput(outcome.actions, tuple(decisions))
        # Its pending tasks claim free room before any lower-priority service may.
        room = room.place(service, eligible, wanted)
    return RuleOutput((), tuple(decisions))


def _is_triggered(ctx: PlanContext, service: Service) -> bool:
    if _speculating(service):
        return False  # its surge's pending tasks are a guess: they never take room by force
    return any(is_short_of_resources(t) for t in ctx.snapshot.tasks_of(service.id)) and (
        demand(ctx.snapshot, service) > 0
    )


def _speculating(service: Service) -> bool:
    if service.replica_record_error is not None:
        return False
    record = service.replica_record
    return record is not None and record.operation == Operation.SPECULATE


def _preempt_for(
    ctx: PlanContext, pending: Service, room: Room, eligible: tuple[str, ...]
) -> _Outcome:
    need = demand(ctx.snapshot, pending)
    already = room.fit_count(pending, eligible)
    found = _without_victims(ctx, pending, eligible, need=need, already=already)
    if found is not None:
        return _note(pending, *found)
    victims, skipped = victims_for(ctx, pending)
    left_out = f"; left out for now: {', '.join(skipped)}" if skipped else ""
    if not victims:
        priority = ctx.settings(pending.id).priority
        gap = ctx.policy.controller.preemption_gap
        return _note(
            pending,
            Outcome.CANNOT_HELP,
            f"{need} task(s) pending for resources, and no preemptible managed service has "
            f"a priority of at most {priority - gap} (its {priority} minus the preemption "
            f"gap {gap}){left_out}",
        )
    limits = {v.id: ledger_limit(ctx, v) for v in victims}
    plan, fit = search(
        ctx,
        pending,
        room=room,
        eligible=eligible,
        victims=victims,
        need=need,
        already=already,
        limits=limits,
    )
    if fit <= already and any(limits[v.id] < (v.replicas or 0) for v in victims):
        # The budget alone is in the way when the search without it would make room.
        _, could = search(
            ctx, pending, room=room, eligible=eligible, victims=victims, need=need, already=already
        )
        if could > already:
            return _note(
                pending,
                Outcome.WAIT,
                f"{need} task(s) pending for resources: stopping tasks of "
                f"{', '.join(v.name for v in victims)} would make room, but their "
                "max-unavailable allows no more stops now (core/kernel/ledger): retried once "
                "the tasks already stopped are settled",
            )
    if fit <= already:
        return _note(
            pending,
            Outcome.CANNOT_HELP,
            f"{need} task(s) pending for resources "
            f"({describe_resources(pending.reservations)} each), and stopping every "
            f"task of the preemptible services ({', '.join(v.name for v in victims)}) would "
            f"still leave no room on any node it may run on: nothing is preempted{left_out}",
        )
    return _write(ctx, pending, victims, plan, need=need, fit=fit)


def _note(pending: Service, outcome: Outcome, reason: str) -> _Outcome:
    return _Outcome(decisions=(Decision(RULE, f"service {pending.name}", outcome, reason),))


def _without_victims(
    ctx: PlanContext, pending: Service, eligible: tuple[str, ...], *, need: int, already: int
) -> tuple[Outcome, str] | None:
    """What is decided before looking for victims: no node to free, room already there,
    or a task larger than any node; None when preempting may help."""
    if not eligible:
        return Outcome.CANNOT_HELP, "no node it may run on accepts tasks: preempting frees none"
    if already >= need:
        return (
            Outcome.WAIT,
            f"{need} task(s) pending for resources, but the observed state has room for them "
            "(tasks are stopping, or Swarm has not retried yet): waiting for its scheduler",
        )
    nodes = ctx.snapshot.node_by_id
    if not any(copies_fitting(nodes[n].capacity, pending.reservations) for n in eligible):
        largest = max(
            (nodes[n].capacity for n in eligible), key=lambda c: _size(c, pending.reservations)
        )
        return (
            Outcome.CANNOT_HELP,
            f"a task reserves {describe_resources(pending.reservations)}, more than any node "
            "it may run on has even when "
            f"empty (largest: {describe_resources(largest, only=pending.reservations)}): "
            "nothing is preempted",
        )
    return None


def _size(capacity: Resources, need: Resources) -> tuple[int, int, int]:
    """How large a node is in the resources a task needs, for naming the largest."""
    return (
        sum(capacity.generic.get(k, 0) for k, v in need.generic.items() if v),
        capacity.nano_cpus if need.nano_cpus else 0,
        capacity.memory_bytes if need.memory_bytes else 0,
    )


def _write(
    ctx: PlanContext,
    pending: Service,
    victims: list[Service],
    plan: Mapping[str, int],
    *,
    need: int,
    fit: int,
) -> _Outcome:
    actions: list[Action] = []
    decisions: list[Decision] = []
    for victim in victims:
        count = plan.get(victim.id, 0)
        if count:
            action, decision = _scale_down(ctx, pending, victim, count)
            actions.append(action)
            decisions.append(decision)
    names = ", ".join(f"{v.name} -{plan[v.id]}" for v in victims if plan.get(v.id))
    over = _over_budget(ctx, actions)
    if over is not None:
        # Stopping only some of the victims would free room that helps no one.
        return _note(
            pending,
            Outcome.WAIT,
            f"{need} task(s) pending for resources: stopping {names} would make room, "
            f"but {over}; retried on the next cycle",
        )
    decisions.insert(
        0,
        Decision(
            RULE,
            f"service {pending.name}",
            Outcome.PREEMPT,
            f"{need} task(s) pending for resources: stopping {names} makes room for {fit} "
            "whichever tasks Swarm stops",
        ),
    )
    return _Outcome(tuple(actions), tuple(decisions))


def _scale_down(
    ctx: PlanContext, pending: Service, victim: Service, count: int
) -> tuple[Action, Decision]:
    """The victim's count lowered by `count`, recorded so that it comes back."""
    record = victim.replica_record
    # A held service stays held: only `swarm-placement start` brings it back.
    operation = (
        Operation.HOLD
        if record is not None and record.operation == Operation.HOLD
        else Operation.PREEMPT
    )
    base = record.base if record is not None else victim.replicas
    back = (
        f"`swarm-placement start {victim.name}`"
        if operation == Operation.HOLD
        else "when capacity returns"
    )
    return transition(
        victim,
        RULE,
        operation,
        replicas=(victim.replicas or 0) - count,
        now=ctx.now,
        detail=f"{count} task(s) for {pending.name}",
        evicts_from=taken_from(ctx, victim, count),
    ).decide(
        Outcome.PREEMPT,
        f"{count} task(s) stopped (priority {ctx.settings(victim.id).priority}) to make "
        f"room for {pending.name} (priority {ctx.settings(pending.id).priority}); its count "
        f"{base} is recorded on the service and comes back {back}",
    )


def _over_budget(ctx: PlanContext, actions: list[Action]) -> str | None:
    """The disruption budget the scale-downs would exceed together, if any: they go out
    all together or not at all."""
    budget = ctx.budget()
    for action in actions:
        over = budget.refusal(action)
        if over is not None:
            return over
        budget.spend(action)
    return None
