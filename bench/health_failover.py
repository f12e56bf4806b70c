"""Health-led failover against native Swarm failover, side by side in one sandbox.

Scenario: a managed service of 6 replicas runs 2/2/2 on a 3-node
sandbox; node-2 fails. Three ways, interleaved run by run:

- native: node-2's dockerd is SIGKILLed and nothing else happens; Swarm marks it down
  after its heartbeat grace and replaces the tasks after the restart delay (5 s default);
- webhook: node-2 stays up and a monitor POSTs `{"node": "node-2", "state": "failed"}`
  to the controller (`swarm-placement run --health-listen`), which refuses node-2 to the
  service (deny label), pauses it, and surges the lost replicas elsewhere at once;
- webhook+kill: node-2's dockerd is SIGKILLed and the monitor POSTs at once, as an
  outside monitor that sees the crash (a storage or power alarm) would.

Each run prints the time from the failure (the kill or the POST) to all 6 replicas running
off node-2; the table gives medians and the ratio to native. The sandbox uses Swarm's
default heartbeat (5 s, a node is down after about 15 s) unless --heartbeat says
otherwise: the heartbeat is what the webhook saves.

Needs root, like the sandbox. Usage: python bench/health_failover.py [--runs N] [--heartbeat S]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import docker
from controller_process import ControllerProcess

from controller.sandbox import Sandbox, SandboxSpec

REPLICAS = 6
TOKEN = "bench-token"
TIMEOUT = 120.0
MODES = ("native", "webhook", "webhook+kill")


def wait(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def layout(client: docker.DockerClient, name: str) -> dict[str, int]:
    hosts = {n["ID"]: n["Description"]["Hostname"] for n in client.api.nodes()}
    out: dict[str, int] = {}
    for task in client.api.tasks(filters={"service": name, "desired-state": "running"}):
        if task["Status"]["State"] == "running" and task.get("NodeID") in hosts:
            host = hosts[task["NodeID"]]
            out[host] = out.get(host, 0) + 1
    return out


def off_node2(client: docker.DockerClient, name: str) -> bool:
    now = layout(client, name)
    return "node-2" not in now and sum(now.values()) >= REPLICAS


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def post(port: int, body: dict[str, object]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
        conn.request("POST", "/v1/health", body=data, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


class WebhookController(ControllerProcess):
    """`swarm-placement run` with its webhook on a free local port."""

    def __init__(self, docker_host: str, logs: Path, name: str) -> None:
        self.port = free_port()
        token = logs / "token"
        token.write_text(TOKEN)
        policy = logs / "policy.yaml"
        policy.write_text("apiVersion: placement/v1\ncontroller:\n  resync-interval: 1s\n")
        super().__init__(
            docker_host,
            logs / f"{name}.log",
            "--policy",
            str(policy),
            "--health-listen",
            f"127.0.0.1:{self.port}",
            "--health-token-file",
            str(token),
        )

    def ready(self) -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            conn.request("GET", "/v1/health", headers={"Authorization": f"Bearer {TOKEN}"})
            return conn.getresponse().status == 200
        except OSError:
            return False


def reset_nodes(client: docker.DockerClient) -> None:
    for attrs in client.api.nodes():
        spec = dict(attrs["Spec"])
        labels = spec.get("Labels") or {}
        own = {k for k in labels if k.startswith("swarm-placement.")}
        if own or spec.get("Availability") != "active":
            spec["Labels"] = {k: v for k, v in labels.items() if k not in own}
            spec["Availability"] = "active"
            client.api.update_node(attrs["ID"], attrs["Version"]["Index"], spec)


class DownWatch:
    """When a manager first reports node-2 down, polled every 0.1 s in the background."""

    def __init__(self, docker_host: str, start: float) -> None:
        self._client = docker.DockerClient(base_url=docker_host, version="auto", timeout=10)
        self._start, self._stop = start, threading.Event()
        self.down_after: float | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.down_after is None:
            with contextlib.suppress(docker.errors.DockerException):
                for node in self._client.api.nodes():
                    host, state = node["Description"]["Hostname"], node["Status"]["State"]
                    if host == "node-2" and state == "down":
                        self.down_after = time.monotonic() - self._start
            self._stop.wait(0.1)

    def close(self) -> float | None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._client.close()
        return self.down_after


def one_run(
    sandbox: Sandbox, client: docker.DockerClient, mode: str, run: int, logs: Path
) -> tuple[float, float | None]:
    """Seconds from the failure to 6 running off node-2, and to node-2 marked down."""
    name = f"web-{mode.replace('+', '-')}-{run}"
    sandbox.create_service(
        name, replicas=REPLICAS, labels={"placement.managed": "true"}, stop_grace_seconds=1
    )
    wait(lambda: layout(client, name) == {f"node-{i}": 2 for i in (1, 2, 3)}, 60, "2/2/2")
    controller = None if mode == "native" else WebhookController(sandbox.manager_host, logs, name)
    down_at: float | None = None
    try:
        if controller is not None:
            wait(controller.ready, 30, "the controller's webhook")
            time.sleep(2)  # it adopts the service (steering constraint): not part of it
        start = time.monotonic()
        watch = DownWatch(sandbox.manager_host, start)
        if mode != "webhook":
            sandbox.fail("node-2", "crash")
        if controller is not None:
            status = post(controller.port, {"node": "node-2", "state": "failed", "ttl": 600})
            assert status == 202, status
        wait(lambda: off_node2(client, name), TIMEOUT, f"{name} off node-2")
        took = time.monotonic() - start
        seen = None
        if mode != "webhook":
            sandbox.wait_node_state("node-2", "down", timeout=TIMEOUT)
            seen = time.monotonic() - start  # the watch may not have polled since
        down_at = watch.close() or seen
        print(
            f"  {mode:<13} run {run}: running elsewhere after {took:.1f} s"
            + (f", node-2 down after {down_at:.1f} s" if down_at is not None else ""),
            file=sys.stderr,
        )
        return took, down_at
    finally:
        if controller is not None:
            controller.stop()
        if mode != "webhook":
            sandbox.restore("node-2")
            sandbox.wait_node_state("node-2", "ready")
        for service in client.api.services():
            client.api.remove_service(service["ID"])
        wait(lambda: not client.api.tasks(filters={"desired-state": "running"}), 60, "no tasks")
        reset_nodes(client)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--heartbeat", type=float, default=None, help="dispatcher heartbeat (default Swarm's 5 s)"
    )
    parser.add_argument("--logs", type=Path, help="keep the controller's logs in this directory")
    args = parser.parse_args()
    spec = SandboxSpec(
        name=f"bench-hl-{os.getpid() % 100000}", nodes=3, heartbeat_seconds=args.heartbeat
    )
    times: dict[str, list[float]] = {m: [] for m in MODES}
    downs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, Sandbox.up(spec) as sandbox:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        client = docker.DockerClient(base_url=sandbox.manager_host, version="auto", timeout=30)
        for run in range(1, args.runs + 1):
            for mode in MODES:  # interleaved, so drift on a shared machine hits all alike
                took, down = one_run(sandbox, client, mode, run, logs)
                times[mode].append(took)
                if down is not None:
                    downs.append(down)
        client.close()

    heartbeat = f"{args.heartbeat:g} s" if args.heartbeat else "Swarm's default 5 s"
    native = statistics.median(times["native"])
    print(
        f"\n{REPLICAS} replicas 2/2/2 on 3 nodes, node-2 fails; heartbeat {heartbeat}; "
        f"medians of {args.runs} run(s)\n"
    )
    print("time from the failure until all replicas run off node-2:\n")
    print(f"{'':44} {'median':>8} {'ratio to native':>16}")
    rows = [
        ("native Swarm (dockerd killed)", "native"),
        ("webhook says failed (node still up)", "webhook"),
        ("dockerd killed, webhook at once", "webhook+kill"),
    ]
    for label, mode in rows:
        median = statistics.median(times[mode])
        print(f"{label:44} {median:>6.1f} s {median / native:>15.2f}")
    print(f"\nSwarm marked node-2 down {statistics.median(downs):.1f} s after the kill (median).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
