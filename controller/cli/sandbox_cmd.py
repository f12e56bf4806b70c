"""`swarm-placement sandbox up|down|status|fail|restore|run`: a real swarm on this machine."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from controller.cli.sandbox_making import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    bring_up,
    sigterm_as_interrupt,
)
from controller.cli.sandbox_run import cmd_run
from controller.cli.sandbox_status import print_status
from controller.sandbox import (
    FAILURE_MODES,
    Sandbox,
    SandboxError,
    SandboxUsageError,
    host,
)
from controller.sandbox.spec import (
    HostNotReadyError,
    SandboxNotFoundError,
    validate_name,
)
from controller.sandbox.state import load_state
from controller.sandbox.teardown import teardown_sandbox

DEFAULT_NAME = "dev"
CHILD_STOP_SECONDS = 30.0


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "sandbox",
        help="a real multi-node swarm on this machine (root)",
        description=(
            "Run several dockerd in network namespaces of this machine and join them into "
            "one swarm, to try the controller on a real swarm and to break its nodes."
        ),
    )
    commands = parser.add_subparsers(dest="sandbox_command", metavar="SANDBOX_COMMAND")
    parser.set_defaults(handler=lambda _args: _usage(parser))

    up = commands.add_parser("up", help="bring a sandbox swarm up")
    _add_name(up)
    _add_up_options(up)
    up.set_defaults(handler=_guarded(cmd_up))

    down = commands.add_parser("down", help="remove a sandbox and everything it made")
    _add_name(down)
    down.set_defaults(handler=_guarded(cmd_down))

    status = commands.add_parser("status", help="nodes and services of a sandbox")
    _add_name(status)
    status.set_defaults(handler=_guarded(cmd_status))

    fail = commands.add_parser("fail", help="crash, stop or partition one node")
    _add_name(fail)
    fail.add_argument("node", help="node hostname, e.g. node-3")
    fail.add_argument("--mode", choices=FAILURE_MODES, default="crash")
    fail.set_defaults(handler=_guarded(cmd_fail))

    restore = commands.add_parser("restore", help="bring a failed node back")
    _add_name(restore)
    restore.add_argument("node", help="node hostname, e.g. node-3")
    restore.set_defaults(handler=_guarded(cmd_restore))

    run = commands.add_parser(
        "run",
        help="up, run `python -m controller ARGS...` against it, then down",
        description=(
            "Bring a sandbox up, run the controller command after `--` with DOCKER_HOST set "
            "to a manager, and always remove the sandbox at the end (Ctrl-C included)."
        ),
    )
    _add_name(run)
    _add_up_options(run)
    run.add_argument(
        "--tour",
        action="store_true",
        help="with --samples: play a narrated failover, failback and preemption beside it",
    )
    run.add_argument("args", nargs=argparse.REMAINDER, help="-- then the controller command")
    run.set_defaults(handler=_guarded(cmd_run))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _add_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default=DEFAULT_NAME, help="sandbox name (default: dev)")


def _add_up_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    parser.add_argument("--managers", type=int, default=1, choices=(1, 3))
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="NODE:KEY=VALUE",
        help="node label, e.g. node-1:rack=r1 (repeatable)",
    )
    parser.add_argument(
        "--resource",
        action="append",
        default=[],
        metavar="NODE:KIND=N",
        help="generic resource of a node's dockerd, e.g. node-2:slot=2 (repeatable)",
    )
    parser.add_argument(
        "--heartbeat", default=None, help="dispatcher heartbeat, e.g. 1s (default: Swarm's 5s)"
    )
    parser.add_argument(
        "--samples", action="store_true", help="rack labels and sample services after up"
    )


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn sandbox errors into a one-line message and an exit code."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except SandboxUsageError as exc:
            print(f"sandbox: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except SandboxError as exc:
            print(f"sandbox: {exc}", file=sys.stderr)
            return EXIT_FAILED

    return run


def _require_root() -> None:
    if host.effective_uid() != 0:
        raise HostNotReadyError(
            "the sandbox must run as root: its daemons and files belong to root "
            "(try: sudo swarm-placement sandbox ...)"
        )


def cmd_up(args: argparse.Namespace) -> int:
    try:
        with sigterm_as_interrupt():
            sandbox = bring_up(args)
    except KeyboardInterrupt:
        print("sandbox: interrupted; what was made is removed", file=sys.stderr)
        return 130
    print_status(sandbox)
    print(f"\nexport DOCKER_HOST={sandbox.manager_host}")
    return EXIT_OK


def cmd_down(args: argparse.Namespace) -> int:
    validate_name(args.name)
    _require_root()
    try:
        load_state(args.name)
    except SandboxNotFoundError:
        print(f"sandbox: no sandbox named {args.name!r} is recorded", file=sys.stderr)
    except SandboxError as exc:
        print(f"sandbox: {exc}; removing what the name points to", file=sys.stderr)
    left = teardown_sandbox(args.name)
    if left:
        print(f"sandbox: {args.name!r} left behind {left.describe()}", file=sys.stderr)
        return EXIT_FAILED
    print(f"sandbox: {args.name!r} is down", file=sys.stderr)
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    validate_name(args.name)
    _require_root()
    print_status(Sandbox.load(args.name))
    return EXIT_OK


def cmd_fail(args: argparse.Namespace) -> int:
    validate_name(args.name)
    host.check_host()
    sandbox = Sandbox.load(args.name)
    sandbox.fail(args.node, args.mode)
    print(f"sandbox: {args.node} failed ({args.mode})", file=sys.stderr)
    return EXIT_OK


def cmd_restore(args: argparse.Namespace) -> int:
    validate_name(args.name)
    host.check_host()
    sandbox = Sandbox.load(args.name)
    sandbox.restore(args.node)
    print(f"sandbox: {args.node} restored; it rejoins the swarm by itself", file=sys.stderr)
    return EXIT_OK
