"""Rebalance benchmark: a returned node, balanced by swarm-placement or by `--force`.

Scenario, on a 3-node sandbox swarm (heartbeat 1 s): 6 replicas run
2/2/2; node-3 is killed and Swarm runs them 3/3/0; node-3 comes back. Then either

- swarm-placement (`python -m controller run --resync 1`, default policy) rebalances the
  service, which opted in with `placement.rebalance=on`; or
- an operator runs `docker service update --force`: TaskTemplate.ForceUpdate is bumped
  in a raw spec write, the blunt tool the ecosystem uses (a rolling replacement of every
  task, with the service's own update config: start-first, parallelism 1).

Both run in one sandbox, interleaved, and print side by side: tasks restarted (running
task IDs before vs after), time from node-3 ready to 2/2/2 and the time from the first
write, the fewest replicas running while it moved (sampled every 0.1 s), and the ratios.
The controller waits, on purpose, for a returned node to stay ready for the settle time
of its aggressiveness (15 s at the default level 3): that is in the first time column.

Needs root, like the sandbox. Usage: python bench/rebalance.py [--runs N]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
from controller_process import ControllerProcess

from controller.sandbox import Sandbox, SandboxSpec

REPLICAS = 6
BALANCED = {"node-1": 2, "node-2": 2, "node-3": 2}
LOPSIDED = {"node-1": 3, "node-2": 3}
TIMEOUT = 120.0


def wait(
    predicate: Callable[[], bool], timeout: float, what: str = "", interval: float = 0.1
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def layout(client: docker.DockerClient, name: str) -> tuple[dict[str, int], set[str]]:
    """Hostname -> running tasks, and the running task IDs."""
    hosts = {n["ID"]: n["Description"]["Hostname"] for n in client.api.nodes()}
    per_node: dict[str, int] = {}
    ids: set[str] = set()
    for task in client.api.tasks(filters={"service": name, "desired-state": "running"}):
        if task["Status"]["State"] == "running" and task.get("NodeID") in hosts:
            host = hosts[task["NodeID"]]
            per_node[host] = per_node.get(host, 0) + 1
            ids.add(task["ID"])
    return per_node, ids


def spec_of(client: docker.DockerClient, name: str) -> dict[str, Any]:
    return dict(client.api.inspect_service(name))


def at_rest(client: docker.DockerClient, name: str, wanted: dict[str, int]) -> bool:
    attrs = spec_of(client, name)
    replicas = attrs["Spec"]["Mode"]["Replicated"]["Replicas"]
    updating = (attrs.get("UpdateStatus") or {}).get("State") == "updating"
    record = any(k.startswith("swarm-placement.replicas") for k in attrs["Spec"].get("Labels", {}))
    return (
        replicas == REPLICAS and not updating and not record and layout(client, name)[0] == wanted
    )


def at_rest_or_done(client: docker.DockerClient, name: str) -> bool:
    state = (spec_of(client, name).get("UpdateStatus") or {}).get("State")
    return state in {"completed", "paused", "rollback_completed"}


@dataclass
class Sample:
    at: float
    running: int
    version: int
    layout: dict[str, int]
    updating: bool


@dataclass
class Sampler:
    """Running tasks, their layout and the spec version of one service, every 0.1 s."""

    docker_host: str
    name: str
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._client = docker.DockerClient(base_url=self.docker_host, version="auto", timeout=10)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(docker.errors.DockerException):
                per_node, ids = layout(self._client, self.name)
                attrs = spec_of(self._client, self.name)
                state = (attrs.get("UpdateStatus") or {}).get("State")
                self.samples.append(
                    Sample(
                        time.monotonic(),
                        len(ids),
                        attrs["Version"]["Index"],
                        per_node,
                        state == "updating",
                    )
                )
            self._stop.wait(0.1)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._client.close()

    def first_write_after(self, start: float) -> float | None:
        """When the service's spec first changed after `start` (the move's first write)."""
        before = [s.version for s in self.samples if s.at <= start]
        for sample in self.samples:
            if before and sample.at > start and sample.version != before[-1]:
                return sample.at
        return None

    def balanced_since(self) -> float | None:
        """When the layout last became 2/2/2 and stayed so, with no update running."""
        since = None
        for sample in self.samples:
            if sample.layout == BALANCED and not sample.updating:
                since = sample.at if since is None else since
            else:
                since = None
        return since


def force_update(client: docker.DockerClient, name: str) -> None:
    """What `docker service update --force` sends: the spec with ForceUpdate bumped."""
    attrs = spec_of(client, name)
    spec = attrs["Spec"]
    spec["TaskTemplate"]["ForceUpdate"] = int(spec["TaskTemplate"].get("ForceUpdate", 0)) + 1
    url = client.api._url("/services/{0}/update", attrs["ID"])
    params = {"version": attrs["Version"]["Index"]}
    client.api._result(client.api._post_json(url, data=spec, params=params))


def one_run(
    sandbox: Sandbox, client: docker.DockerClient, mode: str, run: int, logs: Path
) -> dict[str, float]:
    name = f"web-{mode}-{run}"
    sandbox.create_service(
        name,
        replicas=REPLICAS,
        labels={"placement.rebalance": "on"} if mode == "controller" else {},
        stop_grace_seconds=1,
    )
    wait(lambda: at_rest(client, name, BALANCED), 60)
    controller = (
        ControllerProcess(sandbox.manager_host, logs / f"{name}.log")
        if mode == "controller"
        else None
    )
    try:
        time.sleep(2)  # the controller adopts the service first: not part of the move
        sandbox.fail("node-3", "crash")
        sandbox.wait_node_state("node-3", "down")
        wait(lambda: at_rest(client, name, LOPSIDED), TIMEOUT)
        before = layout(client, name)[1]
        with Sampler(sandbox.manager_host, name) as sampler:
            sandbox.restore("node-3")
            sandbox.wait_node_state("node-3", "ready")
            ready = time.monotonic()
            if mode == "force":
                force_update(client, name)
                # A rolling replacement lands where the scheduler finds the fewest tasks
                # at each step, old ones included: it need not end balanced. Wait for it
                # to finish, then judge the layout it left.
                wait(lambda: at_rest_or_done(client, name), TIMEOUT, f"{name}'s update")
                time.sleep(2)
            else:
                wait(lambda: at_rest(client, name, BALANCED), TIMEOUT, f"{name} at 2/2/2")
                time.sleep(2)  # the sampler catches up, and shows that it stays so
            end = time.monotonic()
        after = layout(client, name)
        first = sampler.first_write_after(ready) or ready
        settled = sampler.balanced_since() if after[0] == BALANCED else None
        during = [s.running for s in sampler.samples if ready <= s.at <= end]
        result = {
            "restarted": float(len(before - after[1])),
            "from_ready": settled - ready if settled else float("nan"),
            "from_write": settled - first if settled else float("nan"),
            "min_running": float(min(during)),
        }
        if settled is None:
            print(f"  {mode}: not balanced, it left {after[0]}", file=sys.stderr)
        print(f"  {mode:<10} run {run}: {result}", file=sys.stderr)
        return result
    finally:
        if controller is not None:
            controller.stop()
        for service in client.api.services():
            client.api.remove_service(service["ID"])
        wait(lambda: not client.api.tasks(filters={"desired-state": "running"}), 60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--modes", default="controller,force", help=argparse.SUPPRESS)
    parser.add_argument("--logs", type=Path, help="keep the controller's logs in this directory")
    args = parser.parse_args()
    spec = SandboxSpec(name=f"bench-reb-{os.getpid() % 100000}", nodes=3, heartbeat_seconds=1.0)
    modes = tuple(args.modes.split(","))
    results: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp, Sandbox.up(spec) as sandbox:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        client = docker.DockerClient(base_url=sandbox.manager_host, version="auto", timeout=30)
        for run in range(1, args.runs + 1):
            for mode in modes:  # interleaved, so drift on a shared machine hits both alike
                results[mode].append(one_run(sandbox, client, mode, run, logs))
        client.close()

    def median(mode: str, key: str) -> float | None:
        """The median over the runs (for times: those that ended balanced; None: none)."""
        values = [r[key] for r in results[mode] if not math.isnan(r[key])]
        return statistics.median(values) if values else None

    def show(value: float | None, form: str) -> str:
        return "unbalanced" if value is None else form.format(value)

    rows = [
        ("tasks restarted", "restarted", "{:.0f}"),
        ("time to balanced, from node-3 ready", "from_ready", "{:.1f} s"),
        ("time to balanced, from the first write", "from_write", "{:.1f} s"),
        ("fewest replicas running meanwhile", "min_running", "{:.0f}"),
    ]
    print(f"\n{REPLICAS} replicas, node-3 killed (3/3/0) and back; medians of {args.runs} run(s)")
    print("(times: of the runs that ended 2/2/2)\n")
    print(f"{'':40} {'swarm-placement':>16} {'--force':>12} {'ratio':>8}")
    for label, key, form in rows:
        ours, force = median("controller", key), median("force", key)
        ratio = f"{ours / force:.2f}" if ours is not None and force else "-"
        print(f"{label:40} {show(ours, form):>16} {show(force, form):>12} {ratio:>8}")
    balanced = {m: sum(not math.isnan(r["from_ready"]) for r in results[m]) for m in modes}
    print(
        f"{'runs that ended 2/2/2':40} {balanced['controller']:>12} of {args.runs}"
        f" {balanced['force']:>8} of {args.runs}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
