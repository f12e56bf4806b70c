"""An HTTP server of the process: uvicorn serving one Starlette app, with TLS and limits.

Sockets are bound, and certificate files read, at construction: a taken port or a bad
key fails the start at once instead of a task later. The server runs as a task of the
controller's own event loop (uvicorn's signal handling is left to the controller), so
a request costs no thread, and a blocked loop fails /healthz as it should.

Limits, so that no client can hold the server (http_guard.py): at most 16 connections
per client address and 192 in all, counted when the socket is accepted, before TLS
(more are closed at once); the TLS handshake done within 5 s; a request must arrive
whole within 10 s of the connection or of the previous answer, an answer the client
does not read for 10 s is cut, and one not over within 60 s of its request (event
streams aside: their routes end them); headers still arriving buffered up to 16 KiB, idle
keep-alive connections closed after 5 s; bodies are capped and timed by the routes that
read them. TLS offers only ciphers with forward secrecy. One open connection costs
about 0.3 MiB (the TLS state most of it; docs/operations-deploy.md, "Connection
limits"), so 192 stay well under the controller's memory limit.

The container healthcheck does not queue behind network clients at all: it asks a
server of its own on a unix socket (`unix`), which only processes in the container
reach (cli/healthcheck.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import uvicorn
from starlette.types import ASGIApp

from controller.runtime.http_guard import (
    HANDSHAKE_SECONDS,
    PER_PEER,
    REQUEST_SECONDS,
    RESPONSE_SECONDS,
    Admission,
    GuardedListener,
    guarded_protocol,
)

MAX_CONNECTIONS = 192
MAX_HEADER_BYTES = 16 * 1024
KEEP_ALIVE_SECONDS = 5
SHUTDOWN_SECONDS = 2  # open event streams are cut after this
# TLS 1.2 key exchanges with forward secrecy (TLS 1.3's suites all have it); no RSA key
# transport, no CBC: a recorded session stays sealed if the key leaks later.
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


@dataclass(frozen=True)
class TlsFiles:
    """Certificate and key (PEM, Docker secrets in a stack); with `client_ca`, every
    client must present a certificate that CA signed (mutual TLS)."""

    cert: Path
    key: Path
    client_ca: Path | None = None


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `PORT`; raises ValueError with what was wrong."""
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"invalid address {text!r}: expected HOST:PORT, e.g. :9464") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"invalid port {number} in {text!r}")
    return host.strip("[]") or "0.0.0.0", number


def _bind(address: tuple[str, int]) -> socket.socket:
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    sock = socket.create_server(address, family=family, backlog=128)
    sock.set_inheritable(True)
    return sock


def _bind_unix(path: Path) -> socket.socket:
    """A unix socket only its owner (root, in the container) may connect to."""
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)  # the socket's mode guards it
    if path.is_socket():
        path.unlink()  # left by a process that died
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        path.chmod(0o600)
        sock.listen(16)
    except OSError:
        sock.close()
        raise
    return sock


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The controller handles SIGTERM and SIGHUP itself (runtime/loop.py).
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's own start on given sockets, with a TLS handshake deadline: uvicorn
        passes none to asyncio, whose default (60 s) let silent sockets pile up."""
        assert sockets is not None
        config = self.config

        def create_protocol(_loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Protocol:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config,
                server_state=self.server_state,
                app_state=self.lifespan.state,
                _loop=_loop,
            )

        loop = asyncio.get_running_loop()
        self.servers = []
        for sock in sockets:
            server = await loop.create_server(
                create_protocol,
                sock=sock,
                ssl=config.ssl,
                backlog=config.backlog,
                ssl_handshake_timeout=HANDSHAKE_SECONDS if config.ssl else None,
            )
            self.servers.append(server)
        self.started = True


def _uvicorn_config(
    app: ASGIApp,
    tls: TlsFiles | None,
    admission: Admission,
    *,
    request_seconds: float,
    response_seconds: float,
) -> uvicorn.Config:
    """The server's settings: every bound on a request, a connection and TLS in one place."""
    return uvicorn.Config(
        app,
        # h11 always: the header limit below is h11's, and the guard extends its protocol.
        http=guarded_protocol(
            request_seconds=request_seconds,
            response_seconds=response_seconds,
            admission=admission,
        ),
        log_config=None,
        access_log=False,
        lifespan="off",
        server_header=False,
        proxy_headers=False,
        # Bounds the requests in progress; connections are bounded at accept.
        limit_concurrency=admission.max_connections + 1,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        ssl_certfile=str(tls.cert) if tls else None,
        ssl_keyfile=str(tls.key) if tls else None,
        ssl_ca_certs=str(tls.client_ca) if tls and tls.client_ca else None,
        ssl_cert_reqs=ssl.CERT_REQUIRED if tls and tls.client_ca else ssl.CERT_NONE,
        ssl_ciphers=CIPHERS,
    )


