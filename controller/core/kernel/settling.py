"""How long a node that joined or returned waits before tasks move to it.

It must stay ready for its level's settle time; each time it went down in the last ten
minutes doubles that time, as route-flap damping does, so a flapping node is trusted only
once it has calmed down. Failback, owners and rebalancing all wait the same way.
"""

from __future__ import annotations

from controller.core.kernel.levels import Level
from controller.core.memory import Memory

MAX_SETTLE_SECONDS = 600.0


def downs_of(memory: Memory, node_id: str) -> int:
    return len(memory.node_downs.get(node_id, ()))


def settle_seconds(level: Level, memory: Memory, node_id: str) -> float:
    return damped(level.settle_seconds, memory, node_id)


def damped(seconds: float, memory: Memory, node_id: str) -> float:
    """A wait for a returned node, doubled for each time it went down lately after the first."""
    downs = downs_of(memory, node_id)
    return min(seconds * float(2 ** max(downs - 1, 0)), MAX_SETTLE_SECONDS)


def is_settled(level: Level, memory: Memory, node_id: str, now: float) -> bool:
    """Ready long enough (for its flap history) to receive moved tasks."""
    since = memory.node_ready_since.get(node_id)
    return since is not None and now - since >= settle_seconds(level, memory, node_id)
