"""`swarm-placement run`: the controller itself."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import ssl
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from controller.adapters.engine import DockerUnavailableError, NotAManagerError
from controller.adapters.policy_file import PolicyFileError
from controller.cli.env_options import option, switch
from controller.cli.health_opts import add_health_arguments, health_config, read_secret
from controller.cli.tls_opts import tls_files
from controller.runtime.http_server import parse_address
from controller.runtime.lease_keeper import DEFAULT_LIFETIME_SECONDS, LeaseConfig
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.policy_source import PolicySource

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
LEGACY_LEASE_VARIABLE = "PLACEMENT_LEASE_SERVICE"


EXPORTERS = ("none", "console", "otlp")


def otel_exporter(env: Mapping[str, str]) -> str:
    """OpenTelemetry's own OTEL_TRACES_EXPORTER (a list: the first we know), else none."""
    for name in env.get("OTEL_TRACES_EXPORTER", "").split(","):
        if name.strip() in EXPORTERS:
            return name.strip()
    return "none"


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run the controller against the swarm at DOCKER_HOST",
        description=(
            "Watch the swarm, plan from the policy and reconcile. The Docker endpoint comes "
            "from DOCKER_HOST and the other standard Docker variables; every option also "
            "reads a PLACEMENT_* variable (PLACEMENT_POLICY, PLACEMENT_DRY_RUN, ...)."
        ),
    )
    option(parser, "--policy", env="POLICY", type=Path, metavar="FILE", help="policy file (YAML)")
    switch(parser, "--dry-run", env="DRY_RUN", help="print the plan, write nothing")
    parser.add_argument("--once", action="store_true", help="run one reconcile cycle and exit")
    option(
        parser,
        "--for",
        env="FOR",
        dest="duration",
        type=float,
        what="seconds",
        metavar="SECONDS",
        help="stop after this many seconds",
    )
    option(
        parser,
        "--resync",
        env="RESYNC",
        type=float,
        what="seconds",
        metavar="SECONDS",
        help="task poll interval (default: the policy's controller.resync-interval)",
    )
    option(
        parser,
        "--trace-exporter",
        env="TRACE_EXPORTER",
        choices=EXPORTERS,
        default=otel_exporter(os.environ),
        help=(
            "where spans go (default: $OTEL_TRACES_EXPORTER, else none); otlp over gRPC or "
            "HTTP as $OTEL_EXPORTER_OTLP_PROTOCOL says, configured by the OTEL_* variables"
        ),
    )
    option(
        parser,
        "--log-format",
        env="LOG_FORMAT",
        choices=("logfmt", "json"),
        default="logfmt",
        help="how decisions are printed",
    )
    ha = parser.add_argument_group(
        "running as a swarm service",
        "Several replicas share one leader lease, kept in the labels of the Docker config "
        "named by --lease-name (created when missing); only the holder writes. Without it "
        "the controller assumes it is the only one.",
    )
    option(
        ha,
        "--lease-name",
        env="LEASE_NAME",
        metavar="NAME",
        help="the lease's config, one for all replicas (stack: {{.Service.Name}}-lease)",
    )
    # The lease used to live on the controller's service: refuse the old setting rather
    # than run without a lease beside replicas that share one.
    ha.add_argument(
        "--lease-service",
        default=os.environ.get(LEGACY_LEASE_VARIABLE) or None,
        help=argparse.SUPPRESS,
    )
    option(
        ha,
        "--lease-holder",
        env="LEASE_HOLDER",
        default=f"{socket.gethostname()}-{os.getpid()}",
        metavar="NAME",
        help="this replica's name in the lease (default: hostname-pid)",
    )
    option(
        ha,
        "--lease-lifetime",
        env="LEASE_LIFETIME",
        type=float,
        what="seconds",
        default=DEFAULT_LIFETIME_SECONDS,
        metavar="SECONDS",
        help="a silent holder is replaced this long after its last renewal (15)",
    )
    option(
        ha,
        "--http",
        env="HTTP",
        metavar="HOST:PORT",
        help=(
            "serve /healthz, /readyz, /metrics and the web view /ui here (e.g. :9464); "
            "off by default; the web view is served nowhere else"
        ),
    )
    option(
        ha,
        "--metrics-token-file",
        env="METRICS_TOKEN_FILE",
        type=Path,
        metavar="FILE",
        help="a file (a Docker secret) whose token /metrics requires as a bearer token",
    )
    web = parser.add_argument_group(
        "HTTP server",
        "One server answers every path (--http, and --health-listen for the webhook). With a "
        "certificate and key it speaks only TLS; with a client CA too, it wants every "
        "client's certificate (mutual TLS).",
    )
    option(
        web,
        "--tls-cert-file",
        env="TLS_CERT_FILE",
        type=Path,
        metavar="FILE",
        help="the server's certificate chain (PEM), e.g. a Docker secret",
    )
    option(
        web,
        "--tls-key-file",
        env="TLS_KEY_FILE",
        type=Path,
        metavar="FILE",
        help="the server's private key (PEM)",
    )
    option(
        web,
        "--tls-client-ca-file",
        env="TLS_CLIENT_CA_FILE",
        type=Path,
        metavar="FILE",
        help="require client certificates signed by this CA (PEM)",
    )
    option(
        web,
        "--probe-socket",
        env="PROBE_SOCKET",
        type=Path,
        metavar="FILE",
        help=(
            "also answer /healthz and /readyz on this unix socket, for the container "
            "healthcheck: no network client can reach or crowd it (the image sets it)"
        ),
    )
    switch(web, "--no-ui", env="NO_UI", help="do not serve the web view at /ui")
    option(
        web,
        "--ui-token-file",
        env="UI_TOKEN_FILE",
        type=Path,
        metavar="FILE",
        help=(
            "a file (a Docker secret) whose token logs a browser in to the web view at "
            "/ui/login; without it the controller makes one and prints the login link "
            "(asked under mutual TLS too: the client certificate opens the port only)"
        ),
    )
    option(
        web,
        "--ui-hosts",
        env="UI_HOSTS",
        metavar="NAME,NAME",
        help=(
            "host names the web view answers to, besides IP addresses and localhost "
            "(e.g. placement.example.com); any other Host is refused (DNS rebinding)"
        ),
    )
    option(
        web,
        "--trace-url",
        env="TRACE_URL",
        metavar="URL",
        help="a trace in your tracing UI, {trace_id} in it: the web view links decisions there",
    )
    add_health_arguments(parser)
    parser.set_defaults(handler=run)


