"""`sandbox run`: a sandbox brought up, a controller command run against it (or its status
shown every few seconds when the command is not there yet), and the sandbox removed."""

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
from collections.abc import Sequence
from types import FrameType
from typing import Any

from controller.cli.sandbox_making import (
    EXIT_FAILED,
    EXIT_OK,
    refuse_existing,
    sigterm_as_interrupt,
    spec_from_args,
)
from controller.cli.sandbox_status import print_status
from controller.sandbox import Sandbox, SandboxUsageError, find_leftovers, host
from controller.sandbox.samples import create_samples
from controller.sandbox.spec import SandboxExistsError, parse_duration
from controller.sandbox.teardown import teardown_sandbox
from controller.sandbox.tour import play_in_background

STATUS_INTERVAL_SECONDS = 10.0
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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
    refuse_existing(spec.name)
    owned = False  # True once this process may have made part of the sandbox
    code = EXIT_FAILED
    try:
        with sigterm_as_interrupt():
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
