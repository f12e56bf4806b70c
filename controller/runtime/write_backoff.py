"""Objects whose writes Docker refused wait before they are written again.

The plan is deterministic: a write Docker refuses (a 400 for a spec it cannot take, a
403 from an authorization plugin, ...) is planned again the next cycle and would be
refused again, every cycle. Instead its object waits, 5 s after the first refusal and
twice as long after each further one, up to 5 minutes; a write to it that succeeds ends
the wait, and so does a different write planned for it (the refusal was of that write).

This only filters what is executed, so it lives in the runtime, not in the planner's
Memory: the planner still plans the object every cycle and its decisions say what it
wants; the reconciler holds the write back and a decision says so. A controller that
restarts forgets the waits and tries each such write once more, which is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.actions import Action, describe, target_of

FIRST_WAIT_SECONDS = 5.0
MAX_WAIT_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class Refusal:
    refusals: int  # in a row, for this object
    wait: float  # seconds
    retry_at: float  # the reconciler's clock
    write: str  # describe() of the refused write
    problem: str  # Docker's answer, one line


class WriteBackoff:
    def __init__(self, *, first: float = FIRST_WAIT_SECONDS, cap: float = MAX_WAIT_SECONDS) -> None:
        self.first, self.cap = first, cap
        self._refused: dict[tuple[str, str], Refusal] = {}

    def held(self, action: Action, now: float) -> Refusal | None:
        """The refusal that holds this write back now, if any."""
        refusal = self._refused.get(target_of(action))
        if refusal is None or now >= refusal.retry_at or refusal.write != describe(action):
            return None
        return refusal

    def refused(self, action: Action, problem: str, now: float) -> Refusal:
        before = self._refused.get(target_of(action))
        count = before.refusals + 1 if before is not None else 1
        wait = min(self.cap, self.first * 2 ** (count - 1))
        refusal = Refusal(count, wait, now + wait, describe(action), problem)
        self._refused[target_of(action)] = refusal
        return refusal

    def succeeded(self, action: Action) -> None:
        self._refused.pop(target_of(action), None)

    def forget_unplanned(self, planned: tuple[Action, ...], now: float) -> None:
        """Objects no longer planned, whose wait is over, start afresh (removed services)."""
        targets = {target_of(a) for a in planned}
        for target, refusal in list(self._refused.items()):
            if target not in targets and now >= refusal.retry_at:
                del self._refused[target]
