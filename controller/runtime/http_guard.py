"""Connection limits uvicorn and asyncio lack: caps counted at accept, and deadlines.

Caps at accept, before TLS. asyncio calls a protocol's `connection_made` only after the
TLS handshake, but it allocates the TLS state (a 256 KiB buffer) when it accepts the
socket: a cap counted in the protocol let any number of sockets that never start TLS
through. `GuardedListener` is the listening socket itself: its `accept()` counts each
client address and every connection of the process against an `Admission` before
asyncio sees the socket, closes what is over the caps at once, and the count ends when
the socket is closed, whoever closes it. The handshake has its own deadline
(`HANDSHAKE_SECONDS`, http_server.py passes it to asyncio).

Deadlines in both directions. uvicorn starts no timer on a new connection until a first
response, and any byte received cancels its keep-alive timer, so a silent socket, or one
that sends a byte now and then (slowloris), stays open for ever; and a client that never
reads holds its connection as long as the answer is pending. `GuardedH11` (uvicorn's
own h11 protocol with additions) closes a connection that has not delivered a whole
request within `request_seconds` of when the server became ready for it, and one whose
answer could not be written on for `request_seconds` (the client reads nothing). An
answer must also be over within `response_seconds` of its request's head, however
steadily the client reads it (a client that takes a byte now and then never lets the
no-progress deadline run out); once written whole, what the client has not yet taken
of it is under the request deadline again. An event stream (`text/event-stream`) is the
one answer with no such bound: its route ends it (the web view's at its session's end
or after an hour), and the no-progress deadline still holds.

`accept()` out of file descriptors: asyncio logs a traceback per attempt, a storm of
them; the listener instead sheds the connection with a spare descriptor kept for it,
and says so at most once a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import struct
import time
import weakref
from collections import Counter
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

REQUEST_SECONDS = 10.0
RESPONSE_SECONDS = 60.0
HANDSHAKE_SECONDS = 5.0
# A handshake this old may give its place to a newcomer: an honest one is long over.
EVICT_AFTER = 1.0
PER_PEER = 16
# Refused connections closed in one `accept()` call before the loop gets a turn.
_SHED_PER_CALL = 64
_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
# The client's side is owed a request: nothing yet, or a part of one.
_WAITING = (h11.IDLE, h11.SEND_BODY)
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset
log = logging.getLogger("swarm_placement.http")


class Admission:
    """How many connections each client address holds, and all of them: shared by every
    listener of a process that shares the caps (both network ports of a controller).

    When all places are taken, a new connection from an address that holds none takes
    the place of the oldest connection still in its TLS handshake, if that handshake
    has run `EVICT_AFTER` already; the oldest is shut down. An attacker on many
    addresses who keeps the places full of handshakes that never end then crowds out no
    newcomer (an honest handshake takes milliseconds, the attacker's are the oldest),
    while its own addresses, each holding places, cannot take each other's: every
    accepted socket costs TLS state, and a churn of them grew the heap past the memory
    limit. Connections whose handshake is done are never shut down for another (the
    request deadline bounds them). At most a quarter of the cap may be on its way out
    at once; beyond that a new connection is refused, as when no handshake qualifies."""

    def __init__(self, *, per_peer: int, max_connections: int) -> None:
        self.per_peer = per_peer
        self.max_connections = max_connections
        self.peers: Counter[str] = Counter()
        self.total = 0
        self.refused = 0
        self.evicted = 0
        self.leaving = 0  # shut down for a newer connection, not yet closed
        # Accepted sockets still in their handshake, oldest first, by descriptor.
        self._handshaking: dict[int, weakref.ref[CountedSocket]] = {}

    def admit(self, peer: str | None) -> bool:
        if (peer is not None and self.peers[peer] >= self.per_peer) or (
            self.total >= self.max_connections
            and not (peer is not None and self.peers[peer] == 0 and self._evict_oldest())
        ):
            self.refused += 1
            return False
        self.total += 1
        if peer is not None:
            self.peers[peer] += 1
        return True

    def handshaking(self, sock: CountedSocket) -> None:
        """`sock` was accepted for a TLS server: it may give its place up until
        `established`."""
        self._handshaking[sock.place.fd] = weakref.ref(sock)

    def established(self, fd: int) -> None:
        """The connection on descriptor `fd` finished its handshake (or needs none)."""
        self._handshaking.pop(fd, None)

    def _evict_oldest(self) -> bool:
        """Shut the oldest pending handshake down for a newcomer, if one qualifies."""
        if self.leaving >= max(1, self.max_connections // 4):
            return False
        while self._handshaking:
            fd = next(iter(self._handshaking))
            sock = self._handshaking[fd]()
            if sock is None or sock.place.leaving:
                del self._handshaking[fd]
                continue
            if time.monotonic() - sock.place.since < EVICT_AFTER:
                return False  # the oldest is young: so are all the others
            del self._handshaking[fd]
            sock.place.leaving = True
            self.leaving += 1
            self.evicted += 1
            # Not closed here: asyncio owns the descriptor. Its handshake reads the end
            # of the stream at once and closes the socket, which gives the place back.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            return True
        return False

    def release(self, place: Place) -> None:
        self.total -= 1
        self._handshaking.pop(place.fd, None)
        if place.leaving:
            self.leaving -= 1
        if place.peer is not None:
            self.peers[place.peer] -= 1
            if self.peers[place.peer] <= 0:
                del self.peers[place.peer]


class Place:
    """One admitted connection's place, apart from its socket: the finalizer that gives
    it back must not keep the socket alive."""

    __slots__ = ("fd", "leaving", "peer", "since")

    def __init__(self, peer: str | None, fd: int) -> None:
        self.peer, self.fd, self.leaving = peer, fd, False
        self.since = time.monotonic()


class CountedSocket(socket.socket):
    """An accepted socket that gives its place back when it is closed (or collected)."""

    def __init__(self, *args: Any, admission: Admission, peer: str | None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.place = Place(peer, self.fileno())
        self._release = weakref.finalize(self, admission.release, self.place)

    def _real_close(self, *args: Any, **kwargs: Any) -> None:
        self._release()  # once: a finalizer runs at most once
        super()._real_close(*args, **kwargs)  # type: ignore[misc]


class GuardedListener(socket.socket):
    """A listening socket whose `accept()` admits a connection only within the caps."""

    admission: Admission
    tls: bool
    _spare: int | None
    _said_at: float

    @classmethod
    def wrap(
        cls, sock: socket.socket, admission: Admission, *, tls: bool = False
    ) -> GuardedListener:
        guarded = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        guarded.admission = admission
        guarded.tls = tls  # its connections begin with a handshake
        guarded._spare = _spare_fd()
        guarded._said_at = -3600.0
        return guarded

    def accept(self) -> tuple[socket.socket, Any]:
        for _ in range(_SHED_PER_CALL):
            try:
                fd, address = self._accept()  # type: ignore[attr-defined]
            except OSError as exc:
                if exc.errno not in _OUT_OF_FDS:
                    raise  # BlockingIOError included: nothing more waits
                self._shed(exc)
                continue
            peer = str(address[0]) if self.family in (socket.AF_INET, socket.AF_INET6) else None
            if not self.admission.admit(peer):
                os.close(fd)  # before any TLS state exists for it
                continue
            conn = CountedSocket(
                self.family, self.type, self.proto, fileno=fd, admission=self.admission, peer=peer
            )
            if self.tls:
                self.admission.handshaking(conn)
            return conn, address
        raise BlockingIOError(errno.EAGAIN, "refused connections shed; more on the next turn")

    def _shed(self, exc: OSError) -> None:
        """Out of descriptors: take the waiting connection with the spare one and close
        it, so that the loop neither spins on it nor logs a traceback per attempt."""
        now = time.monotonic()
        if now - self._said_at >= 60:
            self._said_at = now
            log.warning(
                "out of file descriptors (%s): closing new connections at once; "
                "%d connections open, nofile %s",
                exc.strerror,
                self.admission.total,
                _nofile(),
            )
        if self._spare is None:
            raise BlockingIOError(errno.EAGAIN, "no spare descriptor") from exc
        os.close(self._spare)
        try:
            fd, _ = self._accept()  # type: ignore[attr-defined]
            os.close(fd)
        except OSError:
            pass
        finally:
            self._spare = _spare_fd()

    def close(self) -> None:
        spare = getattr(self, "_spare", None)
        if spare is not None:
            os.close(spare)
            self._spare = None
        super().close()


def _spare_fd() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _nofile() -> str:
    import resource  # noqa: PLC0415 (POSIX only, and only when this is said)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return f"{soft}/{hard}"


class _Connection(h11.Connection):
    """h11's server side, which remembers whether the answer it sends is a stream."""

    streaming = False

    def send(self, event: h11.Event) -> bytes | None:  # type: ignore[override]
        if isinstance(event, h11.Response):
            self.streaming = any(
                name == b"content-type" and value.startswith(b"text/event-stream")
                for name, value in event.headers
            )
        return super().send(event)


class GuardedH11(H11Protocol):
    """Configured per server by `guarded_protocol`; the class attributes are its settings."""

    request_seconds: ClassVar[float] = REQUEST_SECONDS
    response_seconds: ClassVar[float] = RESPONSE_SECONDS
    admission: ClassVar[Admission | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        size = self.config.h11_max_incomplete_event_size
        self._h11 = _Connection(h11.SERVER) if size is None else _Connection(h11.SERVER, size)
        self.conn = self._h11
        self._deadline: asyncio.TimerHandle | None = None
        self._stall: asyncio.TimerHandle | None = None
        self._answer: asyncio.TimerHandle | None = None
        self._timed: object = None  # the request-response cycle `_answer` times
        self._lost = False

    def handle_events(self) -> None:
        super().handle_events()
        cycle = self.cycle
        if cycle is not None and cycle is not self._timed and not self._lost:
            self._timed = cycle  # a new request's head came: its answer is timed from now
            if self._answer is not None:
                self._answer.cancel()
            self._answer = self.loop.call_later(self.response_seconds, self._answer_late)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if self.admission is not None and sock is not None:
            self.admission.established(sock.fileno())  # the handshake is over
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        for timer in (self._deadline, self._stall, self._answer):
            if timer is not None:
                timer.cancel()
        self._deadline = self._stall = self._answer = None
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        if self._answer is not None:  # before a pipelined request gets its own
            self._answer.cancel()
            self._answer = None
        super().on_response_complete()  # may start a pipelined request's answer (timed)
        self._arm()  # the next request is owed from now (or the close must end by then)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall is None and not self._lost:
            self._stall = self.loop.call_later(self.request_seconds, self._stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        if not self._lost:
            self._deadline = self.loop.call_later(self.request_seconds, self._expire)

    def _expire(self) -> None:
        self._deadline = None
        if self._lost:
            return
        if not self.transport.is_closing() and self.conn.their_state not in _WAITING:
            return  # a whole request is being answered
        # Owed a request, or closing but its last bytes unread by the client: a close
        # waits for the buffer to drain, an abort does not.
        self._reset()  # a route still reading the body sees the client gone

    def _answer_late(self) -> None:
        self._answer = None
        cycle = self.cycle
        if self._lost or cycle is None or cycle is not self._timed or cycle.response_complete:
            return
        if self._h11.streaming and cycle.response_started:
            return  # an event stream: its route ends it
        self._reset()

    def _stalled(self) -> None:
        self._stall = None
        if not self._lost:
            self._reset()  # the client reads nothing: the answer cannot end

    def _reset(self) -> None:
        """Abort with a reset: what the kernel still holds to send is dropped at once,
        not kept for a client that reads nothing."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        self.transport.abort()


def guarded_protocol(
    *,
    request_seconds: float,
    response_seconds: float = RESPONSE_SECONDS,
    admission: Admission | None = None,
) -> type[GuardedH11]:
    """A protocol class of its own for one server."""
    settings = {
        "request_seconds": request_seconds,
        "response_seconds": response_seconds,
        "admission": admission,
    }
    return type("ServerH11", (GuardedH11,), settings)
