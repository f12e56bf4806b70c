"""How soon each signal says a node is gone, measured from the failure.

Issue 14, first step: a 4-node sandbox (1 manager) with Swarm's default heartbeat unless
--heartbeat says otherwise. A worker (node-3) is failed, alternately by SIGKILL of its
dockerd (`crash`) and by cutting its link (`partition`), and four things are timed from
that instant, each polled every 0.1 s:

- gossip: the node leaves the `ingress` network's gossip `Peers` as the manager sees it
  (`GET /networks/ingress?verbose=true`: Docker's NetworkDB on memberlist);
- probe: a TCP connect to the node's address on port 7946 (memberlist, open on every
  swarm node; 2377 only listens on managers) fails or times out (0.5 s), made from the
  manager's network namespace as a controller on that manager would;
- down: the manager reports the node `down` (Swarm's heartbeat grace).

The node agent is not timed here: the agent collector (runtime/agent_collector.py) polls
every 5 s with a 2 s timeout and drops a report 3 x interval + timeout = 17 s after the
last good one, so with its defaults it is slower than Swarm's own down and cannot be a
fast signal without a push heartbeat. Prints every run and the medians per mode.

Needs root, like the sandbox. Usage: python bench/detection_signals.py [--runs N]
[--heartbeat S] [--modes crash,partition]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable

import docker

from controller.sandbox import Sandbox, SandboxSpec
from controller.sandbox.netns_probe import NetnsProber

TARGET = "node-3"
PROBE_PORT = 7946
PROBE_TIMEOUT = 0.5
POLL = 0.1
TIMEOUT = 90.0


class FirstTrue:
    """Polls `check` in the background and keeps the first time it held, from `start`."""

    def __init__(self, check: Callable[[], bool], start: float) -> None:
        self.after: float | None = None
        self._check, self._start, self._stop = check, start, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.after is None:
            try:
                if self._check():
                    self.after = time.monotonic() - self._start
                    return
            except Exception:  # an answer that does not come counts as no news
                pass
            time.sleep(POLL)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def peers(client: docker.DockerClient) -> set[str]:
    network = client.api.inspect_network("ingress", verbose=True)
    return {p.get("Name", "") for p in network.get("Peers") or []} | {
        p.get("IP", "") for p in network.get("Peers") or []
    }


def node_state(client: docker.DockerClient, hostname: str) -> str:
    for node in client.api.nodes():
        if node["Description"]["Hostname"] == hostname:
            return str(node["Status"]["State"])
    return "missing"


def one_run(sb: Sandbox, mode: str, prober: NetnsProber) -> dict[str, float | None]:
    client = docker.DockerClient(base_url=sb.docker_host("node-1"), version="auto", timeout=5)
    target = sb.state.node(TARGET)
    node_id = next(n["ID"] for n in client.api.nodes() if n["Description"]["Hostname"] == TARGET)
    deadline = time.monotonic() + TIMEOUT
    while not ({TARGET, target.ip, node_id[:12]} & peers(client)) or not prober(
        target.ip, PROBE_PORT, PROBE_TIMEOUT
    ):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{TARGET} never showed in the gossip peers or the probe")
        time.sleep(0.5)
    start = time.monotonic()
    sb.fail(TARGET, mode)
    watches = {
        "gossip": FirstTrue(lambda: not ({TARGET, target.ip, node_id[:12]} & peers(client)), start),
        "probe": FirstTrue(lambda: not prober(target.ip, PROBE_PORT, PROBE_TIMEOUT), start),
        "down": FirstTrue(lambda: node_state(client, TARGET) == "down", start),
    }
    while any(w.after is None for w in watches.values()) and time.monotonic() < start + TIMEOUT:
        time.sleep(POLL)
    for watch in watches.values():
        watch.stop()
    sb.restore(TARGET)
    sb.wait_node_state(TARGET, "ready", timeout=TIMEOUT)
    client.close()
    return {name: w.after for name, w in watches.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--heartbeat", type=float, default=None, help="seconds; default Swarm's")
    parser.add_argument("--modes", default="crash,partition")
    parser.add_argument("--name", default="bench-signals")
    args = parser.parse_args()
    modes = args.modes.split(",")
    spec = SandboxSpec(name=args.name, nodes=4, heartbeat_seconds=args.heartbeat)
    results: dict[str, list[dict[str, float | None]]] = {m: [] for m in modes}
    with Sandbox.up(spec) as sb:
        engine = docker.DockerClient(base_url=sb.docker_host("node-1"), version="auto")
        print(f"dockerd {engine.version()['Version']}, heartbeat {args.heartbeat or 'default'}")
        engine.close()
        prober = NetnsProber(sb.state.node("node-1").netns)
        for run in range(args.runs):
            for mode in modes:
                got = one_run(sb, mode, prober)
                results[mode].append(got)
                shown = ", ".join(
                    f"{k} {'-' if v is None else f'{v:.1f} s'}" for k, v in got.items()
                )
                print(f"run {run + 1} {mode}: {shown}", flush=True)
        prober.close()
    print("\nmedians from the failure (s):")
    for mode, runs in results.items():
        cells = []
        for signal in ("gossip", "probe", "down"):
            values = [r[signal] for r in runs if r[signal] is not None]
            cells.append(f"{signal} {statistics.median(values):.1f}" if values else f"{signal} -")
        print(f"  {mode:<10} " + "  ".join(cells) + f"  ({len(runs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
