"""/healthz, /readyz and /metrics, routes of the process's HTTP server (http_server.py).

prometheus_client renders /metrics. The answers come from a `Health` value the loop
keeps up to date, never from the Docker API, so a probe costs nothing and cannot hang on
the engine.

- /healthz: the process works: its event loop ticks and no cycle is stuck. Swarm restarts
  a task that fails this (the stack's healthcheck).
- /readyz: it does its job: the engine answered, a cycle completed, and the lease was read
  recently (leader or standby, the body says which).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from controller.runtime.http_replies import bearer_matches, unauthorized
from controller.runtime.lease_keeper import LeaseKeeper
from controller.runtime.metrics import Metrics

LOOP_STALE_SECONDS = 10.0  # the loop ticks every second; ten missed ticks means stuck
CYCLE_STUCK_SECONDS = 120.0  # longer than any cycle with its retries and timeouts


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


def probe_routes(
    health: Health,
    metrics: Metrics,
    *,
    token: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[Route]:
    """/healthz, /readyz and /metrics. With a token, /metrics wants `Bearer TOKEN`, and
    the probes say why (leader or standby, the lease holder, the last error) only to a
    caller with it or on the unix socket: anyone else gets yes or no."""

    async def probe(request: Request) -> Response:
        ok, why = (health.alive if request.url.path == "/healthz" else health.ready)(clock())
        code = 200 if ok else 503
        local = request.scope.get("client") is None  # the probe's unix socket
        if token is None or local or bearer_matches(request.headers.get("authorization"), token):
            return JSONResponse({"ok": ok, "status": why}, status_code=code)
        return JSONResponse({"ok": ok}, status_code=code)

    async def scrape(request: Request) -> Response:
        if token is not None and not bearer_matches(request.headers.get("authorization"), token):
            return unauthorized("bearer token required")
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/healthz", probe, methods=["GET", "HEAD"]),
        Route("/readyz", probe, methods=["GET", "HEAD"]),
        Route("/metrics", scrape, methods=["GET", "HEAD"]),
    ]
