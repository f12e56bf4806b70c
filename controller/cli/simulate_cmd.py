"""`swarm-placement simulate`: what a scenario would do to a recorded cluster, and why.

The planner (the controller's own `plan()`) runs against a simulated swarm that follows
Swarm's scheduler and orchestrators (controller/core/simulate). Prints the timeline of
node changes, placements, decisions and writes, then the placement before and after.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.adapters.snapshot_file import LoadedSnapshot, SnapshotFileError, load_snapshot
from controller.cli.env_options import add_policy_argument
from controller.cli.output import add_output_option, emit
from controller.cli.render import change
from controller.cli.swarm_access import EXIT_OK, EXIT_USAGE, CommandError
from controller.cli.swarm_access import load_policy as _load_policy
from controller.core.simulate import (
    DEFAULT_TICK,
    VERBS,
    ScenarioError,
    Simulation,
    SwarmTimings,
    parse_scenario,
    simulate,
)

DEFAULT_HEARTBEAT = 5.0  # Swarm's default dispatcher heartbeat, when the file has none


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "simulate",
        help="run a what-if scenario on a recorded cluster with a policy",
        description=(
            "Replay a scenario on a snapshot (from `snapshot save`) with the controller's "
            "planner and a simulated Swarm scheduler, and print the timeline of placements "
            "and decisions. Steps, separated by `;`: "
            + ", ".join(VERBS)
            + ', e.g. "fail node-2; wait 60s; restore node-2; wait 120s".'
        ),
    )
    parser.add_argument("--snapshot", type=Path, required=True, metavar="FILE")
    add_policy_argument(parser)
    parser.add_argument("--scenario", required=True, metavar="STEPS")
    add_output_option(parser, json_flag=True)
    parser.add_argument(
        "--tick", type=float, default=DEFAULT_TICK, metavar="SECONDS", help="time step"
    )
    parser.add_argument(
        "--resync",
        type=float,
        default=None,
        metavar="SECONDS",
        help="the controller's task poll interval (default: the policy's resync-interval)",
    )
    parser.add_argument(
        "--heartbeat",
        type=float,
        default=None,
        metavar="SECONDS",
        help="Swarm's dispatcher heartbeat (default: the snapshot's, else 5)",
    )
    parser.set_defaults(handler=run)


def _positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise CommandError([f"simulate: --{name} must be a positive number of seconds"], 2)


def run(args: argparse.Namespace) -> int:
    try:
        for name in ("tick", "resync", "heartbeat"):
            _positive(name, getattr(args, name))
        policy = _load_policy(args.policy, "simulate")
        loaded = load_snapshot(args.snapshot)
        names = [n.hostname for n in loaded.snapshot.nodes] + [n.id for n in loaded.snapshot.nodes]
        steps = parse_scenario(args.scenario, nodes=names)
    except CommandError as exc:
        print("\n".join(exc.lines), file=sys.stderr)
        return exc.code
    except SnapshotFileError as exc:
        print("\n".join(exc.errors), file=sys.stderr)
        return EXIT_USAGE
    except ScenarioError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    heartbeat = args.heartbeat or loaded.heartbeat_seconds or DEFAULT_HEARTBEAT
    result = simulate(
        loaded.snapshot,
        policy,
        steps,
        timings=_timings(loaded, heartbeat),
        start=loaded.taken_at,
        tick=args.tick,
        resync=args.resync,
    )
    emit(
        args,
        simulation_document(result, heartbeat),
        lambda: render_simulation(result, loaded, heartbeat),
    )
    return EXIT_OK


def _timings(loaded: LoadedSnapshot, heartbeat: float) -> SwarmTimings:
    return SwarmTimings(
        heartbeat_seconds=heartbeat,
        restart_delay=loaded.restart_delay,
        update_monitor=loaded.update_monitor,
        update_parallelism=loaded.update_parallelism,
    )


def _placement(placement: Mapping[str, Mapping[str, int]]) -> list[str]:
    width = max((len(name) for name in placement), default=0)
    return [
        f"  {name:<{width}}  "
        + (", ".join(f"{host} {count}" for host, count in sorted(per.items())) or "(none running)")
        for name, per in sorted(placement.items())
    ]


def render_simulation(result: Simulation, loaded: LoadedSnapshot, heartbeat: float) -> str:
    snap = loaded.snapshot
    hosts = {n.id: n.hostname for n in snap.nodes}
    lines = [
        f"simulating {len(snap.nodes)} nodes, {len(snap.services)} services, "
        f"{len(snap.tasks)} tasks (heartbeat {heartbeat:g} s)",
        "placement at the start:",
        *_placement(result.initial),
        "timeline:",
    ]
    for entry in result.timeline:
        text, source = entry.text, entry.source
        if entry.action is not None:
            target = entry.text.split(": ", 1)[0]
            text, source = f"[{entry.rule}] {target}: {change(entry.action, hosts)}", "write"
        lines.append(f"  +{entry.at:7.1f}s  {source:<8}  {text}")
    lines.append(
        f"placement after {result.duration:g} s ({result.cycles} controller cycles, "
        f"{result.writes} writes):"
    )
    lines.extend(_placement(result.final))
    return "\n".join(lines)


def simulation_document(result: Simulation, heartbeat: float) -> dict[str, Any]:
    return {
        "heartbeat_seconds": heartbeat,
        "duration_seconds": result.duration,
        "cycles": result.cycles,
        "writes": result.writes,
        "initial": result.initial,
        "final": result.final,
        "timeline": [
            {"at": e.at, "source": e.source, "text": e.text, "rule": e.rule}
            for e in result.timeline
        ],
    }
