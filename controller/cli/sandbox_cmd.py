"""`swarm-placement sandbox up|down|status|fail|restore|run`: a real swarm on this machine."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

from controller.sandbox import (
    FAILURE_MODES,
    Sandbox,
    SandboxError,
    SandboxSpec,
    SandboxUsageError,
    find_leftovers,
    host,
)
from controller.sandbox.samples import create_samples, with_rack_labels
from controller.sandbox.spec import (
    HostNotReadyError,
    SandboxExistsError,
    SandboxNotFoundError,
    parse_duration,
    parse_node_assignment,
    validate_name,
)
from controller.sandbox.state import load_state, sandbox_dir
from controller.sandbox.teardown import teardown_sandbox
from controller.sandbox.tour import play_in_background

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_NAME = "dev"
STATUS_INTERVAL_SECONDS = 10.0
CHILD_STOP_SECONDS = 30.0
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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


def spec_from_args(args: argparse.Namespace) -> SandboxSpec:
    labels: dict[str, dict[str, str]] = {}
    for text in args.label:
        node, key, value = parse_node_assignment(text)
        labels.setdefault(node, {})[key] = value
    resources: dict[str, dict[str, int]] = {}
    for text in args.resource:
        node, kind, value = parse_node_assignment(text)
        if not value.isdigit():
            raise SandboxUsageError(f"invalid {text!r}: the count must be a whole number")
        resources.setdefault(node, {})[kind] = int(value)
    if args.samples:
        labels = with_rack_labels(args.nodes, labels)
    return SandboxSpec(
        name=args.name,
        nodes=args.nodes,
        managers=args.managers,
        node_labels=labels,
        generic_resources=resources,
        heartbeat_seconds=None if args.heartbeat is None else parse_duration(args.heartbeat),
    )


def _require_root() -> None:
    if host.effective_uid() != 0:
        raise HostNotReadyError(
            "the sandbox must run as root: its daemons and files belong to root "
            "(try: sudo swarm-placement sandbox ...)"
        )


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Let SIGTERM unwind like Ctrl-C, so a half-made sandbox is still removed."""

    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _refuse_existing(name: str) -> None:
    if sandbox_dir(name).exists():
        raise SandboxExistsError(
            f"sandbox {name!r} is already up (or was left half made): "
            f"use another --name, or 'swarm-placement sandbox down --name {name}' first"
        )


def _bring_up(args: argparse.Namespace) -> Sandbox:
    spec = spec_from_args(args)
    host.check_host()
    _refuse_existing(spec.name)
    started = time.monotonic()
    print(f"sandbox: bringing {spec.name!r} up ({spec.nodes} nodes)...", file=sys.stderr)
    sandbox = Sandbox.up(spec)
    print(f"sandbox: {spec.name!r} up in {time.monotonic() - started:.1f} s", file=sys.stderr)
    if args.samples:
        try:
            create_samples(sandbox)
        except SandboxError as exc:
            raise SandboxError(
                f"{exc} (sandbox {spec.name!r} is up without all its samples; "
                f"remove it with 'swarm-placement sandbox down --name {spec.name}')"
            ) from exc
    return sandbox


def cmd_up(args: argparse.Namespace) -> int:
    try:
        with _sigterm_as_interrupt():
            sandbox = _bring_up(args)
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


def _labels_text(labels: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-"


def print_status(sandbox: Sandbox) -> None:
    state = sandbox.state
    heartbeat = f"{state.heartbeat_seconds:g}s" if state.heartbeat_seconds else "default"
    print(
        f"sandbox {state.name}: {len(state.nodes)} nodes, subnet {state.subnet}, "
        f"storage {state.storage_driver}, heartbeat {heartbeat}, image {state.image_id[:19]}"
    )
    try:
        seen = {n["hostname"]: n for n in sandbox.node_info()}
        services = sandbox.services()
    except SandboxError as exc:
        seen, services = {}, []
        print(f"  (no manager answers: {exc})")
    rows = [("NODE", "ADDR", "STATE", "AVAIL", "ROLE", "MANAGER", "FAILED", "LABELS", "RESOURCES")]
    for node in state.nodes:
        info = seen.get(node.hostname, {})
        manager = "leader" if info.get("leader") else str(info.get("reachability") or "-")
        rows.append(
            (
                node.hostname,
                node.ip,
                str(info.get("state", "?")),
                str(info.get("availability", "?")),
                str(info.get("role", "manager" if node.manager else "worker")),
                manager,
                node.failure or "-",
                _labels_text(info.get("labels", node.labels)),
                _labels_text(info.get("generic_resources", node.generic_resources)),
            )
        )
    _print_table(rows)
    if services:
        print()
        table = [("SERVICE", "MODE", "RUNNING", "LABELS")]
        for svc in services:
            running = f"{svc['running']}/{svc['replicas']}"
            table.append((svc["name"], svc["mode"], running, _labels_text(svc["labels"])))
        _print_table(table)
    sys.stdout.flush()


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())


