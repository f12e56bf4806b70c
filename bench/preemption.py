"""Preemption benchmark: time from "high-priority task pending" to "running".

A 3-node sandbox swarm with 2 `slot`s per node is filled by a low-priority service (6
tasks, 1 slot each); a high-priority service of 2 tasks is then created and finds no
room. Three ways to react, run side by side in one sandbox:

- native Swarm: nobody does anything (Swarm has no priorities; the tasks stay pending);
- an ideal operator: the moment the tasks are seen pending, the low service is scaled
  down by exactly 2 in a raw spec write (a lower bound: no human reacts that fast);
- swarm-placement: `python -m controller run --resync 1` decides and writes itself.

Also reported: the time for the low service to be whole again once the high one is
removed (the controller restores it; natively and for the operator it was never cut or
must be scaled back by hand, so that column is the controller's alone).

Needs root, like the sandbox. Usage: python bench/preemption.py [--runs N] [--timeout S]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
from controller_process import ControllerProcess

from controller.sandbox import Sandbox, SandboxSpec

SLOTS = {f"node-{i}": {"slot": 2} for i in (1, 2, 3)}
LOW, HIGH = 6, 2


def wait(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> float | None:
    """Seconds until the predicate held, or None after the timeout."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(interval)
    return None


def running(client: docker.DockerClient, name: str) -> int:
    tasks = client.api.tasks(filters={"service": name, "desired-state": "running"})
    return sum(1 for t in tasks if t["Status"]["State"] == "running")


def short_of_resources(client: docker.DockerClient, name: str) -> bool:
    tasks = client.api.tasks(filters={"service": name, "desired-state": "running"})
    return any("insufficient resources" in t["Status"].get("Err", "") for t in tasks)


def create(sandbox: Sandbox, name: str, replicas: int, priority: str) -> None:
    sandbox.create_service(
        name,
        replicas=replicas,
        labels={"placement.managed": "true", "placement.priority": priority},
        reserve_generic={"slot": 1},
        stop_grace_seconds=1,
    )


def scale(client: docker.DockerClient, name: str, replicas: int) -> None:
    """A raw spec write of the count only (docker-py's scale() restarts every task)."""
    attrs = client.api.inspect_service(name)
    spec: dict[str, Any] = attrs["Spec"]
    spec["Mode"]["Replicated"]["Replicas"] = replicas
    url = client.api._url("/services/{0}/update", attrs["ID"])
    params = {"version": attrs["Version"]["Index"]}
    client.api._result(client.api._post_json(url, data=spec, params=params))


def clean(client: docker.DockerClient) -> None:
    for service in client.api.services():
        client.api.remove_service(service["ID"])
    wait(lambda: not client.api.tasks(filters={"desired-state": "running"}), 60)


def one_run(
    sandbox: Sandbox, client: docker.DockerClient, mode: str, run: int, timeout: float, logs: Path
) -> dict[str, float | None]:
    low, high = f"low-{mode}-{run}", f"high-{mode}-{run}"
    create(sandbox, low, LOW, "low")
    wait(lambda: running(client, low) == LOW, 60)
    controller = None
    if mode == "controller":
        controller = ControllerProcess(sandbox.manager_host, logs / f"{mode}-{run}.log")
    try:
        if controller is not None:
            time.sleep(2)  # let it adopt the low service first: not part of the reaction
        create(sandbox, high, HIGH, "high")
        if wait(lambda: short_of_resources(client, high), 30, interval=0.02) is None:
            raise RuntimeError("the high service never went pending: is the swarm full?")
        start = time.monotonic()
        seen = datetime.now(UTC).isoformat(timespec="milliseconds")
        if mode == "operator":
            scale(client, low, LOW - HIGH)
        reaction = wait(lambda: running(client, high) == HIGH, timeout)
        result: dict[str, float | None] = {"running": reaction, "restored": None}
        if controller is not None and reaction is not None:
            client.api.remove_service(high)
            result["restored"] = wait(
                lambda: (
                    running(client, low) == LOW
                    and client.api.inspect_service(low)["Spec"]["Mode"]["Replicated"]["Replicas"]
                    == LOW
                ),
                timeout,
            )
        elapsed = time.monotonic() - start
        print(f"  {mode:<10} run {run}: {elapsed:5.1f} s (pending seen {seen})", file=sys.stderr)
        return result
    finally:
        if controller is not None:
            controller.stop()
        clean(client)


def fmt(value: float | None, timeout: float) -> str:
    if value is None:
        return f"never (>{timeout:.0f} s)"
    return f"{value:.1f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--logs", type=Path, help="keep the controller's logs in this directory")
    args = parser.parse_args()
    spec = SandboxSpec(
        name=f"bench-pre-{os.getpid() % 100000}",
        nodes=3,
        managers=1,
        generic_resources=SLOTS,
        heartbeat_seconds=1.0,
    )
    modes = ("native", "operator", "controller")
    results: dict[str, list[dict[str, float | None]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp, Sandbox.up(spec) as sandbox:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        client = docker.DockerClient(base_url=sandbox.manager_host, version="auto", timeout=30)
        for run in range(1, args.runs + 1):
            for mode in modes:  # interleaved, so drift on a shared machine hits all alike
                results[mode].append(one_run(sandbox, client, mode, run, args.timeout, logs))
        client.close()

    def median(mode: str, key: str) -> float | None:
        values = [r[key] for r in results[mode]]
        if any(v is None for v in values):
            return None
        return statistics.median(v for v in values if v is not None)

    print(f"\n{HIGH} high-priority tasks on a full swarm (3 nodes x 2 slots, {LOW} low tasks)")
    print(f"time from 'pending for resources' to all {HIGH} running; {args.runs} run(s)\n")
    rows = [("reaction", "median", "each run", "low whole again")]
    for mode, label in (
        ("native", "native Swarm (nothing)"),
        ("operator", "ideal operator (instant scale)"),
        ("controller", "swarm-placement"),
    ):
        restored = fmt(median(mode, "restored"), args.timeout) if mode == "controller" else "-"
        rows.append(
            (
                label,
                fmt(median(mode, "running"), args.timeout),
                ", ".join(fmt(r["running"], args.timeout) for r in results[mode]),
                restored,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    ours, operator = median("controller", "running"), median("operator", "running")
    if ours is not None and operator:
        print(f"\nswarm-placement takes {ours / operator:.2f}x the ideal operator's time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
