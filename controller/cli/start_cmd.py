"""`swarm-placement start SERVICE`: bring a held priority-`none` service back."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from controller.adapters.docker_read import ServiceNotFoundError
from controller.adapters.engine import (
    ConflictError,
    DockerUnavailableError,
    NotAManagerError,
    check_manager,
    connect,
)
from controller.adapters.start import InRolloutError, NothingToStartError, start_service

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "start",
        help="start a held priority-none service again",
        description=(
            "A service with placement.priority=none is not failed over: replicas lost with a "
            "node are scaled away and its count is recorded on the service. This puts the "
            "recorded count back (one version-checked write) and removes the record. It "
            "writes nothing while Swarm rolls an update or rollback of the service, or has "
            "paused one (a write would restart or resume it). It is the operator's word, "
            "like docker service scale: it needs no controller's lease, and a running "
            "controller plans from what it leaves. The Docker endpoint comes from "
            "DOCKER_HOST; it must be a manager. Exit 0: started; 1: in a rollout, the "
            "service kept changing, or the engine failed; 2: no such service, nothing to "
            "start, or not a manager."
        ),
    )
    parser.add_argument("service", metavar="SERVICE", help="service name or ID")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        client = connect()
        check_manager(client)
        started = start_service(client, args.service)
    except (ServiceNotFoundError, NothingToStartError, NotAManagerError) as exc:
        print(f"start: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConflictError as exc:
        print(f"start: the service kept changing, try again: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except InRolloutError as exc:
        print(f"start: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except DockerUnavailableError as exc:
        print(f"start: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"started {started.name}: replicas {started.before} -> {started.after}")
    return EXIT_OK