class HttpServer:
    def __init__(
        self,
        addresses: Sequence[tuple[str, int]],
        app: ASGIApp,
        *,
        tls: TlsFiles | None = None,
        unix: Path | None = None,
        max_connections: int = MAX_CONNECTIONS,
        per_peer: int = PER_PEER,
        request_seconds: float = REQUEST_SECONDS,
        response_seconds: float = RESPONSE_SECONDS,
        admission: Admission | None = None,
        on_stop: Callable[[], None] = lambda: None,
    ) -> None:
        self._on_stop = on_stop  # ends what streams (the web view's events) first
        # The same address twice (--http and --health-listen alike) is one socket.
        unique = [a for i, a in enumerate(addresses) if a[1] == 0 or a not in addresses[:i]]
        self._sockets: list[socket.socket] = []
        self._unix = unix
        # Shared with the process's other network listener when given (listeners.py).
        self.admission = admission or Admission(per_peer=per_peer, max_connections=max_connections)
        try:
            self._sockets.extend(
                GuardedListener.wrap(_bind(a), self.admission, tls=tls is not None) for a in unique
            )
            if unix is not None:
                self._sockets.append(_bind_unix(unix))
        except OSError:
            self.close()
            raise
        config = _uvicorn_config(
            app,
            tls,
            self.admission,
            request_seconds=request_seconds,
            response_seconds=response_seconds,
        )
        try:
            config.load()  # reads the certificate and key now
        except BaseException:
            self.close()
            raise
        self._server = _Server(config)
        self.tls = tls is not None

    @property
    def _tcp(self) -> list[socket.socket]:
        return [s for s in self._sockets if s.family != socket.AF_UNIX]

    @property
    def addresses(self) -> tuple[tuple[str, int], ...]:
        return tuple((str(s.getsockname()[0]), int(s.getsockname()[1])) for s in self._tcp)

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(int(s.getsockname()[1]) for s in self._tcp)

    @property
    def port(self) -> int:
        return self.ports[0]

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()
        if self._unix is not None and self._unix.is_socket():
            # An agent that gave up root may not remove root's socket: it stays, and the
            # next start replaces it.
            with contextlib.suppress(OSError):
                self._unix.unlink(missing_ok=True)

    async def run(self) -> None:
        """Serve until cancelled; then stop accepting, and close within a few seconds."""
        done = anyio.Event()

        async def serve() -> None:
            try:
                await self._server.serve(sockets=self._sockets)
            finally:
                done.set()

        async with anyio.create_task_group() as tg:
            # Shielded, so that uvicorn's own shutdown (closing connections) runs whole.
            tg.start_soon(_shielded, serve)
            try:
                await anyio.sleep_forever()
            finally:
                self._on_stop()
                self._server.should_exit = True
                with anyio.CancelScope(shield=True):
                    await done.wait()
                self.close()


async def _shielded(function: Callable[[], Awaitable[None]]) -> None:
    with anyio.CancelScope(shield=True):
        await function()
