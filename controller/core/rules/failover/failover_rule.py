"""Failover: beat Swarm's restart delay, and hold services that must not fail over.

When a node goes down Swarm replaces its tasks only after the restart policy's delay
(5 s by default). Raising the replica count instead places new tasks at once. As soon
as they run, the count goes back: Swarm's scale-down removes slots whose task is not
running first (swarmkit orders running slots first and numbers each node's copies in
that order), and the delayed replacements are not running: they are assigned a node at
once but wait there, prepared, for the delay. So exactly they are dropped and no running
task is touched. Trimmed before the surged tasks run, the two kinds would tie, and Swarm
might drop a surged task rather than a delayed one. Both writes carry the
replica record, so a crash between them is finished by the next controller.

A service with priority `none` (0) is not failed over: its lost replicas are scaled
away and recorded, until an operator runs `swarm-placement start SERVICE`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controller.core.actions import Action
from controller.core.capacity import running_count
from controller.core.clock import utc_time
from controller.core.constraints import ConstraintError, node_filter, parse_constraint
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Decision, Outcome
from controller.core.health.suspicion import SWARM_UNDECIDED
from controller.core.kernel.ledger import scale_down_stops
from controller.core.labels import without_exclusions
from controller.core.model import Availability, Service, ServiceMode
from controller.core.replicas import (
    Operation,
    ReplicaRecord,
    change_replicas,
    forget_replica_record,
    operator_changed,
    restore_replicas,
)
from controller.core.rules.failover.name import FAILOVER as RULE
from controller.policy import PRIORITY_NONE

# A rebalance is trimmed once every surged task runs, or after this long with at least
# the base count running (a surged task that cannot start must not hold the count up).
# A surge's trim after this long drops only tasks that do not run: the age is counted
# from the first surge for the loss (after a Raft election or a long restart delay it
# is past at once), and Swarm's delayed replacements may still wait out their delay.
TRIM_AFTER_SECONDS = 30.0


def active_count(ctx: PlanContext, service: Service) -> int:
    return sum(ctx.memory.placement.get(service.id, {}).values())


def free_nodes(ctx: PlanContext, service: Service) -> tuple[int, int, int]:
    """Where surged tasks could go: (nodes the constraints allow at all, of those the ones
    holding none of the service's tasks, and how many such free nodes there would be
    without the controller's own exclusions). Only ready, active nodes count."""
    excluded = service.excluded
    theirs_texts = without_exclusions(service.constraints, excluded)
    try:
        everything = node_filter(parse_constraint(c) for c in service.constraints)
        theirs = node_filter(parse_constraint(c) for c in theirs_texts)
    except ConstraintError:
        return 0, 0, 0
    occupied = set(ctx.memory.placement.get(service.id, {}))
    usable = [n for n in ctx.snapshot.nodes if n.accepts_tasks]
    free = [n for n in usable if n.id not in occupied]
    return (
        sum(1 for n in usable if everything(n)),
        sum(1 for n in free if everything(n)),
        sum(1 for n in free if theirs(n)),
    )


def plan_failover(ctx: PlanContext) -> RuleOutput:
    actions: list[Action] = []
    decisions: list[Decision] = []
    withdrawn: dict[str, tuple[Mapping[str, int], float] | None] = {}
    for service in ctx.managed_services():
        if service.mode is not ServiceMode.REPLICATED:
            continue
        action, note = _plan_service(ctx, service)
        if note is not None:
            decisions.append(note if action is None else _with_action(note, action))
            if note.outcome == Outcome.WITHDRAW:
                withdrawn[service.id] = None
        if action is not None:
            actions.append(action)
    # A move whose surge never ran is not taken up again at once: its cooldown holds.
    forget = (lambda memory: memory.with_placing(withdrawn)) if withdrawn else None
    return RuleOutput(tuple(actions), tuple(decisions), remember=forget)


def _with_action(note: Decision, action: Action) -> Decision:
    return replace(note, action=action)


def _surge_blocked(ctx: PlanContext, service: Service, missing: int) -> Decision | None:
    """Why a surge for `missing` lost replicas cannot go now, if it cannot: no node the
    constraints allow, or fewer free ones than the controller's own exclusions leave."""
    subject = f"service {service.name}"
    allowed, free, could_be = free_nodes(ctx, service)
    if not allowed and _may_take(ctx, service):
        return Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"{missing} replica(s) lost with a node, and no node the constraints allow has "
            "reported to a new Raft leader yet: the surge waits until one does",
        )
    if not allowed:
        return Decision(
            RULE,
            subject,
            Outcome.PENDING,
            f"{missing} replica(s) lost with a node, and no node may take them "
            "(constraints and possible owners): they stay pending",
        )
    if free < missing and could_be > free:
        return Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"{missing} replica(s) lost with a node, but the constraints allow only {free} "
            "free node(s): the placement is widened first, the surge follows",
        )
    return None


