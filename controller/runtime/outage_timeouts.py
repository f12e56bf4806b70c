"""Short engine requests while the engine is away, so no cycle hangs through an election.

Through a Raft election a manager may take a request and not answer it: the controller's
cycles then hung for the client's whole timeout (10 s) each, and the first cycle after
the election came seconds after Swarm took writes again. While cycles fail for an
outage (runtime/cycle_retry), every request is bounded by OUTAGE_REQUEST_SECONDS, and
the next cycle comes FAST_SECONDS after a failure: a cycle starts at most their sum
after the first write Swarm accepts. The first cycle that succeeds, or an outage longer
than the fast minute (an engine that is slow, not gone), brings the usual timeout back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from controller.runtime.cycle_retry import CycleRetry

# A live manager answers a swarm listing in milliseconds; through an election it may
# not answer at all. With cycle_retry's FAST_SECONDS this keeps the gap under 0.5 s.
OUTAGE_REQUEST_SECONDS = 0.3


class OutageTimeouts:
    """Sets the engine client's request timeout from how the last cycle ended."""

    def __init__(self, apply: Callable[[float], None], *, usual: float) -> None:
        self._apply = apply
        self.usual = usual
        self.current = usual
        self._expected: float | None = None  # the manager's failure already acted on
        self._lock = threading.Lock()  # the liveness gatherer calls from its thread

    def manager_unreached(self, since: float | None) -> None:
        """A manager's probe fails since `since` (None: none fails): short requests, once
        per failure."""
        if since is not None and since != self._expected:
            self._set(OUTAGE_REQUEST_SECONDS)
        self._expected = since

    def failed(self, retry: CycleRetry, cause: str, now: float) -> None:
        """After `retry.failed(cause, now)`: short while the outage is a fast one."""
        self._set(OUTAGE_REQUEST_SECONDS if retry.is_fast(cause, now) else self.usual)

    def succeeded(self) -> None:
        self._set(self.usual)

    def _set(self, seconds: float) -> None:
        with self._lock:
            if seconds != self.current:
                self._apply(seconds)
                self.current = seconds
