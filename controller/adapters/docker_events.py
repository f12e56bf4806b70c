"""Swarm's event stream: node and service events (managers emit no task events)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import docker

from controller.adapters.engine import DockerUnavailableError

EVENT_FILTERS = {"scope": ["swarm"], "type": ["node", "service"]}


class SwarmEvents:
    """One open stream: iterate for the events (it blocks); close() from any thread ends
    it and closes the client it came from. Closing twice (a stop, then the reader's own
    clean-up) is harmless."""

    def __init__(self, client: docker.DockerClient, since: float | None) -> None:
        self._client = client
        self._stream = client.api.events(since=since, filters=EVENT_FILTERS, decode=True)
        self._closed = threading.Lock()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._stream)

    def close(self) -> None:
        if not self._closed.acquire(blocking=False):
            return
        try:
            self._stream.close()
        finally:
            self._client.close()


def event_opener(
    client_factory: Callable[[], docker.DockerClient],
) -> Callable[[float | None], SwarmEvents]:
    """`open(since)`: a new stream from `since` (epoch seconds), or DockerUnavailableError."""

    def open_events(since: float | None) -> SwarmEvents:
        try:
            return SwarmEvents(client_factory(), since)
        except DockerUnavailableError:
            raise
        except Exception as exc:
            raise DockerUnavailableError(str(exc)) from exc

    return open_events
