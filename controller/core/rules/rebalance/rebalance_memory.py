"""What rebalancing remembers between cycles, kept in the memory as its own slice."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.memory import MemorySlice
from controller.core.rules.rebalance.name import RULE


@dataclass(frozen=True, slots=True)
class RebalanceMemory:
    """What rebalancing remembers between cycles: all of it only makes it more patient."""

    # Imbalance key ("count:<service>", "load:<node>") -> (consecutive cycles seen, since).
    streaks: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    # Node id -> (the ready-since of the return that triggered a rebalance, when it did).
    join_used: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # When the last periodic round ran; None until the first cycle starts the clock.
    last_round: float | None = None


REBALANCE_MEMORY = MemorySlice(RULE, RebalanceMemory)
