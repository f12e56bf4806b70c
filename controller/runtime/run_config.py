"""How the controller runs: what `swarm-placement run` passes it, one frozen value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from controller.runtime.health_inputs import HealthConfig
from controller.runtime.http_server import TlsFiles
from controller.runtime.lease_keeper import LeaseConfig
from controller.runtime.tracing import Exporter, LogFormat


@dataclass(frozen=True)
class RunConfig:
    policy_path: Path | None = None
    dry_run: bool = False
    once: bool = False
    duration: float | None = None
    resync_seconds: float | None = None  # None: the policy's resync interval
    exporter: Exporter = "none"
    log_format: LogFormat = "logfmt"
    lease: LeaseConfig | None = None  # None: a single instance, always the writer
    http: tuple[str, int] | None = None  # where the HTTP server listens (http_app.py)
    metrics_token: str | None = None  # with it, /metrics wants this bearer token
    health: HealthConfig | None = None  # webhook, placement plugins, node agents
    tls: TlsFiles | None = None  # the HTTP server's certificate (and client CA)
    ui: bool = True  # the web view at /ui
    ui_token: str | None = None  # None: one is made at start, and its login link said
    ui_hosts: tuple[str, ...] = ()  # host names the view answers to, beyond IP addresses
    # The container healthcheck's own listener (a unix socket no network client reaches).
    probe_socket: Path | None = None
    trace_url: str | None = None  # a trace in the OTLP backend's UI, {trace_id} in it
