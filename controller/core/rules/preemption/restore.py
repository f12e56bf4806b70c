"""Restore: preempted services get their tasks back as capacity returns.

Capacity returns when a node comes back, or when a higher-priority service is scaled
down or removed. Priority levels are served from the highest: at each level the tasks
still pending claim free room first, then preempted services of that level take back
what fits, so a restore never takes room a service of the same or higher priority is
waiting for. A service gets back as many tasks as fit, never more than its recorded
count; the write that reaches the recorded count removes the record with it, so the
count is applied once and the record never outlives it.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from controller.core.actions import Action
from controller.core.capacity import Room, demand, eligible_nodes, observe_room
from controller.core.constraints import ConstraintError
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Decision, Outcome
from controller.core.guards import rollout_reason
from controller.core.model import Service
from controller.core.replica_operations import End, transition
from controller.core.replicas import Operation, ReplicaRecord, operator_changed
from controller.core.rules.preemption.name import RESTORE as RULE


def _preempted(ctx: PlanContext, service: Service) -> ReplicaRecord | None:
    if service.replica_record_error is not None:
        return None  # reported by the failover rule
    record = service.replica_record
    if record is None or record.operation != Operation.PREEMPT:
        return None
    if operator_changed(service, record, ctx.memory.overridden):
        return None  # the failover rule forgets a record the operator overrode
    return record


def plan_restores(ctx: PlanContext) -> RuleOutput:
    room: Room | None = None  # observed once some service claims or takes back room
    actions: list[Action] = []
    decisions: list[Decision] = []
    updating: str | None = None  # a service at this level or above rolling an update
    for _, level in groupby(
        ctx.replicated_by_priority(), key=lambda s: ctx.settings(s.id).priority
    ):
        services = _level_services(ctx, level, decisions)
        # Pending tasks of the level claim their room before any preempted one comes back.
        for service, eligible in services:
            wanted = demand(ctx.snapshot, service)
            if wanted:
                room = (room if room is not None else observe_room(ctx.snapshot)).place(
                    service, eligible, wanted
                )
            if service.updating and updating is None:
                updating = service.name
        for service, eligible in services:
            record = _preempted(ctx, service)
            if record is None:
                continue
            held = _held_back(ctx, service, record, updating)
            if held is not None:
                decisions.append(held)
                continue
            missing = record.base - (service.replicas or 0)
            if room is None:
                room = observe_room(ctx.snapshot)
            back = min(missing, room.fit_count(service, eligible))
            action, decision = _restore(ctx, service, record, missing=missing, back=back)
            decisions.append(decision)
            if action is not None:
                actions.append(action)
                room = room.place(service, eligible, back)
    return RuleOutput(tuple(actions), tuple(decisions))


def _level_services(
    ctx: PlanContext, level: Iterable[Service], decisions: list[Decision]
) -> list[tuple[Service, tuple[str, ...]]]:
    """The services of one priority level that claim, take back or hold up room, with
    the nodes each may run on; a preempted one whose constraints fail gets a skip."""
    services: list[tuple[Service, tuple[str, ...]]] = []
    for service in level:
        if not (
            service.updating
            or demand(ctx.snapshot, service)
            or _preempted(ctx, service) is not None
        ):
            continue  # claims no room, is not restored, holds up nothing
        try:
            services.append((service, eligible_nodes(ctx.snapshot, service)))
        except ConstraintError as exc:
            if _preempted(ctx, service) is not None:
                decisions.append(
                    Decision(RULE, f"service {service.name}", Outcome.SKIP, f"{exc}: cannot plan")
                )
    return services


def _held_back(
    ctx: PlanContext, service: Service, record: ReplicaRecord, updating: str | None
) -> Decision | None:
    """Why a preempted service gets nothing back this cycle, or None when it may."""
    subject = f"service {service.name}"
    preempted = f"{record.base - (service.replicas or 0)} task(s) preempted: "
    if updating is not None:
        # Its new tasks appear one by one (some not yet visible): room that looks
        # free may be theirs.
        return Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"{preempted}{updating}, of the same or a higher priority, is rolling an update",
        )
    if service.in_rollout:
        return Decision(RULE, subject, Outcome.WAIT, preempted + rollout_reason(service))
    if not ctx.is_managed(service.id):
        return Decision(
            RULE,
            subject,
            Outcome.KEEP,
            f"preempted from {record.base} to {record.written} but no longer "
            "managed: the release rule puts the recorded count back",
        )
    return None


def _restore(
    ctx: PlanContext, service: Service, record: ReplicaRecord, *, missing: int, back: int
) -> tuple[Action | None, Decision]:
    if missing <= 0 or back >= missing:
        return transition(service, RULE, End.RESTORE).decide(
            Outcome.RESTORE,
            f"room for its {max(missing, 0)} preempted task(s): back to its recorded count "
            f"{record.base}, record removed",
        )
    if back <= 0:
        return None, Decision(
            RULE,
            f"service {service.name}",
            Outcome.WAIT,
            f"{missing} task(s) preempted (recorded count {record.base}): no room for them yet",
        )
    return transition(
        service,
        RULE,
        Operation.PREEMPT,
        replicas=(service.replicas or 0) + back,
        now=ctx.now,
        detail=record.detail,
    ).decide(
        Outcome.RESTORE,
        f"room for {back} of its {missing} preempted task(s); the rest wait, recorded count "
        f"{record.base} kept",
    )
