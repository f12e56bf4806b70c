"""The process's one HTTP server: uvicorn serving one Starlette app, with TLS and limits.

Sockets are bound, and certificate files read, at construction: a taken port or a bad
key fails the start at once instead of a task later. The server runs as a task of the
controller's own event loop (uvicorn's signal handling is left to the controller), so
a request costs no thread, and a blocked loop fails /healthz as it should.

Limits, so that no client can starve the probes or the loop: at most `max_connections`
open at once (uvicorn answers 503 beyond), headers of at most 16 KiB, idle keep-alive
connections closed after 5 s; bodies are capped and timed by the routes that read them.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import uvicorn
from starlette.types import ASGIApp

MAX_CONNECTIONS = 64
MAX_HEADER_BYTES = 16 * 1024
KEEP_ALIVE_SECONDS = 5
SHUTDOWN_SECONDS = 2  # open event streams are cut after this


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


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The controller handles SIGTERM and SIGHUP itself (runtime/loop.py).
        yield


class HttpServer:
    def __init__(
        self,
        addresses: Sequence[tuple[str, int]],
        app: ASGIApp,
        *,
        tls: TlsFiles | None = None,
        max_connections: int = MAX_CONNECTIONS,
        on_stop: Callable[[], None] = lambda: None,
    ) -> None:
        self._on_stop = on_stop  # ends what streams (the web view's events) first
        # The same address twice (--http and --health-listen alike) is one socket.
        unique = [a for i, a in enumerate(addresses) if a[1] == 0 or a not in addresses[:i]]
        self._sockets: list[socket.socket] = []
        try:
            self._sockets.extend(_bind(a) for a in unique)
        except OSError:
            self.close()
            raise
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            server_header=False,
            proxy_headers=False,
            limit_concurrency=max_connections,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=SHUTDOWN_SECONDS,
            h11_max_incomplete_event_size=MAX_HEADER_BYTES,
            ssl_certfile=str(tls.cert) if tls else None,
            ssl_keyfile=str(tls.key) if tls else None,
            ssl_ca_certs=str(tls.client_ca) if tls and tls.client_ca else None,
            ssl_cert_reqs=ssl.CERT_REQUIRED if tls and tls.client_ca else ssl.CERT_NONE,
        )
        try:
            config.load()  # reads the certificate and key now
        except BaseException:
            self.close()
            raise
        self._server = _Server(config)
        self.tls = tls is not None

    @property
    def addresses(self) -> tuple[tuple[str, int], ...]:
        return tuple((str(s.getsockname()[0]), int(s.getsockname()[1])) for s in self._sockets)

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(int(s.getsockname()[1]) for s in self._sockets)

    @property
    def port(self) -> int:
        return self.ports[0]

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()

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
