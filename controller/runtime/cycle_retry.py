"""When a failed cycle is tried again, and which of its failures the log says.

A Raft election answers every request with an error, or not at all, for 10 to 15 s
after the leader's node dies (measured: bench/failover.py --fault leader). The cycle
after it must come at once, not after a backoff grown to 8 s: the failover that waits
for the first write Swarm accepts is already planned. So an outage (the engine away, or
the swarm answering errors it may recover from) is retried every FAST_SECONDS for its
first FAST_FOR_SECONDS, then with a backoff doubling up to MAX_SECONDS. Any other
failure (a bug) backs off from the start. The log says an outage's first failure, a
changed one, and the same one again at most every SAY_EVERY_SECONDS.
"""

from __future__ import annotations

from dataclasses import dataclass

# The causes (adapters' RetryableError.cause) an election or an engine restart raises.
OUTAGE_CAUSES = frozenset({"engine-unreachable", "swarm-error"})
# With runtime/outage_timeouts' short requests: a cycle within 0.5 s of the first write.
FAST_SECONDS = 0.15
FAST_FOR_SECONDS = 60.0
FIRST_BACKOFF_SECONDS = 0.5
MAX_SECONDS = 10.0
SAY_EVERY_SECONDS = 10.0


@dataclass
class CycleRetry:
    """The worker's state between failed cycles; `succeeded()` ends an outage."""

    failing_since: float | None = None
    backoff: float = FIRST_BACKOFF_SECONDS
    _said: str = ""
    _said_at: float = float("-inf")

    def failed(self, cause: str, now: float) -> float:
        """Seconds to wait before the next cycle."""
        if self.failing_since is None:
            self.failing_since = now
        if self.is_fast(cause, now):
            return FAST_SECONDS
        delay = self.backoff
        self.backoff = min(self.backoff * 2, MAX_SECONDS)
        return delay

    def is_fast(self, cause: str, now: float) -> bool:
        """Whether a failure for `cause` now is retried fast: an outage's first minute."""
        since = self.failing_since if self.failing_since is not None else now
        return cause in OUTAGE_CAUSES and now - since < FAST_FOR_SECONDS

    def should_say(self, text: str, now: float) -> bool:
        if text == self._said and now - self._said_at < SAY_EVERY_SECONDS:
            return False
        self._said, self._said_at = text, now
        return True

    def succeeded(self) -> None:
        self.failing_since = None
        self.backoff = FIRST_BACKOFF_SECONDS
        self._said, self._said_at = "", float("-inf")
