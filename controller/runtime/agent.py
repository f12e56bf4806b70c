"""The node agent: one per node, with the local Docker socket, reporting over HTTP.

Two threads measure (usage every `interval`, container events as they come) and one
HTTP server answers `GET /v1/report` to whoever holds the shared secret (a Docker secret
in a stack) and `GET /healthz` to anyone. The agent decides nothing: it reports, and the
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
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

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
from controller.adapters.docker_api import ENGINE_ERRORS, EngineClient
from controller.adapters.tcp_probe import GOSSIP_PORT, tcp_connects
from controller.runtime.http_replies import JsonHandler, bearer_matches

log = logging.getLogger(__name__)
# A container-events stream that breaks: the engine away, its socket, a bad event.
EVENT_ERRORS: tuple[type[Exception], ...] = (ProbeError, *ENGINE_ERRORS, OSError)

UsageSource = Literal["host", "containers"]
MAX_EVENTS = 2000
# An indirect probe answers within this (a cut link times out, a dead dockerd refuses).
PROBE_TIMEOUT = 0.5


@dataclass(frozen=True)
class AgentConfig:
    listen: tuple[str, int]
    secret: str
    usage: UsageSource = "host"
    proc: Path = Path("/proc")
    interval: float = 5.0  # seconds between usage samples
    window: float = 60.0  # usage is averaged over this long
    keep_events: float = 3600.0  # events are reported for this long


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
        handler = type("Handler", (_Handler,), {"agent": self})
        self._server = ThreadingHTTPServer(config.listen, handler)
        self._server.daemon_threads = True
        self.last_problem: str | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def serve_forever(self) -> None:
        """Measure and serve until stop() (or a signal in the main thread)."""
        threads = [
            threading.Thread(target=self._sample_loop, name="agent-usage", daemon=True),
            threading.Thread(target=self._event_loop, name="agent-events", daemon=True),
        ]
        for thread in threads:
            thread.start()
        try:
            self._server.serve_forever()
        finally:
            self._stop.set()
            self._server.server_close()

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()

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


class _Handler(JsonHandler):
    agent: Agent
    server_version = realm = "swarm-placement-agent"

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/healthz":
            self.reply(200, {"ok": True, "node": self.agent.node.hostname})
            return
        if path not in ("/v1/report", "/v1/probe"):
            self.reply(404, {"error": f"no such path {path}"})
            return
        if not bearer_matches(self.headers.get("Authorization"), self.agent.config.secret):
            self.reply(401, {"error": "missing or wrong bearer token"})
            return
        if path == "/v1/probe":
            self._probe()
            return
        try:
            self.reply(200, self.agent.report())
        except Exception:  # one bad report must not take the agent down
            log.exception("report failed")
            self.reply(500, {"error": "internal error"})

    def _probe(self) -> None:
        query = parse_qs(urlsplit(self.path).query)
        addresses = query.get("address", [])
        if len(addresses) != 1:
            self.reply(400, {"error": "address: give exactly one, e.g. ?address=10.0.0.5"})
            return
        try:
            self.reply(200, self.agent.probe(addresses[0]))
        except ValueError:
            self.reply(400, {"error": f"address: {addresses[0]!r} is not an IP address"})
