"""Swarm event watch: node and service events (managers emit no task events).

docker-py's event stream blocks, so it runs in a worker thread and hands each event to
the loop. A broken stream reconnects with jittered backoff and resumes with `since`, and
a reconnect always fires the trigger: events missed while away are covered by a resync.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import anyio
import anyio.from_thread
import anyio.to_thread
from tenacity import Retrying, retry_if_exception_type, wait_random_exponential

from controller.adapters.errors import RetryableError
from controller.runtime.cycle_trigger import Trigger

log = logging.getLogger(__name__)


class EventStream(Protocol):
    def __iter__(self) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


class StreamEndedError(RetryableError, RuntimeError):
    cause = "event-stream"
    words = "the event stream ended"


class EventWatcher:
    def __init__(
        self,
        open_events: Callable[[float | None], EventStream],
        trigger: Trigger,
        *,
        max_backoff: float = 10.0,
    ) -> None:
        self._open_events = open_events
        self._trigger = trigger
        self._max_backoff = max_backoff
        self._since: float | None = None
        self._stream: EventStream | None = None
        self._stopping = threading.Event()
        self.connects = 0  # how many times a stream was opened (for tests and metrics)

    async def run(self) -> None:
        try:
            await anyio.to_thread.run_sync(self._watch_forever, abandon_on_cancel=True)
        finally:
            self.stop()

    def stop(self) -> None:
        self._stopping.set()
        stream = self._stream
        if stream is not None:
            try:
                stream.close()
            except Exception:
                log.debug("closing the event stream failed", exc_info=True)

    def _watch_forever(self) -> None:
        retrying = Retrying(
            retry=retry_if_exception_type(Exception),
            wait=wait_random_exponential(multiplier=0.2, max=self._max_backoff),
            before_sleep=lambda state: log.warning(
                "event stream lost (%s); reconnecting", state.outcome and state.outcome.exception()
            ),
        )
        for attempt in retrying:
            if self._stopping.is_set():
                return
            with attempt:
                self._watch_once()

    def _watch_once(self) -> None:
        stream = self._stream = self._open_events(self._since)
        self.connects += 1
        self._fire("watch:connected")
        try:
            for event in stream:
                if self._stopping.is_set():
                    return
                self._since = float(event.get("timeNano", 0)) / 1e9 or self._since
                kind = event.get("Type", "?")
                action = event.get("Action", "?")
                self._fire(f"event:{kind}:{action}")
        except Exception as exc:
            if self._stopping.is_set():
                return
            raise StreamEndedError(f"event stream broke: {exc}") from exc
        finally:
            stream.close()
        if not self._stopping.is_set():
            raise StreamEndedError("event stream ended")

    def _fire(self, reason: str) -> None:
        try:
            anyio.from_thread.run_sync(self._trigger.fire, reason)
        except RuntimeError:
            self._stopping.set()  # the loop is gone: the controller is stopping
