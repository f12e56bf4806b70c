"""How the owners rule carries out a move without leaving a service worse off than Swarm.

A start-first service moves by exclusion: `node.id!=X` makes Swarm start each
replacement before it stops the task on X. A stop-first service would lose that task
before its replacement even has a node, so it moves by surge, in four writes:
1. the constraints allow the targets and still allow the sources: nothing stops;
2. the replica count rises by the tasks to move (recorded, with the sources to vacate):
   Swarm starts them on the emptiest allowed nodes, which must be the targets (predicted
   as Swarm ranks nodes, with the room each has, or the move is not made);
3. once every surged task runs, the sources are excluded: their tasks stop with the
   count still raised, so the service never runs fewer than it wants;
4. the failover rule trims the count back; Swarm drops the unassigned replacements of
   step 3 first, or else the extra copies on the nodes holding two.
Tasks over a node's share (some stay, some go) move by surge-and-trim in either order:
the surge lands on the emptiest allowed nodes, the trim takes from the busiest.
Every write that may stop a task names the nodes (`evicts_from`), so the disruption
budgets and the cooldown apply to it.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.actions import Action, SetServiceConstraints
from controller.core.constraints import ConstraintError, node_filter, parse_constraint
from controller.core.context import PlanContext
from controller.core.counts import scale_down
from controller.core.decisions import Decision, Outcome
from controller.core.kernel.ledger import scale_down_stops
from controller.core.labels import (
    EXCLUDED_LABEL,
    exclusion_constraints,
    format_exclusions,
    without_exclusions,
)
from controller.core.model import Service
from controller.core.replica_operations import End, transition
from controller.core.replicas import Operation, ReplicaRecord
from controller.core.rules.owners.escape_moves import escape_move
from controller.core.rules.owners.fits import Fits
from controller.core.rules.owners.name import RULE
from controller.core.rules.owners.owner_waits import current_counts
from controller.core.rules.owners.steer import Steering
from controller.core.rules.owners.surge_landing import (
    cover_limit,
    covering_surge,
    hostnames,
    landing_refusal,
    replacements_fit,
    surge_after,
    vacating_surge,
)


def is_stop_first(service: Service) -> bool:
    return service.update_order != "start-first"


def stop_first_move(
    ctx: PlanContext,
    service: Service,
    steering: Steering,
    *,
    current: Mapping[str, int],
    desired: Mapping[str, int],
    fits: Fits,
    leaving: frozenset[str] = frozenset(),
) -> tuple[Action | None, Decision]:
    """Steps 1 and 2 of a stop-first move off `steering.vacate`.

    `leaving`: the sources the service may not stay on (not a possible owner, say).
    When a surge of the tasks to move could land elsewhere than on the targets, these
    still leave, by the protocol of escape_moves.
    """
    subject = f"service {service.name}"
    sources = steering.vacate
    first = steering.keeping(sources)
    if service.constraints != first.constraints:
        return _allow_targets(ctx, service, first, sources)
    if service.replica_record_error is not None:
        return None, Decision(
            RULE, subject, Outcome.SKIP, f"stop-first move: {service.replica_record_error}"
        )
    record = service.replica_record
    if record is not None:
        return None, Decision(
            RULE,
            subject,
            Outcome.KEEP,
            f"stop-first: its replica count is held by the controller ({record.operation}), "
            "so no surge can move it",
        )
    k = sum(current.get(n, 0) for n in sources)
    refused = _surge_refusal(
        ctx, service, fits, current=current, desired=desired, sources=sources, k=k
    )
    why = (
        f"stop-first: start {k} task(s) on the targets first; the task(s) on "
        f"{hostnames(ctx, sources)} stop once they run"
    )
    if refused is not None and leaving:
        return escape_move(
            ctx, service, steering, current=current, leaving=leaving, fits=fits, refused=refused
        )
    if refused is not None:
        return None, Decision(
            RULE, subject, Outcome.KEEP, f"stop-first and {refused}: its tasks stay where they are"
        )
    surge, over = vacating_surge(ctx, service, k=k, vacate=sources, moved=k)
    if surge is None:
        return None, Decision(RULE, subject, Outcome.KEEP, f"its tasks where they are: {over}")
    return surge, Decision(RULE, subject, Outcome.MOVE, why, action=surge)


def _allow_targets(
    ctx: PlanContext, service: Service, first: Steering, sources: tuple[str, ...]
) -> tuple[Action, Decision]:
    """Step 1: constraints that allow the targets and still the sources."""
    # Sources the new constraints reject all the same (not a possible owner any more)
    # lose their tasks whatever the controller does: say so, and count it.
    try:
        allows = node_filter(parse_constraint(c) for c in first.constraints)
    except ConstraintError:
        allows = None
    nodes = ctx.snapshot.node_by_id
    lost = tuple(n for n in sources if allows is None or not allows(nodes[n]))
    action = SetServiceConstraints(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        constraints=first.constraints,
        evicts_from=lost,
        set_labels={EXCLUDED_LABEL: format_exclusions(first.excluded)},
    )
    why = (
        "stop-first: allow the targets and keep the tasks where they are, so the move "
        "can start its new tasks before any old one stops"
    )
    return action, Decision(RULE, f"service {service.name}", Outcome.STEER, why, action=action)


def _surge_refusal(
    ctx: PlanContext,
    service: Service,
    fits: Fits,
    *,
    current: Mapping[str, int],
    desired: Mapping[str, int],
    sources: tuple[str, ...],
    k: int,
) -> str | None:
    """Why a surge of the `k` tasks to move off `sources` could not be trusted to land on
    the targets and let Swarm's updater replace each one in turn; None when it can."""
    refused = landing_refusal(ctx, service, fits, current=current, desired=desired, k=k)
    if refused is None and not replacements_fit(
        ctx, service, fits, current=current, k=k, leave=sources
    ):
        refused = (
            f"once they run, Swarm's updater would have no room to start the replacement "
            f"it makes for each task on {hostnames(ctx, sources)} before it stops the next"
        )
    return refused


