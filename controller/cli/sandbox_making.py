"""Making a sandbox from the command line: its spec from the options, a name already in
use refused, and SIGTERM taken as Ctrl-C so that a half-made sandbox is still removed."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from types import FrameType

from controller.sandbox import Sandbox, SandboxError, SandboxSpec, SandboxUsageError, host
from controller.sandbox.samples import create_samples, with_rack_labels
from controller.sandbox.spec import SandboxExistsError, parse_duration, parse_node_assignment
from controller.sandbox.state import sandbox_dir

# What every sandbox command returns.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


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


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Let SIGTERM unwind like Ctrl-C, so a half-made sandbox is still removed."""

    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def refuse_existing(name: str) -> None:
    if sandbox_dir(name).exists():
        raise SandboxExistsError(
            f"sandbox {name!r} is already up (or was left half made): "
            f"use another --name, or 'swarm-placement sandbox down --name {name}' first"
        )


def bring_up(args: argparse.Namespace) -> Sandbox:
    spec = spec_from_args(args)
    host.check_host()
    refuse_existing(spec.name)
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