def _service_options(args: argparse.Namespace) -> dict[str, Any]:
    """The lease, the endpoint and the token; ValueError says which is wrong."""
    out: dict[str, Any] = {}
    if args.lease_service:
        raise ValueError(
            f"--lease-service (${LEGACY_LEASE_VARIABLE}) is gone: the lease lives in a "
            "config of its own now, so that no service is written for it; set --lease-name "
            "($PLACEMENT_LEASE_NAME) instead, e.g. {{.Service.Name}}-lease in a stack "
            "(docs/operations-deploy.md)"
        )
    if args.lease_name and args.once and not args.dry_run:
        raise ValueError(
            "--once cannot keep a lease, and writing without one could race the "
            "running controllers: add --dry-run, or drop --lease-name"
        )
    if args.lease_name and not args.once:
        out["lease"] = LeaseConfig(
            name=args.lease_name,
            holder=args.lease_holder,
            lifetime=float(args.lease_lifetime),
        )
    if args.http:
        out["http"] = parse_address(str(args.http))
    out["tls"] = tls_files(args)
    out["probe_socket"] = args.probe_socket
    out["ui"] = not args.no_ui
    if args.ui_token_file:
        out["ui_token"] = read_secret(Path(args.ui_token_file), "web view token")
    out["ui_hosts"] = tuple(h.strip() for h in (args.ui_hosts or "").split(",") if h.strip())
    if args.trace_url:
        if "{trace_id}" not in args.trace_url:
            raise ValueError(f"--trace-url {args.trace_url!r} has no {{trace_id}} in it")
        out["trace_url"] = str(args.trace_url)
    if args.metrics_token_file:
        out["metrics_token"] = read_secret(Path(args.metrics_token_file), "metrics token")
    return out


class JsonLines(logging.Formatter):
    """Library and controller warnings as JSON lines, like the decision log's."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "msg": record.getMessage(),
            "logger": record.name,
        }
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line)


def _logging(log_format: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonLines() if log_format == "json" else logging.Formatter("%(levelname)s %(message)s")
    )
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


def run(args: argparse.Namespace) -> int:
    _logging(args.log_format)
    try:
        policy = PolicySource(args.policy)
    except PolicyFileError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        print(f"run: the policy {args.policy} is invalid; nothing was touched", file=sys.stderr)
        return EXIT_USAGE
    try:
        service_options = _service_options(args)
        service_options["health"] = health_config(args)
    except ValueError as exc:
        print(f"run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    config = RunConfig(
        policy_path=args.policy,
        dry_run=args.dry_run,
        once=args.once,
        duration=float(args.duration) if args.duration is not None else None,
        resync_seconds=float(args.resync) if args.resync is not None else None,
        exporter=args.trace_exporter,
        log_format=args.log_format,
        **service_options,
    )
    try:
        controller = Controller(config, policy)
    except ssl.SSLError as exc:
        print(f"run: cannot use the TLS certificate and key: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        where = f"{args.http} or {args.health_listen}" if args.health_listen else args.http
        print(f"run: cannot listen on {where}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        anyio.run(controller.run)
    except NotAManagerError as exc:
        print(f"run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DockerUnavailableError as exc:
        print(f"run: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        pass
    if controller.reconciler is None and not args.once:
        # Stopped (--for, a signal) before the engine ever answered: nothing was done.
        print(
            f"run: never reached the Docker engine: {controller.health.last_error or 'no answer'}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK
