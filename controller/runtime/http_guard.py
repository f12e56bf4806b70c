"""Connection limits uvicorn lacks: a deadline for each whole request, a cap per client.

uvicorn starts no timer on a new connection until a first response, and any byte
received cancels its keep-alive timer, so a silent socket, or one that sends a byte
now and then (slowloris), stays open for ever. Enough of them fill `limit_concurrency`,
and from then on every request gets 503. This protocol (uvicorn's own h11 one, with two
additions) closes a connection that has not delivered a whole request, headers and body,
within `request_seconds` of when the server became ready for it (the connection opened,
or the previous answer ended), and refuses a client address more than `per_peer`
connections at once, and everyone more than `max_connections`. A request that arrived
whole is never cut: an event stream may run for hours.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.utils import get_remote_addr

REQUEST_SECONDS = 10.0
PER_PEER = 16
# The client's side is owed a request: nothing yet, or a part of one.
_WAITING = (h11.IDLE, h11.SEND_BODY)


class GuardedH11(H11Protocol):
    """Configured per server by `guarded_protocol`; the class attributes are its state."""

    request_seconds: ClassVar[float] = REQUEST_SECONDS
    per_peer: ClassVar[int] = PER_PEER
    max_connections: ClassVar[int] = 256
    peers: ClassVar[Counter[str]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._peer: str | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        remote = get_remote_addr(transport)
        peer = remote[0] if remote is not None else None  # None: a unix socket
        if len(self.connections) > self.max_connections or (
            peer is not None and self.peers[peer] >= self.per_peer
        ):
            # Refused at once, and no longer counted: the clients within their share
            # are answered as before.
            self.connections.discard(self)
            transport.abort()
            return
        if peer is not None:
            self._peer = peer
            self.peers[peer] += 1
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._peer is not None:
            self.peers[self._peer] -= 1
            if self.peers[self._peer] <= 0:
                del self.peers[self._peer]
            self._peer = None
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request is owed from now

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.request_seconds, self._expire)

    def _expire(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state not in _WAITING:
            return  # closed already, or a whole request is being answered
        self.transport.abort()  # a route still reading the body sees the client gone


def guarded_protocol(
    *, request_seconds: float, per_peer: int, max_connections: int
) -> type[GuardedH11]:
    """A protocol class of its own for one server: its clients are counted together."""
    return type(
        "ServerH11",
        (GuardedH11,),
        {
            "request_seconds": request_seconds,
            "per_peer": per_peer,
            "max_connections": max_connections,
            "peers": Counter(),
        },
    )
