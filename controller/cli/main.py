"""Entry point of `swarm-placement` and `python -m controller`.

Each command group lives in its own module exposing `register(subparsers)`; the
module sets `handler` on its parser and the handler returns the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import argcomplete

from controller import __version__

# Command-group modules, imported lazily so `policy check` never loads docker; listed in
# the help by group, the operator's commands first.
GROUPS = (
    (
        "commands",
        (
            "run",
            "status",
            "plan",
            "explain",
            "policy",
            "start",
            "release",
            "snapshot",
            "simulate",
            "completion",
        ),
    ),
    ("parts of the stack", ("agent", "reference-plugin")),
    ("sandbox swarm and image (a local test swarm, root)", ("sandbox", "image")),
)
COMMAND_MODULES = (
    "controller.cli.run_cmd",
    "controller.cli.status_cmd",
    "controller.cli.plan_cmd",
    "controller.cli.explain_cmd",
    "controller.cli.policy_cmd",
    "controller.cli.start_cmd",
    "controller.cli.release_cmd",
    "controller.cli.snapshot_cmd",
    "controller.cli.simulate_cmd",
    "controller.cli.completion_cmd",
    "controller.cli.agent_cmd",
    "controller.cli.sandbox_cmd",
    "controller.cli.image_cmd",
)

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swarm-placement",
        description="Placement policy for Docker Swarm.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # The commands are listed by group in the epilog instead of argparse's one list.
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    # Set after the subcommands took their own prefix from the parser (`swarm-placement`).
    parser.usage = "%(prog)s [-h] [--version] COMMAND ..."
    parser.epilog = _grouped({a.dest: a.help or "" for a in subparsers._choices_actions})
    return parser


def _grouped(helps: dict[str, str]) -> str:
    listed = {name for _, names in GROUPS for name in names}
    assert listed == set(helps), f"commands missing from GROUPS: {set(helps) ^ listed}"
    width = max(len(n) for n in helps) + 2
    return (
        "\n\n".join(
            title + ":\n" + "\n".join(f"  {name:<{width}}{helps[name]}" for name in names)
            for title, names in GROUPS
        )
        + "\n\nswarm-placement COMMAND --help says more."
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argcomplete.autocomplete(parser)  # answers only when the shell asks (_ARGCOMPLETE)
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