# --- run ------------------------------------------------------------------------------------


def _controller_commands() -> set[str]:
    """The commands `python -m controller` offers now (a half-built one counts as absent)."""
    from controller.cli.main import COMMAND_MODULES  # noqa: PLC0415

    probe = argparse.ArgumentParser(add_help=False)
    sub = probe.add_subparsers()
    for name in COMMAND_MODULES:
        with contextlib.suppress(Exception):
            importlib.import_module(name).register(sub)
    return set(sub.choices or {})


def _duration_in(argv: Sequence[str]) -> float | None:
    for i, arg in enumerate(argv):
        value = None
        if arg == "--for" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--for="):
            value = arg.split("=", 1)[1]
        if value is not None:
            with contextlib.suppress(SandboxUsageError):
                return parse_duration(value)
    return None


class _Signals:
    """Record SIGINT/SIGTERM/SIGHUP and pass them on to the child, if there is one."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        for sig in FORWARDED_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        child = self.child
        if child is not None and child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGKILL if len(self.received) > 2 else signum)


def _run_child(sandbox: Sandbox, argv: list[str], signals: _Signals) -> int:
    env = dict(os.environ, DOCKER_HOST=sandbox.manager_host)
    command = [sys.executable, "-m", "controller", *argv]
    print(f"sandbox: running {' '.join(command[1:])} (DOCKER_HOST={env['DOCKER_HOST']})")
    sys.stdout.flush()
    child = subprocess.Popen(command, env=env, start_new_session=True)
    signals.child = child
    try:
        while True:
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                continue
    finally:
        signals.child = None
        if child.poll() is None:
            child.kill()
            child.wait()
    return code if code >= 0 else 128 - code


def _watch_status(sandbox: Sandbox, argv: list[str], signals: _Signals) -> int:
    limit = _duration_in(argv)
    print(
        f"sandbox: the controller command {argv[0] if argv else '(none)'!r} is not available; "
        f"showing the sandbox every {STATUS_INTERVAL_SECONDS:.0f} s"
        + (f" for {limit:g} s" if limit else " until interrupted (Ctrl-C)")
    )
    deadline = None if limit is None else time.monotonic() + limit
    while not signals.received:
        print_status(sandbox)
        print()
        sys.stdout.flush()
        next_time = time.monotonic() + STATUS_INTERVAL_SECONDS
        while not signals.received and time.monotonic() < next_time:
            if deadline is not None and time.monotonic() >= deadline:
                return EXIT_OK
            time.sleep(0.2)
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    argv = list(args.args)
    if argv and argv[0] == "--":
        argv = argv[1:]
    spec = spec_from_args(args)
    host.check_host()
    _refuse_existing(spec.name)
    owned = False  # True once this process may have made part of the sandbox
    code = EXIT_FAILED
    try:
        with _sigterm_as_interrupt():
            print(f"sandbox: bringing {spec.name!r} up ({spec.nodes} nodes)...", file=sys.stderr)
            started = time.monotonic()
            owned = True
            try:
                sandbox = Sandbox.up(spec)
            except SandboxExistsError:
                owned = False
                raise
            elapsed = time.monotonic() - started
            print(f"sandbox: {spec.name!r} up in {elapsed:.1f} s", file=sys.stderr)
            if args.samples:
                create_samples(sandbox)
        with _Signals() as signals:
            if argv and argv[0] in _controller_commands():
                stop = threading.Event()
                if args.tour and args.samples:
                    play_in_background(sandbox, _say, stop)
                try:
                    code = _run_child(sandbox, argv, signals)
                finally:
                    stop.set()
            else:
                code = _watch_status(sandbox, argv, signals)
    except KeyboardInterrupt:
        print("sandbox: interrupted", file=sys.stderr)
        code = 130
    finally:
        if owned:
            code = _down_after_run(spec.name, code)
    return code


def _say(text: str) -> None:
    print(text, flush=True)


def _down_after_run(name: str, code: int) -> int:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        print(f"sandbox: removing {name!r}...", file=sys.stderr)
        left = teardown_sandbox(name)
    finally:
        signal.signal(signal.SIGINT, previous)
    if left or find_leftovers(name):
        print(f"sandbox: {name!r} left behind {left.describe()}", file=sys.stderr)
        return code or EXIT_FAILED
    print(f"sandbox: {name!r} is down", file=sys.stderr)
    return code