def finish_stop_first(
    ctx: PlanContext, service: Service, *, current: Mapping[str, int]
) -> tuple[Action | None, Decision] | None:
    """Step 3: once the surge runs, exclude the sources, whatever the cooldown; then wait
    for the failover rule's trim. None: no stop-first move is under way."""
    if service.replica_record_error is not None:
        return None
    record = service.replica_record
    if record is None or record.operation != Operation.REBALANCE or not record.vacate:
        return None
    if service.updating:
        return None
    subject = f"service {service.name}"
    holding = tuple(n for n in record.vacate if current.get(n))
    if not holding:
        # Until the trim, nothing else is written: a standby opened now could take the
        # replacement Swarm starts for a stopped task, and the trim would have to guess.
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            "stop-first move: its old task(s) stopped; the trim follows",
        )
    excluded = service.excluded
    if set(holding) <= excluded:
        return None, Decision(
            RULE, subject, Outcome.WAIT, f"moving tasks off {hostnames(ctx, holding)}"
        )
    live = ctx.snapshot.live_node_ids  # as the availability ledger counts what runs
    running_on = [
        t.node_id for t in ctx.snapshot.tasks_of(service.id) if t.node_id in live and t.is_running
    ]
    running = len(running_on)
    if running < record.written:
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"stop-first move: {running} of {record.written} running; the task(s) on "
            f"{hostnames(ctx, holding)} stop once all run",
        )
    staying = sum(1 for n in running_on if n not in record.vacate)
    if staying < record.base:
        # Part of the surge started on a node it leaves (Swarm broke a tie otherwise
        # than foreseen): stopping those nodes now would leave fewer than wanted.
        return _top_up(ctx, service, record, current=current, short=record.base - staying)
    return _exclude_sources(ctx, service, record, holding)


def _exclude_sources(
    ctx: PlanContext, service: Service, record: ReplicaRecord, holding: tuple[str, ...]
) -> tuple[Action | None, Decision]:
    """Step 3's write: the sources still holding tasks excluded, when the budget allows."""
    subject = f"service {service.name}"
    excluded = service.excluded
    now_excluded = excluded | set(holding)
    action = SetServiceConstraints(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        constraints=(
            *without_exclusions(service.constraints, excluded),
            *exclusion_constraints(frozenset(now_excluded)),
        ),
        evicts_from=holding,
        set_labels={EXCLUDED_LABEL: format_exclusions(now_excluded)},
    )
    if (over := ctx.budget().refusal(action)) is not None:
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"stop-first move: the task(s) on {hostnames(ctx, holding)} "
            f"stop once the budget allows ({over})",
        )
    why = (
        f"stop-first move: the surged task(s) run, so the task(s) on {hostnames(ctx, holding)} "
        f"stop now (replicas stay at {record.written} until the trim)"
    )
    return action, Decision(RULE, subject, Outcome.MOVE, why, action=action)


def _top_up(
    ctx: PlanContext,
    service: Service,
    record: ReplicaRecord,
    *,
    current: Mapping[str, int],
    short: int,
) -> tuple[Action | None, Decision]:
    """Raise a stop-first surge that landed partly on the nodes it leaves, so enough new
    tasks run elsewhere; when no larger surge fits, the surge is withdrawn (the failover
    rule's trim) and the move is tried afresh."""
    subject = f"service {service.name}"
    hosts = hostnames(ctx, record.vacate)
    limit = record.base + cover_limit(record.base, short) - record.written
    more = covering_surge(
        ctx,
        service,
        Fits.observe(ctx.snapshot),
        current=current,
        sources=record.vacate,
        need=short,
        limit=max(limit, 0),
    )
    if more is None:
        return transition(
            service,
            RULE,
            End.RESTORE,
            evicts_from=scale_down_stops(ctx.snapshot, service, record.base)[0],
        ).decide(
            Outcome.WITHDRAW,
            f"stop-first move: part of the surge started on {hosts}, which it leaves, and "
            f"no larger surge fits: back to {record.base}, and the move is tried again",
        )
    raised = transition(
        service,
        RULE,
        Operation.REBALANCE,
        replicas=record.written + more,
        now=ctx.now,
        detail=record.detail,
        evicts_from=record.vacate,
        vacate=record.vacate,
    )
    if (over := ctx.budget().refusal(raised.action)) is not None:
        return None, Decision(RULE, subject, Outcome.WAIT, f"stop-first move: {over}")
    return raised.decide(
        Outcome.MOVE,
        f"stop-first move: part of the surge started on {hosts}, which it leaves, so "
        f"{short} fewer than wanted would run once the task(s) there stop: start {more} "
        "more first",
    )


def surge_to_reduce(
    ctx: PlanContext,
    service: Service,
    reduce: tuple[str, ...],
    *,
    current: Mapping[str, int],
    desired: Mapping[str, int],
    fits: Fits,
) -> tuple[Action | None, Decision]:
    """Surge by the surplus: Swarm places the new tasks on the emptiest allowed nodes (the
    targets, checked), and the trim that follows removes tasks from the busiest ones (the
    surplus nodes, checked). Only the moved tasks restart."""
    subject = f"service {service.name}"
    surplus = sum(current[n] - desired.get(n, 0) for n in reduce)
    hosts = hostnames(ctx, reduce)
    refused = landing_refusal(ctx, service, fits, current=current, desired=desired, k=surplus)
    if refused is None:
        up = surge_after(ctx, service, fits, current=current, k=surplus)
        assert up is not None  # _landing found it
        _, sources = scale_down(up.after, surplus)
        if not sources <= set(reduce):
            refused = f"the trim could take a task off {hostnames(ctx, sources - set(reduce))}"
    if refused is not None:
        return None, Decision(
            RULE,
            subject,
            Outcome.KEEP,
            f"{surplus} task(s) over their share on {hosts} stay: {refused}",
        )
    return transition(
        service,
        RULE,
        Operation.REBALANCE,
        replicas=(service.replicas or 0) + surplus,
        now=ctx.now,
        detail=f"move {surplus} task(s) off {hosts}",
        evicts_from=reduce,
    ).decide(
        Outcome.MOVE,
        f"{surplus} task(s) over their share on {hosts}: surge onto the targets, then trim "
        "from the busiest nodes",
    )


def keep_local_data(
    ctx: PlanContext,
    service: Service,
    steering: Steering,
    notes: list[Decision],
    why: str,
) -> tuple[Action | None, list[Decision], Mapping[str, int]]:
    """Tasks with their data on nodes the service may not stay on (no possible owner,
    say) stay until they stop for another reason: the constraints keep those nodes
    allowed and leave out every other node the policy excludes, so no new task goes
    there."""
    subject = f"service {service.name}"
    nodes = ctx.snapshot.node_by_id
    hosts = ", ".join(sorted(nodes[n].hostname for n in steering.vacate))
    current = current_counts(ctx, service)
    notes = [n for n in notes if n.outcome != Outcome.MOVE]
    notes.append(
        Decision(
            RULE,
            subject,
            Outcome.KEEP,
            f"its task(s) on {hosts}, though the policy would move them: {why}; they leave "
            "when they stop for another reason (the node fails or is drained, or the "
            "operator moves them)",
        )
    )
    kept = steering.keeping(steering.vacate)
    if kept.constraints == service.constraints:
        return None, notes, current
    action = SetServiceConstraints(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        constraints=kept.constraints,
        set_labels={EXCLUDED_LABEL: format_exclusions(kept.excluded)},
    )
    notes.append(
        Decision(
            RULE,
            subject,
            Outcome.STEER,
            f"keep new tasks on the policy's nodes; the task(s) on {hosts} stay (no task moves)",
            action=action,
        )
    )
    return action, notes, current
