"""The node agent: one per node, with the local Docker socket, reporting over HTTP.

Two threads measure (usage every `interval`, container events as they come) and the
process's HTTP server (http_server.py; TLS with a certificate) answers `GET /v1/report`
to whoever holds the shared secret (a Docker secret in a stack) and `GET /healthz` to
anyone. The agent decides nothing: it reports, and the
controller weighs what it says. A controller that cannot reach an agent goes on without
its numbers; an agent is no judge of its node's liveness.

It is a vantage point on other nodes' liveness, though: `GET /v1/probe?address=IP` (same
secret) tries that address's gossip port from this node, the controller's indirect probe
(runtime/indirect_probes.py). Only that port, and only an IP address, so the agent is no
general connect proxy.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from controller.adapters.agent_probe import (
    ContainerEvent,
    ContainerUsage,
    EventReader,
    HostUsage,
    Identity,
    ProbeError,
    container_events,
    identity,
    service_counts,
)
from controller.adapters.agent_report import AgentEvent, AgentReport, AgentService, AgentUsage
from controller.adapters.engine import ENGINE_ERRORS, EngineClient
from controller.adapters.tcp_probe import GOSSIP_PORT, tcp_connects
from controller.runtime.http_app import make_app
from controller.runtime.http_replies import bearer_matches, problem, unauthorized
from controller.runtime.http_server import HttpServer, TlsFiles

log = logging.getLogger(__name__)
# A container-events stream that breaks: the engine away, its socket, a bad event.
EVENT_ERRORS: tuple[type[Exception], ...] = (ProbeError, *ENGINE_ERRORS, OSError)

UsageSource = Literal["host", "containers"]
MAX_EVENTS = 2000
# An indirect probe answers within this (a cut link times out, a dead dockerd refuses).
PROBE_TIMEOUT = 0.5
STOP_POLL_SECONDS = 0.2


AGENT_CONNECTIONS = 64


@dataclass(frozen=True)
class AgentConfig:
    listen: tuple[str, int]
    secret: str
    usage: UsageSource = "host"
    proc: Path = Path("/proc")
    interval: float = 5.0  # seconds between usage samples
    window: float = 60.0  # usage is averaged over this long
    keep_events: float = 3600.0  # events are reported for this long
    tls: TlsFiles | None = None  # with it, the agent speaks only TLS
    probe_socket: Path | None = None  # the container healthcheck's own listener


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        client_factory: Callable[[], EngineClient],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not config.secret:
            raise ValueError("the agent needs a shared secret")
        self.config, self._factory, self._clock = config, client_factory, clock
        self._client = client_factory()
        self.node: Identity = identity(self._client)
        self._lock = threading.Lock()
        self._samples: deque[tuple[float, float, float]] = deque()
        self._events: deque[ContainerEvent] = deque(maxlen=MAX_EVENTS)
        self._stop = threading.Event()
        # The controllers, a few scrapers: 64 connections (about 20 MiB of TLS state)
        # keep the agent well under its 128M limit (docs/operations-deploy.md).
        self._server = HttpServer(
            [config.listen],
            make_app(self.routes()),
            tls=config.tls,
            max_connections=AGENT_CONNECTIONS,
        )
        self._probe_server = (
            HttpServer([], make_app(self._health_routes()), unix=config.probe_socket)
            if config.probe_socket is not None
            else None
        )
        self.last_problem: str | None = None

    @property
    def port(self) -> int:
        return self._server.port

    def serve_forever(self, *, measure: bool = True) -> None:
        """Measure and serve until stop(), from any thread or a signal handler."""
        if measure:
            for target, name in ((self._sample_loop, "usage"), (self._event_loop, "events")):
                threading.Thread(target=target, name=f"agent-{name}", daemon=True).start()
        try:
            anyio.run(self._serve)
        finally:
            self._stop.set()
            self._server.close()
            if self._probe_server is not None:
                self._probe_server.close()

    async def _serve(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._server.run)
            if self._probe_server is not None:
                tg.start_soon(self._probe_server.run)
            # A flag, not a call into the loop: stop() may come from a signal handler
            # running on the loop's own thread.
            while not self._stop.is_set():
                await anyio.sleep(STOP_POLL_SECONDS)
            tg.cancel_scope.cancel()

    def stop(self) -> None:
        self._stop.set()

    # --- measuring ----------------------------------------------------------------------

    def _sample_loop(self) -> None:
        meter: HostUsage | ContainerUsage = (
            HostUsage(self.config.proc)
            if self.config.usage == "host"
            else ContainerUsage(self._client, self.node)
        )
        while not self._stop.is_set():
            try:
                sample = meter.sample()
            except ProbeError as exc:
                self.last_problem = str(exc)
                log.warning("usage: %s", exc)
                sample = None
            except Exception as exc:  # a sampler that dies would leave the node unmeasured
                self.last_problem = f"usage: {exc!r}"
                log.exception("usage: unexpected failure, sampling again")
                sample = None
            now = self._clock()
            with self._lock:
                if sample is not None:
                    self._samples.append((now, *sample))
                while self._samples and now - self._samples[0][0] > self.config.window:
                    self._samples.popleft()
            self._stop.wait(self.config.interval)

    def _event_loop(self) -> None:
        reader, since, backoff = EventReader(), self._clock(), 0.5
        while not self._stop.is_set():
            try:
                client = self._factory()
                for raw in container_events(client, since):
                    if self._stop.is_set():
                        return
                    since = float(raw.get("timeNano") or 0) / 1e9 or since
                    event = reader.read(raw)
                    if event is not None:
                        with self._lock:
                            self._events.append(event)
                backoff = 0.5
            except EVENT_ERRORS as exc:
                self.last_problem = f"events: {exc}"
                log.warning("container events: %s", exc)
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 10.0)

    # --- reporting ----------------------------------------------------------------------

    def probe(self, address: str) -> dict[str, Any]:
        """Whether this node reaches `address`'s gossip port (ValueError: not an IP)."""
        target = str(ipaddress.ip_address(address))
        started = time.monotonic()
        reachable = tcp_connects(target, GOSSIP_PORT, PROBE_TIMEOUT)
        return {
            "node_id": self.node.node_id,
            "hostname": self.node.hostname,
            "address": target,
            "port": GOSSIP_PORT,
            "reachable": reachable,
            "seconds": round(time.monotonic() - started, 3),
        }

    def report(self) -> dict[str, Any]:
        now = self._clock()
        with self._lock:
            samples = list(self._samples)
            events = [e for e in self._events if now - e.at <= self.config.keep_events]
        usage = None
        if samples:
            usage = AgentUsage(
                cpu=sum(s[1] for s in samples) / len(samples),
                memory=sum(s[2] for s in samples) / len(samples),
                window=self.config.window,
                samples=len(samples),
                source=self.config.usage,
            )
        services: dict[str, AgentService] = {}
        try:
            counts = service_counts(self._client)
        except ProbeError as exc:
            counts, self.last_problem = {}, str(exc)
        for service_id, counted in counts.items():
            services[service_id] = AgentService(**counted)
        for event in events:
            entry = services.setdefault(event.service_id, AgentService(name=event.service_name))
            if event.kind == "unhealthy":
                entry.unhealthy_events += 1
            else:
                entry.restarts += 1
        return AgentReport(
            node_id=self.node.node_id,
            hostname=self.node.hostname,
            at=now,
            usage=usage,
            services=services,
            events=[
                AgentEvent(
                    task=e.task_id, service=e.service_id, kind=e.kind, at=e.at, detail=e.detail
                )
                for e in events
            ],
        ).model_dump(mode="json")

    # --- serving ------------------------------------------------------------------------

    def _health_routes(self) -> list[Route]:
        return [Route("/healthz", self._healthz, methods=["GET", "HEAD"])]

    def routes(self) -> list[Route]:
        return [
            *self._health_routes(),
            Route("/v1/report", self._report, methods=["GET"]),
            Route("/v1/probe", self._probe, methods=["GET"]),
        ]

    async def _healthz(self, request: Request) -> Response:
        return JSONResponse({"ok": True, "node": self.node.hostname})

    def _authorized(self, request: Request) -> bool:
        return bearer_matches(request.headers.get("authorization"), self.config.secret)

    async def _report(self, request: Request) -> Response:
        if not self._authorized(request):
            return unauthorized("missing or wrong bearer token")
        try:  # it asks the local engine: off the loop
            return JSONResponse(await anyio.to_thread.run_sync(self.report))
        except Exception:  # one bad report must not take the agent down
            log.exception("report failed")
            return problem(500, "internal error")

    async def _probe(self, request: Request) -> Response:
        if not self._authorized(request):
            return unauthorized("missing or wrong bearer token")
        addresses = request.query_params.getlist("address")
        if len(addresses) != 1:
            return problem(400, "address: give exactly one, e.g. ?address=10.0.0.5")
        try:
            return JSONResponse(await anyio.to_thread.run_sync(self.probe, addresses[0]))
        except ValueError:
            return problem(400, f"address: {addresses[0]!r} is not an IP address")