def _plan_service(ctx: PlanContext, service: Service) -> tuple[Action | None, Decision | None]:
    """A replica record is followed first; only a service without one is failed over."""
    subject = f"service {service.name}"
    if service.replica_record_error is not None:
        return None, Decision(
            RULE,
            subject,
            Outcome.SKIP,
            f"{service.replica_record_error}; fix or remove the label by hand",
        )
    record = service.replica_record
    if record is not None and operator_changed(service, record, ctx.memory.overridden):
        return forget_replica_record(service), Decision(
            RULE,
            subject,
            Outcome.FORGET,
            f"scaled to {service.replicas} by an operator while the controller had "
            f"{record.written} ({record.operation}): the operator's count stands",
        )
    if record is not None and record.operation in {Operation.SURGE, Operation.REBALANCE}:
        return _trim(ctx, service, record)
    if record is not None:
        return None, None  # held or preempted: other rules and commands own it
    return _plan_loss(ctx, service)


def _plan_loss(ctx: PlanContext, service: Service) -> tuple[Action | None, Decision | None]:
    """Replicas lost with a node and not yet replaced: held away for a service that must
    not fail over, else surged at once where a free node may take them."""
    subject = f"service {service.name}"
    lost = ctx.memory.lost.get(service.id)
    if lost is None:
        return None, None
    count, since = lost
    replicas = service.replicas or 0
    missing = min(count, replicas - active_count(ctx, service))
    if missing <= 0:
        return None, None
    if ctx.settings(service.id).priority == PRIORITY_NONE:
        action = change_replicas(
            service,
            replicas=replicas - missing,
            operation=Operation.HOLD,
            now=ctx.now,
            detail=f"{missing} replica(s) lost with a node",
            evicts_from=scale_down_stops(ctx.snapshot, service, replicas - missing)[0],
        )
        return action, Decision(
            RULE,
            subject,
            Outcome.HOLD,
            f"priority none: the {missing} replica(s) lost with a node are not failed over; "
            f"`swarm-placement start {service.name}` brings them back",
        )
    if (blocked := _surge_blocked(ctx, service, missing)) is not None:
        return None, blocked
    action = change_replicas(
        service,
        replicas=replicas + missing,
        operation=Operation.SURGE,
        now=ctx.now,
        detail=f"{missing} replica(s) lost with a node at {utc_time(since)}",
    )
    return action, Decision(
        RULE,
        subject,
        Outcome.SURGE,
        f"{missing} replica(s) lost with a node: start them now rather than after "
        "Swarm's restart delay, and trim before its delayed replacements start",
    )


def _unplaced_first(
    ctx: PlanContext, service: Service, record: ReplicaRecord
) -> tuple[Action, Decision] | None:
    """Where the whole trim's pick cannot be predicted but dropping just the slots Swarm
    has not placed can (it sorts them before every running task), that part first: a
    slot that can never be placed (max replicas per node, no room) would otherwise hold
    the trim for ever. The record stays, with its age, for the rest of the trim."""
    keep = next(
        (
            k
            for k in range(record.base + 1, record.written)
            if scale_down_stops(ctx.snapshot, service, k) == ((), 0)
        ),
        None,
    )
    if keep is None:
        return None
    action = change_replicas(
        service, replicas=keep, operation=record.operation, now=record.since, detail=record.detail
    )
    return action, Decision(
        RULE,
        f"service {service.name}",
        Outcome.TRIM,
        f"surge: {record.written - keep} of its slot(s) have no node: they go first, "
        f"back to {keep}, which stops no task; the trim to {record.base} follows once "
        "Swarm's pick of a running task is known",
        action=action,
    )


def _trim(
    ctx: PlanContext, service: Service, record: ReplicaRecord
) -> tuple[Action | None, Decision | None]:
    subject = f"service {service.name}"
    base, written = record.base, record.written
    running = running_count(ctx.snapshot, service)
    aged = ctx.now - record.since >= TRIM_AFTER_SECONDS
    # Swarm's scale-down drops each node's second copy before any first one, its delayed
    # replacements (assigned a node, not running) included: a trim may stop a running
    # original. Where it may, the trim names the node and is charged to the ledger.
    evicts, stops = scale_down_stops(ctx.snapshot, service, base)
    trim = restore_replicas(
        service, record, evicts_from=evicts, ends_surge=record.operation == Operation.SURGE
    )
    if record.operation == Operation.SURGE:
        if not _may_take(ctx, service):
            return trim, Decision(
                RULE,
                subject,
                Outcome.PENDING,
                "no node may take its replicas any more (constraints and possible owners): "
                "the surge is withdrawn and the replicas stay pending",
            )
        # Trim while the delayed replacements still wait (not running, so they go first);
        # give up after a while. Where Swarm would drop a running task instead (a node's
        # second copy goes before a delayed replacement alone on its node), wait until
        # every task runs, however old the surge: the trim then stops only spare ones,
        # never going below base. Trimmed sooner, the task it stops is a running one
        # and its place is kept for one that has yet to start.
        if stops > max(0, running - base):
            return _surge_waits_to_run(ctx, service, record, running, evicts)
        done = running >= base or aged
    elif record.vacate:
        # A stop-first move: the owners rule stops the tasks on the nodes it leaves once
        # the surged tasks run; trimmed before that, Swarm might keep the old task. Once
        # they are gone the trim goes at once: the replacements Swarm starts for them are
        # unassigned or second copies on the targets, so exactly they are dropped.
        vacating = _still_on(ctx, service, record.vacate)
        if vacating:
            return _while_vacating(
                subject, record, trim, running=running, aged=aged, vacating=vacating
            )
        done = running >= base or aged
    else:
        done = running >= written or (running >= base and aged)
    if done:
        return _trim_now(ctx, service, record, trim, running=running, evicts=evicts, stops=stops)
    return None, Decision(
        RULE, subject, Outcome.WAIT, f"{record.operation}: {running} of {written} running"
    )


