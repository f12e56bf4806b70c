"""/healthz, /readyz and /metrics over HTTP, served beside the reconcile loop.

The server is the standard library's WSGI server in a thread of its own (threads per
request, so a slow scraper blocks no probe); prometheus_client renders /metrics. The
answers come from a `Health` record the loop keeps up to date, never from the Docker API,
so a probe costs nothing and cannot hang on the engine.

- /healthz: the process works: its event loop ticks and no cycle is stuck. Swarm restarts
  a task that fails this (the stack's healthcheck).
- /readyz: it does its job: the engine answered, a cycle completed, and the lease was read
  recently (leader or standby, the body says which).
"""

from __future__ import annotations

import hmac
import json
import logging
import socketserver
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import anyio
import anyio.to_thread
from prometheus_client import make_wsgi_app

from controller.runtime.lease_keeper import LeaseKeeper
from controller.runtime.metrics import Metrics

log = logging.getLogger(__name__)

LOOP_STALE_SECONDS = 10.0  # the loop ticks every second; ten missed ticks means stuck
CYCLE_STUCK_SECONDS = 120.0  # longer than any cycle with its retries and timeouts

StartResponse = Callable[..., Any]


@dataclass
class Health:
    """What the probes report, kept by the loop (monotonic seconds)."""

    started: float
    loop_beat: float
    cycle_started: float | None = None  # set while a cycle runs
    cycles_done: int = 0
    last_error: str | None = None  # the engine could not be reached in the last cycle
    lease: LeaseKeeper | None = None

    def alive(self, now: float) -> tuple[bool, str]:
        if now - self.loop_beat > LOOP_STALE_SECONDS:
            return False, f"the event loop has not ticked for {now - self.loop_beat:.0f} s"
        if self.cycle_started is not None and now - self.cycle_started > CYCLE_STUCK_SECONDS:
            return False, f"a reconcile cycle has run for {now - self.cycle_started:.0f} s"
        return True, "ok"

    def ready(self, now: float) -> tuple[bool, str]:
        alive, why = self.alive(now)
        if not alive:
            return False, why
        if self.last_error is not None:
            return False, self.last_error
        if self.cycles_done == 0:
            return False, "no reconcile cycle has completed yet"
        lease = self.lease
        if lease is None:
            return True, "leader (no lease: a single instance)"
        if lease.last_read is None or now - lease.last_read > lease.config.lifetime:
            return False, f"the lease {lease.config.name} was not read lately"
        reason = lease.standby_reason()
        return True, "leader" if reason is None else f"standby: {reason}"


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http: " + format, *args)


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


def make_app(
    health: Health,
    metrics: Metrics,
    *,
    token: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """The WSGI app. With a token, /metrics wants `Authorization: Bearer TOKEN`."""
    metrics_app = make_wsgi_app(metrics.registry)

    def reply(start: StartResponse, code: str, body: dict[str, Any]) -> list[bytes]:
        data = (json.dumps(body) + "\n").encode()
        start(code, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    def app(environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return reply(start, "405 Method Not Allowed", {"error": "only GET"})
        if path in ("/healthz", "/readyz"):
            ok, why = (health.alive if path == "/healthz" else health.ready)(clock())
            code = "200 OK" if ok else "503 Service Unavailable"
            return reply(start, code, {"ok": ok, "status": why})
        if path == "/metrics":
            if token is not None:
                given = environ.get("HTTP_AUTHORIZATION", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    return reply(start, "401 Unauthorized", {"error": "bearer token required"})
            return metrics_app(environ, start)  # type: ignore[no-any-return]
        return reply(start, "404 Not Found", {"error": f"no such path {path}"})

    return app


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


class EndpointServer:
    """Binds at construction (a taken port fails the start at once), serves in `run()`."""

    def __init__(self, address: tuple[str, int], app: Callable[..., Iterable[bytes]]) -> None:
        self._server = make_server(
            address[0], address[1], app, server_class=_ThreadingServer, handler_class=_QuietHandler
        )
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    async def run(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="placement-http", daemon=True
        )
        self._thread.start()
        try:
            await anyio.sleep_forever()
        finally:
            self._server.shutdown()
            self._server.server_close()
