"""What speculative failover remembers between cycles, kept in the memory as its own slice."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from controller.core.memory import MemorySlice
from controller.core.rules.failover.name import SPECULATIVE


@dataclass(frozen=True, slots=True)
class SpeculationMemory:
    """What speculative failover remembers between cycles (rules/failover/speculative):
    its hysteresis. Lost at a restart, it only makes the rule more patient, except that a
    node's past false alarms are forgotten."""

    # When this controller began to see liveness signals without a break; None: none in
    # the last cycle, or a lease takeover restarted the wait (`Memory.taking_over`).
    watching_since: float | None = None
    # Node id -> the last cycle it was suspected (or a health panic held a surge for it):
    # a false alarm's hold counts from it.
    doubted_at: Mapping[str, float] = field(default_factory=dict)
    # Node id -> when its false alarms were declared, within the flap window.
    false_alarms: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    # Node id -> until when it is treated as confirmed-only: it flapped.
    confirmed_until: Mapping[str, float] = field(default_factory=dict)


def _taking_over(memory: SpeculationMemory) -> SpeculationMemory:
    """What the liveness signals a standby saw may not be what the leader acts on (its
    first leader cycle may have none): the wait before a trim starts again."""
    return replace(memory, watching_since=None)


SPECULATION_MEMORY = MemorySlice(SPECULATIVE, SpeculationMemory, _taking_over)
