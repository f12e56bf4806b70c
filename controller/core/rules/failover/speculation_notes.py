"""What the speculative rule remembers between cycles, and its hysteresis constants.

A suspected node's last suspicion (a false alarm's hold counts from it), the false alarms
each node raised lately (a flapping node stops being speculated on), and the services
whose confirmed losses a surge answered this cycle (rules/failover/speculative.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from controller.core.context import PlanContext
from controller.core.memory import Memory
from controller.core.rules.failover.speculation_memory import SPECULATION_MEMORY, SpeculationMemory

# How long positive evidence that a suspected node lives must hold before its surge is
# trimmed as a false alarm.
FALSE_ALARM_HOLD_SECONDS = 2.0
# The liveness gatherer's default poll (runtime/liveness): after a start or a takeover no
# trim until the signals have been watched for suspect-after and one poll.
LIVENESS_POLL_SECONDS = 0.5
# A node that raised this many false alarms within the window is treated as confirmed-only
# (its services wait for Swarm) for FLAP_CONFIRMED_SECONDS.
FLAP_FALSE_ALARMS = 3
FLAP_WINDOW_SECONDS = 120.0
FLAP_CONFIRMED_SECONDS = 600.0
# A node's last suspicion is remembered this long (it only delays a trim by the hold).
DOUBT_MEMORY_SECONDS = 60.0


@dataclass
class Notes:
    """What this cycle changes in the rule's memory (and which losses it answered)."""

    memory: SpeculationMemory
    false_alarms: dict[str, tuple[float, ...]] = field(default_factory=dict)
    confirmed_until: dict[str, float] = field(default_factory=dict)
    doubted_at: dict[str, float] = field(default_factory=dict)
    settled: set[str] = field(default_factory=set)  # services whose losses a surge covers

    def remember(self) -> Callable[[Memory], Memory]:
        speculation = replace(
            self.memory,
            false_alarms=self.false_alarms,
            confirmed_until=self.confirmed_until,
            doubted_at=self.doubted_at,
        )
        settled = frozenset(self.settled)

        def update(memory: Memory) -> Memory:
            lost = {k: v for k, v in memory.lost.items() if k not in settled}
            return replace(memory.with_slice(SPECULATION_MEMORY, speculation), lost=lost)

        return update

    def recent_false_alarms(self, node_id: str) -> int:
        return len(self.false_alarms.get(node_id, ()))

    def flapping_until(self, node_id: str, now: float) -> float | None:
        until = self.confirmed_until.get(node_id)
        return until if until is not None and until > now else None


def notes_of(ctx: PlanContext) -> Notes:
    """The rule's memory as this cycle finds it: the watch clock, the nodes suspected now,
    and what has aged out dropped."""
    now, before = ctx.now, ctx.memory.slice(SPECULATION_MEMORY)
    watching = before.watching_since if before.watching_since is not None else now
    doubted = {n: t for n, t in before.doubted_at.items() if now - t < DOUBT_MEMORY_SECONDS}
    doubted.update({n: now for n in ctx.health.suspected})
    return Notes(
        memory=replace(before, watching_since=watching if ctx.snapshot.liveness else None),
        false_alarms={
            n: kept
            for n, times in before.false_alarms.items()
            if (kept := tuple(t for t in times if now - t < FLAP_WINDOW_SECONDS))
        },
        confirmed_until={n: t for n, t in before.confirmed_until.items() if t > now},
        doubted_at=doubted,
    )
