"""The event watch through its seam: streams come from an opener (the adapters' in
production), every event and every (re)connect fires the trigger, a broken stream is
reopened from the last event's time, and stop() closes the open stream."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anyio

from controller.runtime.cycle_trigger import Trigger
from controller.runtime.watcher import EventWatcher


class Stream:
    def __init__(self, events: list[dict[str, Any]], hold: threading.Event | None) -> None:
        self.events, self.hold, self.closed = events, hold, 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield from self.events
        if self.hold is not None:
            self.hold.wait(10)  # a live stream: blocks until closed
        else:
            raise ConnectionError("stream broke")

    def close(self) -> None:
        self.closed += 1
        if self.hold is not None:
            self.hold.set()


def test_events_fire_the_trigger_and_a_broken_stream_resumes_from_the_last_event() -> None:
    opened: list[float | None] = []
    live = threading.Event()
    streams = [
        Stream([{"Type": "node", "Action": "update", "timeNano": 5_000_000_000}], None),
        Stream([{"Type": "service", "Action": "update", "timeNano": 7_000_000_000}], live),
    ]

    def open_events(since: float | None) -> Stream:
        opened.append(since)
        return streams[len(opened) - 1]

    async def main() -> set[str]:
        trigger = Trigger()
        watcher = EventWatcher(open_events, trigger, max_backoff=0.05)
        reasons: set[str] = set()
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run)
            with anyio.fail_after(10):
                while "event:service:update" not in reasons:
                    reasons |= await trigger.wait()
            watcher.stop()
            tg.cancel_scope.cancel()
        return reasons

    reasons = anyio.run(main)
    assert reasons >= {"watch:connected", "event:node:update", "event:service:update"}
    assert opened == [None, 5.0], "reopened from the last event seen"
    assert streams[0].closed == 1, "a broken stream is closed"
    assert streams[1].closed >= 1, "stop() closes the open stream"
