"""A speculative surge's record after Swarm confirms a loss: handed over to failover's
surge once Swarm gave up the speculated node's tasks, or raised for a loss Swarm
confirmed on another node while it stands (rules/failover/speculative.py)."""

from __future__ import annotations

from controller.core.actions import Action
from controller.core.context import PlanContext
from controller.core.decisions import Decision, Outcome
from controller.core.model import Service
from controller.core.replicas import Operation, ReplicaRecord, change_replicas
from controller.core.rules.failover.failover_rule import active_count
from controller.core.rules.failover.name import SPECULATIVE as RULE
from controller.core.rules.failover.speculate_room import names
from controller.core.rules.failover.speculation_notes import Notes

Planned = tuple[Action | None, Decision | None]


def handover(
    ctx: PlanContext, service: Service, record: ReplicaRecord, notes: Notes, down: list[str]
) -> Planned:
    """Swarm confirmed a speculated node down: once it gave up the service's tasks there,
    the record becomes failover's surge."""
    subject = f"service {service.name}"
    where = names(ctx, tuple(down))
    held = [t for t in ctx.snapshot.tasks_of(service.id) if t.node_id in down]
    if held:
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"{where} confirmed down; Swarm still holds {len(held)} task(s) there: the "
            "hand-over to failover waits until it gives them up",
        )
    # Failover leaves a `speculate` record alone, so what other nodes lost meanwhile
    # waited for this write: it is surged for too. The record keeps its start, so a
    # loss after it still counts; the losses it answers are settled here.
    covered = record.written - record.base
    more = 0
    lost = ctx.memory.lost.get(service.id)
    if lost is not None:
        active = active_count(ctx, service)
        more = max(0, min(lost[0] - covered, record.base - active))
        notes.settled.add(service.id)
    also = f"; {more} more replica(s) lost with another node" if more else ""
    handover = change_replicas(
        service,
        replicas=record.written + more,
        operation=Operation.SURGE,
        now=record.since,
        base=record.base,
        detail=f"speculative surge confirmed: {where} down{also}",
    )
    return handover, Decision(
        RULE,
        subject,
        Outcome.CONFIRM,
        f"{where} confirmed down: the speculative surge covers its replicas{also}; "
        "failover trims Swarm's delayed replacements as after its own surge",
    )


def lost_elsewhere(
    ctx: PlanContext, service: Service, record: ReplicaRecord, notes: Notes
) -> Planned | None:
    """Swarm confirmed a loss on another node while the record stands: failover leaves
    the record alone, so the surge for it is made here, in the same record (its start
    kept), and the loss is settled. None: no such loss to answer."""
    lost = ctx.memory.lost.get(service.id)
    if lost is None or ctx.health.panic is not None:
        return None
    active = active_count(ctx, service)
    more = max(0, min(lost[0], record.written - active))
    notes.settled.add(service.id)
    if not more:
        return None
    raised = change_replicas(
        service,
        replicas=record.written + more,
        operation=Operation.SPECULATE,
        now=record.since,
        base=record.base,
        detail=f"{record.detail}; {more} more lost with another node",
    )
    return raised, Decision(
        RULE,
        f"service {service.name}",
        Outcome.SURGE,
        f"{more} replica(s) lost with a node Swarm confirmed down while the "
        f"speculative surge stands: {record.written} -> {record.written + more}, "
        "started now as failover would",
    )
