"""When rebalancing may act: node joins and returns, periodic rounds, and patience.

- A node that joins or returns must stay ready for its settle time before tasks move to
  it (core/kernel/settling).
- A join or return opens a window in which rebalancing may act (mode on-join and
  periodic). A flapping node (down twice or more in ten minutes) opens it at most once:
  after the rebalance it caused, its further returns cause none.
- Periodic mode also runs a round every rebalance interval; the clock starts at the
  first cycle, so a restarted controller waits an interval before its first round.
- An imbalance must be seen in `persist_cycles` consecutive cycles (a streak).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.core.kernel.levels import Level
from controller.core.kernel.settling import downs_of, settle_seconds
from controller.core.memory import FLAP_MEMORY_SECONDS, Memory
from controller.core.model import Node
from controller.core.rules.rebalance.rebalance_memory import REBALANCE_MEMORY, RebalanceMemory
from controller.policy import ControllerSettings, RebalanceMode

# How long after settling a join or return stays a reason to rebalance.
JOIN_WINDOW_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class Joins:
    active: Mapping[str, float]  # node id -> ready-since of a join that may trigger now
    damped: Mapping[str, str]  # node id -> why its recent return triggers nothing
    settling: Mapping[str, str]  # node id -> how long it must stay ready first


def find_joins(level: Level, memory: Memory, nodes: Iterable[Node], now: float) -> Joins:
    active: dict[str, float] = {}
    damped: dict[str, str] = {}
    settling: dict[str, str] = {}
    for node in nodes:
        since = memory.node_ready_since.get(node.id)
        if since is None or not node.accepts_tasks:
            continue
        settle = settle_seconds(level, memory, node.id)
        if now - since < settle:
            settling[node.id] = (
                f"{node.hostname} joined or returned recently and must stay ready "
                f"{settle:.0f} s first"
            )
            continue
        if now - since > settle + JOIN_WINDOW_SECONDS:
            continue
        used = memory.slice(REBALANCE_MEMORY).join_used.get(node.id)
        flapping = downs_of(memory, node.id) >= 2
        if (
            flapping
            and used is not None
            and used[0] != since
            and now - used[1] < FLAP_MEMORY_SECONDS
        ):
            damped[node.id] = (
                f"{node.hostname} is flapping ({downs_of(memory, node.id)} downs in "
                f"{FLAP_MEMORY_SECONDS / 60:.0f} min) and already caused a rebalance"
            )
            continue
        active[node.id] = since
    return Joins(active, damped, settling)


def round_due(controller: ControllerSettings, memory: Memory, now: float) -> bool:
    """Whether this cycle is a periodic round (never outside periodic mode)."""
    last = memory.slice(REBALANCE_MEMORY).last_round
    if controller.rebalance_mode is not RebalanceMode.PERIODIC or last is None:
        return False
    return now - last >= controller.rebalance_interval_seconds


def next_rebalance_memory(
    previous: RebalanceMemory,
    *,
    controller: ControllerSettings,
    now: float,
    seen: Iterable[str],
    joins_used: Mapping[str, float],
    round_ran: bool,
) -> RebalanceMemory:
    """Streaks of the imbalances seen this cycle (others reset), joins used, the round."""
    streaks = {
        key: (previous.streaks[key][0] + 1, previous.streaks[key][1])
        if key in previous.streaks
        else (1, now)
        for key in sorted(set(seen))
    }
    join_used = {
        node_id: used
        for node_id, used in previous.join_used.items()
        if now - used[1] < FLAP_MEMORY_SECONDS
    }
    join_used.update({node_id: (since, now) for node_id, since in joins_used.items()})
    last_round = previous.last_round
    if controller.rebalance_mode is not RebalanceMode.PERIODIC:
        last_round = None
    elif last_round is None or round_ran:
        last_round = now
    return RebalanceMemory(streaks=streaks, join_used=join_used, last_round=last_round)


def streak(memory: Memory, key: str) -> int:
    """Cycles this imbalance was seen before this one (this one makes it one more)."""
    found = memory.slice(REBALANCE_MEMORY).streaks.get(key)
    return found[0] if found else 0