def _surge_waits_to_run(
    ctx: PlanContext, service: Service, record: ReplicaRecord, running: int, evicts: tuple[str, ...]
) -> tuple[Action | None, Decision]:
    """A surge's trim that would stop a running task: only its unplaced slots go now."""
    subject = f"service {service.name}"
    base, written = record.base, record.written
    if (first := _unplaced_first(ctx, service, record)) is not None:
        return first
    where = f"on {_hostnames(ctx, evicts)}" if evicts else "where its tie-break picks"
    return None, Decision(
        RULE,
        subject,
        Outcome.WAIT,
        f"surge: {running} of {written} running; back to {base} now Swarm would stop "
        f"a running task {where} (a node's second copy goes "
        "before a delayed replacement alone on its node), so the trim waits until "
        "every task runs",
    )


def _while_vacating(
    subject: str, record: ReplicaRecord, trim: Action, *, running: int, aged: bool, vacating: str
) -> tuple[Action | None, Decision]:
    """A move's tasks still run on the nodes it leaves (`vacating`): wait for the owners
    rule to stop them, or, once the surge is old, withdraw it and leave them be."""
    base, written = record.base, record.written
    if not aged:
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"{record.operation}: {running} of {written} running, then the task(s) on "
            f"{vacating} stop",
        )
    return trim, Decision(
        RULE,
        subject,
        Outcome.WITHDRAW,
        f"the surged task(s) did not all run within {TRIM_AFTER_SECONDS:.0f} s: back "
        f"to {base}, the task(s) on {vacating} stay; Swarm drops tasks that do not "
        "run first",
    )


def _trim_now(
    ctx: PlanContext,
    service: Service,
    record: ReplicaRecord,
    trim: Action,
    *,
    running: int,
    evicts: tuple[str, ...],
    stops: int,
) -> tuple[Action | None, Decision]:
    """The trim is due: it goes, unless the running tasks it would stop are more than
    max-unavailable allows now."""
    subject = f"service {service.name}"
    base = record.base
    if stops and ctx.budget().refusal(trim) is not None:
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"{running} running for {base} wanted, but back to {base} Swarm would stop "
            f"{stops} running task(s) on {_hostnames(ctx, evicts)} (a node's second copy "
            "goes before any first one), more than max-unavailable allows now: the trim "
            "waits until the tasks it drops are spare",
        )
    where = f"; it may stop a running task on {_hostnames(ctx, evicts)}" if stops else ""
    return trim, Decision(
        RULE,
        subject,
        Outcome.TRIM,
        f"{running} running for {base} wanted: back to {base}; Swarm drops unassigned "
        "slots first, then tasks on the busiest nodes" + where,
    )


def _may_take(ctx: PlanContext, service: Service) -> bool:
    """Whether some active node Swarm has not given up allows the service's tasks: ready,
    or `unknown` to a new Raft leader until it reports (after an election every node
    is, alive or not; the speculative rule counts such nodes too)."""
    try:
        allowed = node_filter(parse_constraint(c) for c in service.constraints)
    except ConstraintError:
        return False
    return any(
        n.state in SWARM_UNDECIDED and n.availability is Availability.ACTIVE and allowed(n)
        for n in ctx.snapshot.nodes
    )


def _hostnames(ctx: PlanContext, nodes: tuple[str, ...]) -> str:
    by_id = ctx.snapshot.node_by_id
    return ", ".join(by_id[n].hostname if n in by_id else n for n in nodes)


def _still_on(ctx: PlanContext, service: Service, nodes: tuple[str, ...]) -> str:
    """The hostnames among `nodes` that still hold an active task of the service."""
    held = active_nodes(ctx, service)
    by_id = ctx.snapshot.node_by_id
    return ", ".join(by_id[n].hostname for n in nodes if n in held and n in by_id)


def active_nodes(ctx: PlanContext, service: Service) -> frozenset[str]:
    return frozenset(n for n, c in ctx.memory.placement.get(service.id, {}).items() if c)
