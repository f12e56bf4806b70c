"""Why the owners rule leaves a service's tasks where they are for now: a move or a
rollout in flight, the move cooldown, the failback mode, a node that came back too
recently, a controller that has only just started watching."""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.clock import format_minute, minute_of_day, time_of_day
from controller.core.context import PlanContext
from controller.core.counts import active_counts
from controller.core.kernel.candidates import Candidates
from controller.core.kernel.levels import level_for
from controller.core.kernel.settling import damped, downs_of
from controller.core.labels import EXCLUDED_LABEL, excluded_node_set
from controller.core.model import Service, TaskState
from controller.core.replicas import is_in_flight
from controller.core.rules.owners.stalled_moves import stalled_on
from controller.policy import FailbackMode, ServiceSettings

# Swarm marks a silent node down after 3 heartbeats, and 6 after a Raft leader change.
DOWN_GRACE_HEARTBEATS = 6


def current_counts(ctx: PlanContext, service: Service) -> dict[str, int]:
    """Active tasks per ready node (tasks on a down node are Swarm's to replace)."""
    return active_counts(ctx.snapshot, service.id)


def failback_ready_nodes(
    ctx: PlanContext, service: Service, settings: ServiceSettings, cands: Candidates
) -> tuple[frozenset[str], str | None]:
    """Preferred owners a task may fail back to now, or why none may.

    A service the controller never steered is being placed, not failed back: it goes to
    its preferred owners whatever the failback mode says.
    """
    if EXCLUDED_LABEL not in service.labels:
        return frozenset(n for n in cands.preferred if n in cands.placeable), None
    if settings.failback is FailbackMode.NEVER:
        return frozenset(), "failback is never"
    if settings.failback is FailbackMode.WINDOW and settings.failback_window is not None:
        tz = ctx.policy.controller.timezone
        minute = minute_of_day(ctx.now, tz)
        window = settings.failback_window
        if not window.contains(minute):
            return frozenset(), (
                f"failback window {format_minute(window.start_minute)}-"
                f"{format_minute(window.end_minute)} is closed (now {format_minute(minute)} {tz})"
            )
    since = ctx.memory.node_ready_since
    ready = frozenset(
        n
        for n in cands.preferred
        if n in since and ctx.now - since[n] >= settings.failback_delay_seconds
    )
    return ready, None


def failback_due(current: Mapping[str, int], ready: frozenset[str], cands: Candidates) -> bool:
    """A preferred owner in `ready` has no task while a task runs on a node that ranks
    below it (or is no preferred owner at all)."""
    empty = [cands.rank(n) for n in ready if not current.get(n)]
    return bool(empty) and any(c and cands.rank(n) > min(empty) for n, c in current.items())


def move_in_flight(ctx: PlanContext, service: Service) -> str | None:
    """Why this service must not be written now: a move or failover is in flight.

    Pending tasks (no node yet) do not count: they may be waiting for the controller to
    allow a node, and waiting for them would deadlock.
    """
    # A task the scheduler could not place (it says why in Status.Err) cannot run until
    # a node is allowed: waiting for an update or a move then would deadlock. A task
    # merely being scheduled (pending, no error yet) is part of a move in progress.
    if any(t.is_pending and t.error for t in ctx.snapshot.tasks_of(service.id)):
        return None
    # A move whose targets all went down would finish the moment one returns: planning
    # now, without the down nodes, calls it off (core/stalled_moves).
    if stalled_on(ctx.snapshot, service):
        return None
    if service.updating:
        return f"Swarm is rolling an update ({service.update_state})"
    # A node we excluded still holds tasks: the move we wrote has not run yet (Swarm
    # starts its rolling update a moment after the write). Writing now would plan from
    # the old placement and could undo the move.
    current = current_counts(ctx, service)
    excluded = excluded_node_set(service.labels)
    vacating = sorted(
        ctx.snapshot.node_by_id[n].hostname for n, c in current.items() if c and n in excluded
    )
    if vacating:
        return f"moving tasks off {', '.join(vacating)}"
    if is_in_flight(service):
        return "a replica surge is in flight"
    unsettled = [
        t
        for t in ctx.snapshot.tasks_of(service.id)
        if t.desired_state is TaskState.RUNNING
        and t.state is not TaskState.RUNNING
        and t.node_id in ctx.snapshot.node_by_id
        and ctx.snapshot.node_by_id[t.node_id].is_ready
    ]
    if unsettled:
        return f"{len(unsettled)} task(s) starting"
    return None


def cooldown_left(ctx: PlanContext, service: Service) -> str | None:
    last = ctx.memory.last_move.get(service.id)
    cooldown = ctx.policy.controller.move_cooldown_seconds
    if last is not None and ctx.now - last < cooldown:
        return (
            f"moved at {time_of_day(last)} (cooldown {cooldown:.0f} s, until "
            f"{time_of_day(last + cooldown)})"
        )
    return None


def settle_wait(
    ctx: PlanContext,
    settings: ServiceSettings,
    *,
    leaving: set[str],
    desired: Mapping[str, int],
    current: Mapping[str, int],
    cands: Candidates,
) -> str | None:
    """Why a move onto a node that came back recently waits, or None.

    Swarm leaves a returned node empty; a task moved there is lost again if the node
    fails again, which Swarm alone would not have lost. So a move onto a node this
    controller saw go down (in the last ten minutes) waits until the node
    has stayed ready for the service's failback-delay (a preferred owner) or
    rebalancing's settle time (any other node), doubled for each recent down as flap
    damping does. A controller that has just started waits the same (at most the settle
    time) before its first move onto any node. Tasks leaving a node they may not stay on
    (denied, drained, anti-affinity) do not wait: that move is an escape.
    """
    if not leaving or not leaving <= cands.placeable:
        return None
    settle = level_for(ctx.policy.controller.aggressiveness).settle_seconds
    nodes = ctx.snapshot.node_by_id
    watching = ctx.memory.watching_since
    for node_id in sorted(n for n, c in desired.items() if c > current.get(n, 0)):
        base = settings.failback_delay_seconds if node_id in cands.preferred else settle
        if downs_of(ctx.memory, node_id):
            wait = damped(base, ctx.memory, node_id)
            since = ctx.memory.node_ready_since.get(node_id, ctx.now)
            if ctx.now - since < wait:
                return (
                    f"{nodes[node_id].hostname} is ready since {time_of_day(since)}; a node "
                    f"that came back gets moved tasks once ready {wait:.0f} s (at "
                    f"{time_of_day(since + wait)})"
                )
        elif watching is not None and ctx.now - watching < (watch := _startup_watch(ctx, base)):
            return (
                f"the controller watches the swarm since {time_of_day(watching)}; it moves "
                f"tasks onto {nodes[node_id].hostname} once it has watched {watch:.0f} s (at "
                f"{time_of_day(watching + watch)})"
            )
    return None


def _startup_watch(ctx: PlanContext, wait: float) -> float:
    """How long a controller that has just started (often because the node under it
    died) watches before moving tasks onto a node it has no return to distrust: as long
    as that node would have to settle, but no longer than Swarm takes to mark a node that
    died unseen down: its grace, DOWN_GRACE_HEARTBEATS heartbeats after a Raft leader
    change, when the heartbeat is known."""
    watch = min(wait, level_for(ctx.policy.controller.aggressiveness).settle_seconds)
    heartbeat = ctx.snapshot.heartbeat_seconds
    return watch if heartbeat is None else min(watch, DOWN_GRACE_HEARTBEATS * heartbeat)
