"""Where Swarm starts the tasks of a surge, which surge starts enough of them off the
nodes a stop-first move leaves, and the surge's write.

Raising only the replica count places each new task on an eligible node with the fewest
tasks of the service, and Swarm breaks ties its own way (core/counts.scale_up gives the
most each node may get under any tie-break). A move must count on the worst of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.core.actions import SetReplicas
from controller.core.constraints import ConstraintError, node_filter, parse_constraint
from controller.core.context import PlanContext
from controller.core.counts import ScaleUp, running_by_node, scale_up
from controller.core.model import Service
from controller.core.replica_operations import transition
from controller.core.replicas import Operation
from controller.core.rules.owners.fits import Fits
from controller.core.rules.owners.name import RULE


def hostnames(ctx: PlanContext, nodes: Iterable[str]) -> str:
    by_id = ctx.snapshot.node_by_id
    return ", ".join(by_id[n].hostname if n in by_id else n for n in sorted(nodes))


def surge_after(
    ctx: PlanContext,
    service: Service,
    fits: Fits,
    *,
    current: Mapping[str, int],
    k: int,
    constraints: tuple[str, ...] | None = None,
) -> ScaleUp | None:
    """Where Swarm would start k more tasks under the service's constraints as they are
    (or as `constraints` would make them); None when some would find no room."""
    try:
        satisfies = node_filter(
            parse_constraint(c)
            for c in (service.constraints if constraints is None else constraints)
        )
    except ConstraintError:
        return None
    room = {}
    for node in ctx.snapshot.nodes:
        if node.accepts_tasks and satisfies(node) and (more := fits.more(service, node.id)):
            room[node.id] = more
    return scale_up(current, room, k, running_by_node(ctx.snapshot))


def landing_refusal(
    ctx: PlanContext,
    service: Service,
    fits: Fits,
    *,
    current: Mapping[str, int],
    desired: Mapping[str, int],
    k: int,
) -> str | None:
    """Why a surge of k would not land exactly on the targets (None: it would)."""
    gains = {n: c - current.get(n, 0) for n, c in desired.items() if c > current.get(n, 0)}
    up = surge_after(ctx, service, fits, current=current, k=k)
    if up is None:
        refusals = sorted({r for n in gains if (r := fits.refusal(service, n))})
        return "no room for a surge" + (f" ({'; '.join(refusals)})" if refusals else "")
    astray = sorted(n for n, most in up.at_most.items() if most > gains.get(n, 0))
    if astray:
        return f"a surge could start a task on {hostnames(ctx, astray)}, not on its target"
    return None


def covering_surge(
    ctx: PlanContext,
    service: Service,
    fits: Fits,
    *,
    current: Mapping[str, int],
    sources: Iterable[str],
    need: int,
    limit: int,
    leave: Iterable[str] | None = None,
) -> int | None:
    """The smallest surge (at most `limit`) after which at least `need` new tasks run off
    `sources`, whichever node Swarm picks in a tie, and after which the nodes to `leave`
    (default: `sources`) can be excluded (`replacements_fit`); None when there is none."""
    sources = frozenset(sources)
    leave = sources if leave is None else frozenset(leave)
    for k in range(max(need, 1), limit + 1):
        up = surge_after(ctx, service, fits, current=current, k=k)
        if up is None or not replacements_fit(
            ctx, service, fits, current=current, k=k, leave=leave
        ):
            return None  # no room for k more: none for more either
        if k - sum(most for n, most in up.at_most.items() if n in sources) >= need:
            return k
    return None


def replacements_fit(
    ctx: PlanContext,
    service: Service,
    fits: Fits,
    *,
    current: Mapping[str, int],
    k: int,
    leave: Iterable[str],
) -> bool:
    """Whether, after a surge of k, excluding the nodes to `leave` lets Swarm's updater
    stop every task there. It stops a batch (the update parallelism, P) and replaces
    each stopped task on an allowed node, waiting for the replacement to run before it
    stops the next: a replacement with no room holds the rest on those nodes for good.
    The last P may wait unplaced (the trim drops them first). So the allowed nodes need
    room for the surge and for all but P of the tasks there, wherever the surge lands
    (each new task on a node to leave is one more to replace, and one fewer taking room
    elsewhere). An updater without a bound stops them all at once: it never waits."""
    per = service.update_batch
    if not per:
        return True
    leave = frozenset(leave)
    replaced = sum(current.get(n, 0) for n in leave) - per
    try:
        satisfies = node_filter(parse_constraint(c) for c in service.constraints)
    except ConstraintError:
        return False
    room = sum(
        fits.more(service, n.id)
        for n in ctx.snapshot.nodes
        if n.id not in leave and n.accepts_tasks and satisfies(n)
    )
    return room - k >= replaced


def cover_limit(base: int, moved: int) -> int:
    """How far a surge that covers an escape may raise the count: by the operator's
    count at most (never more than doubled), and at least by the tasks it moves."""
    return max(moved, base)


def vacating_surge(
    ctx: PlanContext, service: Service, *, k: int, vacate: tuple[str, ...], moved: int
) -> tuple[SetReplicas | None, str | None]:
    """Step 2 of a stop-first move (owner_moves): the count raised by k, recorded with
    the nodes to leave (holding `moved` tasks) once the new tasks run; or the budget it
    would exceed."""
    surge = transition(
        service,
        RULE,
        Operation.REBALANCE,
        replicas=(service.replicas or 0) + k,
        now=ctx.now,
        detail=f"stop-first: move {moved} task(s) off {hostnames(ctx, vacate)}",
        evicts_from=vacate,
        vacate=vacate,
    ).action
    if (over := ctx.budget().refusal(surge)) is not None:
        return None, over
    return surge, None
