"""At most one outbound call in flight per peer: a poll skips a peer still busy.

Each call has its own deadline (adapters/json_client.py), so a call should never outlive
a poll. Should one do so anyway (a resolver that hangs, a machine too loaded to run the
thread), starting another each poll would pile up a thread and a socket per poll
without bound. So a peer whose last call still runs is not asked again until it ends;
the first skip is logged, and each counts in `placement_outbound_calls_skipped`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class CallsInFlight:
    def __init__(self, kind: str) -> None:
        self.kind = kind  # what the calls are, for the log and the metric
        self.skipped = 0
        self._lock = threading.Lock()
        self._running: dict[str, threading.Thread] = {}
        self._stuck: set[str] = set()  # peers skipped since their last call started

    def start(self, peer: str, call: Callable[[], None]) -> threading.Thread | None:
        """A started daemon thread running `call`, or None when `peer`'s last call still
        runs."""
        with self._lock:
            running = self._running.get(peer)
            if running is not None and running.is_alive():
                self.skipped += 1
                if peer not in self._stuck:
                    self._stuck.add(peer)
                    log.warning(
                        "%s %s: the last call has not ended; not asked again until it does",
                        self.kind,
                        peer,
                    )
                return None
            for ended in [p for p, t in self._running.items() if not t.is_alive()]:
                del self._running[ended]
            self._stuck.discard(peer)
            thread = threading.Thread(target=call, daemon=True, name=f"{self.kind} {peer}")
            self._running[peer] = thread
            thread.start()
            return thread

    def running(self) -> int:
        with self._lock:
            return sum(1 for t in self._running.values() if t.is_alive())
