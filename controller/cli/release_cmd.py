"""`swarm-placement release SERVICE | --all [--dry-run]`: take back what the controller wrote."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

import docker.errors

from controller.adapters.attrs import AttrsError
from controller.adapters.docker_read import ServiceNotFoundError
from controller.adapters.engine import (
    DockerUnavailableError,
    NotAManagerError,
    TransientError,
    check_manager,
    connect,
)
from controller.adapters.release_run import DockerSwarm, Releaser, live_leases

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "release",
        help="take back what the controller wrote on a service, or everywhere (uninstall)",
        description=(
            "Takes back what the controller wrote: on the service, its constraints (the "
            "steering and possible-owner constraints, the node.id!= exclusions it recorded), "
            "its swarm-placement.* labels, and a replica count it changed (the operator's "
            "recorded count is put back); with --all, that on every service, then on every "
            "node its swarm-placement.* labels and a pause it recorded (never an operator's "
            "pause or drain). The operator's constraints, labels and everything else stay. "
            "Constraints go before the node marks they need, so no task stops. One decision "
            "line per write, each version-checked. A running controller adopts its services "
            "again: to uninstall, remove the controller's stack first, then run release "
            "--all (it refuses while a controller's leader lease is live). The Docker "
            "endpoint comes from DOCKER_HOST; it must be a manager. "
            "Exit 0: all released; 1: something was left (the lines say what) or the engine "
            "failed; 2: no such service, not a manager, or a usage error."
        ),
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("service", metavar="SERVICE", nargs="?", help="service name or ID")
    target.add_argument("--all", action="store_true", help="every service and every node")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the writes it would make; write nothing"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        client = connect()
        check_manager(client)
    except NotAManagerError as exc:
        print(f"release: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DockerUnavailableError as exc:
        print(f"release: {exc}", file=sys.stderr)
        return EXIT_FAILED
    releaser = Releaser(swarm=DockerSwarm(client), dry_run=args.dry_run, say=print)
    try:
        leases = live_leases(client, datetime.now(UTC))
        if leases and args.all and not args.dry_run:
            print(
                "release: a controller seems to be running (" + "; ".join(leases) + "): it "
                "would adopt the services again; remove its stack first, then run release "
                "--all (a crashed one's lease lapses within its lifetime and a minute)",
                file=sys.stderr,
            )
            return EXIT_FAILED
        if leases:
            print(
                f"release: note, a controller holds a lease: {'; '.join(leases)}", file=sys.stderr
            )
        if args.all:
            releaser.everything()
        else:
            released = releaser.service(args.service)
            if not releaser.reported:
                print(f"release: nothing of the controller's on service {released.name}")
    except ServiceNotFoundError as exc:
        print(f"release: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (AttrsError, DockerUnavailableError, TransientError, docker.errors.APIError) as exc:
        print(f"release: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        client.close()
    if not releaser.complete:
        print("release: not everything was released (see the lines above)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
