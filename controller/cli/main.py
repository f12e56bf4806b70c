"""Entry point of `swarm-placement` and `python -m controller`.

Each command group lives in its own module exposing `register(subparsers)`; the
module sets `handler` on its parser and the handler returns the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from controller import __version__

# Command-group modules, imported lazily so `policy check` never loads docker.
COMMAND_MODULES = (
    "controller.cli.sandbox_cmd",
    "controller.cli.run_cmd",
    "controller.cli.policy_cmd",
    "controller.cli.start_cmd",
    "controller.cli.release_cmd",
    "controller.cli.plan_cmd",
    "controller.cli.status_cmd",
    "controller.cli.explain_cmd",
    "controller.cli.snapshot_cmd",
    "controller.cli.simulate_cmd",
    "controller.cli.agent_cmd",
    "controller.cli.image_cmd",
)

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swarm-placement",
        description="Placement policy for Docker Swarm.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):
        parser.print_help()  # asked for nothing: what there is to ask, as docker does
        return 0
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    code: int = handler(args)
    return code
