"""The false alarm: when a speculative surge is trimmed back because its node lives after
all, what that trim drops, and what the alarm is remembered as (rules/failover/speculative.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from controller.core.clock import utc_time
from controller.core.context import PlanContext
from controller.core.health.suspicion import GOSSIP_SOURCE
from controller.core.kernel.drop_order import STABLE_SORT_SLOTS, scale_down_order
from controller.core.kernel.swarm_grace import swarm_says_alive_seconds
from controller.core.model import NodeState, Task, TaskState
from controller.core.replicas import ReplicaRecord
from controller.core.rules.failover.speculation_notes import (
    FALSE_ALARM_HOLD_SECONDS,
    FLAP_CONFIRMED_SECONDS,
    FLAP_FALSE_ALARMS,
    FLAP_WINDOW_SECONDS,
    LIVENESS_POLL_SECONDS,
    Notes,
)


def extra_replica_seconds(record: ReplicaRecord, now: float) -> float:
    return max(0.0, (record.written - record.base) * (now - record.since))


def not_yet_false_alarm(
    ctx: PlanContext, record: ReplicaRecord, nodes: Sequence[str], notes: Notes
) -> str | None:
    """Why no longer suspected is not a false alarm yet, if it is not: the controller has
    not watched the signals long enough, or no positive evidence that each node lives
    has held for the hold time since it was last suspected."""
    by_id = ctx.snapshot.node_by_id
    names = ", ".join(by_id[n].hostname for n in nodes if n in by_id)
    ready = all(n in by_id and by_id[n].state is NodeState.READY for n in nodes)
    if ready and ctx.now - record.since >= swarm_says_alive_seconds(ctx.snapshot):
        return None  # Swarm's heartbeat says they live, long past its grace
    watching = notes.memory.watching_since
    warm_up = ctx.policy.controller.suspect_after_seconds + LIVENESS_POLL_SECONDS
    if watching is None or ctx.now - watching < warm_up:
        return (
            f"speculative surge stands: {names} no longer suspected, but this controller "
            f"has not yet watched the liveness signals for controller.suspect-after and a "
            f"poll ({warm_up:.1f} s) since it started or took over"
        )
    for node_id in nodes:
        hostname = by_id[node_id].hostname if node_id in by_id else node_id
        lives = lives_since(ctx, node_id, after=record.since)
        if lives is None:
            return (
                f"speculative surge stands: {hostname} no longer suspected, but nothing "
                "says it lives yet (its probe, another node's agent, or the gossip listing "
                "it again)"
            )
        since = max(lives, notes.doubted_at.get(node_id, -math.inf))
        if ctx.now - since < FALSE_ALARM_HOLD_SECONDS:
            return (
                f"speculative surge stands: {hostname} answers since {utc_time(since)}; a "
                f"false alarm once that has held for {FALSE_ALARM_HOLD_SECONDS:.0f} s"
            )
    return None


def lives_since(ctx: PlanContext, node_id: str, *, after: float) -> float | None:
    """Since when positive evidence says the node lives: its probe or another node's
    agent reaches it, or the gossip lists it again (it turned after `after`: the gossip
    is slow to drop a dead peer, so its old word proves nothing) while no connect to the
    node fails: a killed dockerd's node can come back into the peers from another node's
    stale view while its gossip port refuses. None: nothing says so."""
    signals = [s for s in ctx.snapshot.liveness if s.node_id == node_id]
    unreached = any(not s.alive and s.source != GOSSIP_SOURCE for s in signals)
    times = [
        s.since
        for s in signals
        if s.alive and (s.source != GOSSIP_SOURCE or (s.since > after and not unreached))
    ]
    return min(times) if times else None


def note_false_alarm(
    ctx: PlanContext, record: ReplicaRecord, nodes: Sequence[str], notes: Notes
) -> str:
    """Note the false alarm of each node, once per alarm; what it starts, for the decision.

    A trim the guards hold (a rollout, the budget) is planned again every cycle, and
    several services surged for one suspicion are trimmed for it: a false alarm noted
    since the surge began is this one (a new surge needs the record gone first)."""
    by_id = ctx.snapshot.node_by_id
    flapped = []
    for node_id in nodes:
        noted = notes.false_alarms.get(node_id, ())
        if any(t >= record.since for t in noted):
            continue
        times = (*noted, ctx.now)
        notes.false_alarms[node_id] = times
        if len(times) >= FLAP_FALSE_ALARMS:
            notes.confirmed_until[node_id] = ctx.now + FLAP_CONFIRMED_SECONDS
            flapped.append(by_id[node_id].hostname if node_id in by_id else node_id)
    if not flapped:
        return ""
    until = utc_time(ctx.now + FLAP_CONFIRMED_SECONDS)
    return (
        f"; {', '.join(flapped)} raised {FLAP_FALSE_ALARMS} false alarms within "
        f"{FLAP_WINDOW_SECONDS:.0f} s: treated as failover-mode confirmed until {until}"
    )


def drops_only_surged(tasks: Sequence[Task], *, base: int, surged: int) -> bool:
    """Whether going back to `base` drops exactly the surged tasks: those in the slots
    above the originals' (swarmkit fills the lowest free slots, so a service at rest in
    slots 1..base surges into base+1...)."""
    if len(tasks) > STABLE_SORT_SLOTS or len(tasks) != base + surged:
        return False
    if sorted(t.slot for t in tasks) != list(range(1, base + surged + 1)):
        return False  # slots with gaps or two tasks in one: not provable
    dropped = scale_down_order(tasks)[base:]
    return all(t.slot > base for t in dropped)


def trim_would_spare_originals(tasks: Sequence[Task], *, base: int, surged: int) -> bool:
    """Whether, after a surge of `surged` tasks onto free nodes (each alone, in the slots
    above the originals'), a false alarm's trim back to `base` would drop exactly those:
    the trim's own test, made before the surge, so that a false alarm never stops an
    original."""
    if not tasks:
        return False
    placed = [
        replace(
            tasks[0],
            id=f"surged-{i}",
            slot=base + i,
            node_id=f"free-node-{i}",
            desired_state=TaskState.RUNNING,
            state=TaskState.RUNNING,
        )
        for i in range(1, surged + 1)
    ]
    return drops_only_surged([*tasks, *placed], base=base, surged=surged)
