"""Aggressiveness 1-5 as numbers: when an imbalance is worth a move, and how patient to be.

Levels 1-3 follow Windows Server failover clustering's VM load balancer (AutoBalancerLevel
low/medium/high: move when a node's CPU or memory load exceeds 80, 70 or 60 % of its
capacity). Levels 4-5 add what vSphere DRS's higher migration thresholds do: balance
relative to the cluster, moving work off a node that is well above the mean even when
nothing is near full, for smaller improvements. docs/rebalancing.md has the table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Level:
    aggressiveness: int
    # A node is hot when its load (the larger of CPU and memory, as a fraction of its
    # capacity) is above `absolute`, or above the mean of the nodes by `margin` while
    # above `floor` (levels 4-5 only; `margin` None: no relative rule).
    absolute: float
    margin: float | None
    floor: float
    # A load move must lower the larger of the source's and the targets' loads by this.
    min_improvement: float
    # Count skew: act when a service's busiest and emptiest eligible nodes differ by this.
    count_spread: int
    # An imbalance must be seen in this many consecutive cycles before anything moves.
    persist_cycles: int
    # A node that joins or returns must stay ready this long before tasks move to it.
    settle_seconds: float

    def is_hot(self, load: float, mean: float) -> bool:
        if load > self.absolute:
            return True
        return self.margin is not None and load > self.floor and load > mean + self.margin


LEVELS: dict[int, Level] = {
    1: Level(1, 0.80, None, 0.0, 0.10, 3, 5, 60.0),
    2: Level(2, 0.70, None, 0.0, 0.08, 3, 4, 30.0),
    3: Level(3, 0.60, None, 0.0, 0.05, 2, 3, 15.0),
    4: Level(4, 0.60, 0.15, 0.30, 0.03, 2, 2, 10.0),
    5: Level(5, 0.50, 0.10, 0.20, 0.02, 2, 2, 5.0),
}


def level_for(aggressiveness: int) -> Level:
    """The level for a setting; out-of-range values (the policy rejects them) clamp."""
    return LEVELS[min(max(aggressiveness, 1), 5)]
