"""`swarm-placement snapshot save FILE`: record the live cluster for `simulate`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from controller.adapters.engine import DockerUnavailableError
from controller.adapters.snapshot_file import record_cluster, save_snapshot
from controller.cli.swarm_access import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    connect_manager,
)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "snapshot",
        help="record the live cluster (nodes, services, tasks) as JSON",
        description="Work with cluster snapshots, the input of `simulate`.",
    )
    commands = parser.add_subparsers(dest="snapshot_command", metavar="SUBCOMMAND")
    parser.set_defaults(handler=lambda args: _usage(parser))
    save = commands.add_parser(
        "save",
        help="record the swarm at DOCKER_HOST into FILE",
        description=(
            "Record the nodes, services and the tasks Swarm wants running, as the Docker API "
            "returns them (the controller's own observation), and the swarm's heartbeat "
            "period, into FILE as JSON. No join token or other secret is read."
        ),
    )
    save.add_argument("file", type=Path, metavar="FILE")
    save.set_defaults(handler=run_save)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def run_save(args: argparse.Namespace) -> int:
    try:
        client = connect_manager("snapshot save")
        try:
            document = record_cluster(client)
        finally:
            client.close()
        save_snapshot(args.file, document)
    except CommandError as exc:
        return exc.report()
    except DockerUnavailableError as exc:
        print(f"snapshot save: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        print(f"snapshot save: cannot write {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    print(
        f"saved {len(document['nodes'])} nodes, {len(document['services'])} services and "
        f"{len(document['tasks'])} tasks to {args.file}"
    )
    return EXIT_OK
