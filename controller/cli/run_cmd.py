"""`swarm-placement run`: the controller itself."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from controller.adapters.docker_api import DockerUnavailableError, NotAManagerError
from controller.adapters.policy_file import PolicyFileError
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.policy_source import PolicySource

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
TRUE_WORDS = {"1", "true", "yes", "on"}


def _env(name: str, default: Any = None) -> Any:
    return os.environ.get(f"PLACEMENT_{name}", default)


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
    parser.add_argument("--policy", type=Path, default=_env("POLICY"), help="policy file (YAML)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        default=str(_env("DRY_RUN", "")).lower() in TRUE_WORDS,
        help="print the plan, write nothing",
    )
    parser.add_argument("--once", action="store_true", help="run one reconcile cycle and exit")
    parser.add_argument(
        "--for",
        dest="duration",
        type=float,
        default=_env("FOR"),
        metavar="SECONDS",
        help="stop after this many seconds",
    )
    parser.add_argument(
        "--resync",
        type=float,
        default=_env("RESYNC"),
        metavar="SECONDS",
        help="task poll interval (default: the policy's controller.resync-interval)",
    )
    parser.add_argument(
        "--trace-exporter",
        choices=("none", "console", "otlp"),
        default=_env("TRACE_EXPORTER", "none"),
        help="where spans go; otlp is configured by the standard OTEL_* variables",
    )
    parser.add_argument(
        "--log-format", choices=("logfmt", "json"), default=_env("LOG_FORMAT", "logfmt")
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s"
    )
    try:
        policy = PolicySource(args.policy)
    except PolicyFileError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        print(f"run: the policy {args.policy} is invalid; nothing was touched", file=sys.stderr)
        return EXIT_USAGE
    config = RunConfig(
        policy_path=args.policy,
        dry_run=args.dry_run,
        once=args.once,
        duration=float(args.duration) if args.duration is not None else None,
        resync_seconds=float(args.resync) if args.resync is not None else None,
        exporter=args.trace_exporter,
        log_format=args.log_format,
    )
    controller = Controller(config, policy)
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
    return EXIT_OK
