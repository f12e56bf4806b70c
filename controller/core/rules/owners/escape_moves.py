"""How a stop-first service leaves nodes it may not stay on, whatever the layout.

Possible owners are hard (so are hard anti-affinity and a denied node): a task on a node
outside them leaves, even when the exact surge of owner_moves would not land on the
targets. In order, the first that can be made:

1. one surge after which enough new tasks run off every source, whichever node Swarm
   picks in a tie (owner_moves, steps 2 to 4): no task stops before the count is met;
2. such a surge for some of the nodes to leave, fewest tasks first. Its nodes are
   excluded for good once it runs, so each round leaves fewer nodes to leave, and the
   next round starts from there;
3. Swarm's own way: the nodes to leave are excluded at once, and Swarm's updater stops
   their tasks a batch (its parallelism) at a time, starting each replacement on an
   allowed node before it stops the next, as it does for an operator's constraint. Only
   within max-unavailable (the availability ledger, core/kernel/ledger: the batch, with
   what is down already), and only when the replacements have room on the nodes still
   allowed: a replacement with no node would hold the updater with a task down;
4. else nothing moves, and the decision says why.
A surge needs room for its extra tasks and, where the nodes to leave hold fewer tasks
than the targets, a size up to the operator's count; step 3 needs neither, and costs at
most what max-unavailable allows. With max-unavailable 0 only the surges remain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.core.actions import Action, SetServiceConstraints
from controller.core.context import PlanContext
from controller.core.decisions import Decision, Outcome
from controller.core.labels import EXCLUDED_LABEL, format_exclusions
from controller.core.model import Service
from controller.core.rules.owners.fits import Fits
from controller.core.rules.owners.name import RULE
from controller.core.rules.owners.steer import Steering
from controller.core.rules.owners.surge_landing import (
    cover_limit,
    covering_surge,
    hostnames,
    surge_after,
    vacating_surge,
)


def escape_move(
    ctx: PlanContext,
    service: Service,
    steering: Steering,
    *,
    current: Mapping[str, int],
    leaving: frozenset[str],
    fits: Fits,
    refused: str,
) -> tuple[Action | None, Decision]:
    """The next step off `leaving` (the sources the service may not stay on) when a surge
    of the tasks to move would not land exactly on the targets (`refused` says why)."""
    subject = f"service {service.name}"
    order = tuple(
        sorted(leaving, key=lambda n: (current.get(n, 0), ctx.snapshot.node_by_id[n].hostname, n))
    )
    surged = _covered(ctx, service, steering, current=current, order=order, fits=fits)
    if surged is not None:
        k, vacate, why = surged
        moved = sum(current.get(n, 0) for n in vacate)
        surge, over = vacating_surge(ctx, service, k=k, vacate=vacate, moved=moved)
        if surge is None:
            return None, Decision(RULE, subject, Outcome.KEEP, f"its tasks where they are: {over}")
        return surge, Decision(
            RULE, subject, Outcome.MOVE, f"stop-first: {why} ({refused})", action=surge
        )
    excluded, held = _swarms_way(ctx, service, steering, current=current, order=order, fits=fits)
    if excluded is not None:
        per = service.update_batch
        pace = f"{per} at a time" if per else "all at once (no update parallelism)"
        limit = ctx.settings(service.id).max_unavailable
        why = (
            f"stop-first, {refused}, and no surge fits that starts its tasks elsewhere "
            f"first: the task(s) on {hostnames(ctx, excluded.evicts_from)} leave as Swarm "
            f"moves them for a constraint, stopped {pace}, each replacement started on the "
            f"nodes it may use before the next stops (within max-unavailable {limit})"
        )
        return excluded, Decision(RULE, subject, Outcome.MOVE, why, action=excluded)
    return None, Decision(
        RULE,
        subject,
        Outcome.KEEP,
        f"stop-first and {refused}, and no larger surge fits (within twice the count, with "
        f"room for it and for the replacements Swarm starts); stopping them first as Swarm "
        f"would: {held}: its tasks stay where they are",
    )


def _covered(
    ctx: PlanContext,
    service: Service,
    steering: Steering,
    *,
    current: Mapping[str, int],
    order: Sequence[str],
    fits: Fits,
) -> tuple[int, tuple[str, ...], str] | None:
    """Steps 1 and 2: the surge, the nodes it lets go, and why; None when none covers."""
    sources = steering.vacate
    moved = sum(current.get(n, 0) for n in sources)
    limit = cover_limit(service.replicas or 0, moved)
    k = covering_surge(
        ctx, service, fits, current=current, sources=sources, need=moved, limit=limit
    )
    if k is not None:
        return (
            k,
            tuple(sources),
            (
                f"start {k} task(s) first (with {k}, at least {moved} run elsewhere whichever "
                f"node Swarm picks); the task(s) on {hostnames(ctx, sources)} stop once they run"
            ),
        )
    partial = _partial_cover(ctx, service, fits, current=current, sources=sources, order=order)
    if partial is None:
        return None
    k, batch = partial
    need = sum(current.get(n, 0) for n in batch)
    rest = [n for n in order if n not in batch]
    return (
        k,
        batch,
        (
            f"start {k} task(s) first (with {k}, at least {need} run off "
            f"{hostnames(ctx, sources)} whichever node Swarm picks); the task(s) on "
            f"{hostnames(ctx, batch)} stop once they run, and those on {hostnames(ctx, rest)} "
            "follow"
        ),
    )


def _partial_cover(
    ctx: PlanContext,
    service: Service,
    fits: Fits,
    *,
    current: Mapping[str, int],
    sources: Sequence[str],
    order: Sequence[str],
) -> tuple[int, tuple[str, ...]] | None:
    """The surge, and the first nodes of `order` it lets go (as many as it can), after
    which the tasks on them run off every source whatever Swarm's tie-break; None when
    not even the first can go that way. (All of them: tried first, with every source.)"""
    base = service.replicas or 0
    whole = set(order) == set(sources)
    for size in range(len(order) - 1 if whole else len(order), 0, -1):
        batch = tuple(order[:size])
        need = sum(current.get(n, 0) for n in batch)
        k = covering_surge(
            ctx,
            service,
            fits,
            current=current,
            sources=sources,
            need=need,
            limit=cover_limit(base, need),
            leave=batch,
        )
        if k is not None:
            return k, batch
    return None


def _swarms_way(
    ctx: PlanContext,
    service: Service,
    steering: Steering,
    *,
    current: Mapping[str, int],
    order: Sequence[str],
    fits: Fits,
) -> tuple[SetServiceConstraints | None, str]:
    """The exclusion of as many nodes of `order` as max-unavailable and the room for
    their replacements allow (step 3), or why none may be excluded."""
    held = ""
    # The replacements must fit where the service may stay: Swarm may start one on a node
    # still to leave (a later round moves it again), but a move with no room at the end
    # would stop tasks for nothing.
    final = steering.keeping(n for n in steering.vacate if n not in order)
    for size in range(len(order), 0, -1):
        batch = tuple(order[:size])
        after = steering.keeping(n for n in steering.vacate if n not in batch)
        staying = {n: c for n, c in current.items() if n not in order}
        moving = sum(current.get(n, 0) for n in batch)
        if (
            surge_after(
                ctx, service, fits, current=staying, k=moving, constraints=final.constraints
            )
            is None
        ):
            held = (
                held or f"no room for the replacement(s) of the task(s) on {hostnames(ctx, batch)}"
            )
            continue
        action = SetServiceConstraints(
            service_id=service.id,
            service_name=service.name,
            version=service.version,
            constraints=after.constraints,
            evicts_from=tuple(sorted(batch)),
            set_labels={EXCLUDED_LABEL: format_exclusions(after.excluded)},
        )
        over = ctx.budget().refusal(action)
        if over is None:
            return action, ""
        held = held or over
    return None, held
