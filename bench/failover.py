"""Failover and failback times: native Swarm next to the controller's steering modes.

    python bench/failover.py [--heartbeat 1|default] [--repeat 1] [--fault crash|cut|leader]

One 4-node sandbox (node-1 is the manager and is never failed). For each case a
one-replica service runs on node-2; node-2's dockerd is killed; failover is the time from
Swarm marking node-2 down to the replica running on another node. node-2 then comes back;
failback is the time from node-2 being ready again to the replica running on it (native
Swarm never moves it back). The controller cases differ only in `controller.steering`:
- standby: the next preferred owner stays allowed at rest: Swarm fails over natively;
- strict: only the target is allowed: the controller widens the set when node-2 dies;
- open: nothing excluded at rest: Swarm fails over anywhere, the controller corrects.
Every controller case also surges on the node loss, which beats Swarm's restart delay.

`--heartbeat default` keeps Swarm's own heartbeat (5 s) and measures from the kill, as an
operator feels it: a 3-replica service on the 4 nodes, a worker holding one of its tasks
is killed (`--fault cut`: its link cut instead), and failover is the time until 3
replicas run off that node. Cases: native
Swarm; the controller with `failover-mode: confirmed` (it acts once Swarm marks the node
down); with `failover-mode: speculative` (it acts once two signals agree the node is
gone: the gossip peers and a TCP probe, bench/detection_signals.py); and speculative
with node agents, whose indirect probes from the other nodes are the second signal.
The controller runs with --liveness inside node-1's network namespace, as it would on
that manager; each agent runs in its node's namespace, on its address.

`--fault leader`: three managers and two workers; a service with one task on each node
but the last worker; the Raft leader's dockerd is killed, and the controller runs on
another manager (its engine, its namespace). Native Swarm against speculative with
agents; the time until a manager answers again (Raft has a new leader) is printed too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.sandbox import Sandbox, SandboxSpec

POLL = 0.05


def _hosts(client: docker.DockerClient, service: str) -> dict[str, int]:
    names = {n["ID"]: n["Description"]["Hostname"] for n in client.api.nodes()}
    out: dict[str, int] = {}
    for t in client.api.tasks(filters={"service": service, "desired-state": "running"}):
        if t["Status"]["State"] == "running" and t.get("NodeID") in names:
            out[names[t["NodeID"]]] = out.get(names[t["NodeID"]], 0) + 1
    return out


def _node_state(client: docker.DockerClient, host: str) -> str:
    for n in client.api.nodes():
        if n["Description"]["Hostname"] == host:
            return str(n["Status"]["State"])
    return "?"


def _until(predicate, timeout: float, what: str) -> float:  # type: ignore[no-untyped-def]
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out after {timeout:.0f} s: {what}")
        time.sleep(POLL)
    return time.monotonic()


def _case(
    sandbox: Sandbox, client: docker.DockerClient, mode: str | None, n: int
) -> tuple[float, float | None]:
    name = f"fo-{mode or 'native'}-{n}"
    controller = None
    if mode is None:
        # Native Swarm: wherever it puts the replica (never the manager), fail that node.
        sandbox.create_service(name, constraints=["node.hostname!=node-1"])
        _until(lambda: _hosts(client, name), 60, "native replica running")
        victim = next(iter(_hosts(client, name)))
    else:
        policy = Path(tempfile.mkdtemp()) / "policy.yaml"
        policy.write_text(
            f"apiVersion: placement/v1\ncontroller: {{steering: {mode}, move-cooldown: 0s}}\n"
        )
        labels = {
            "placement.managed": "true",
            "placement.preferred-nodes": "node-2,node-3",
            "placement.failback": "immediate",
            "placement.failback-delay": "0s",
        }
        sandbox.create_service(name, labels=labels)
        env = {**os.environ, "DOCKER_HOST": sandbox.manager_host}
        controller = subprocess.Popen(
            [sys.executable, "-m", "controller", "run", "--policy", str(policy), "--resync", "1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _until(lambda: _hosts(client, name) == {"node-2": 1}, 60, f"{name} on node-2")
        time.sleep(3)  # at rest: the steering for failover is in place
        victim = "node-2"
    try:
        sandbox.fail(victim, "crash")
        down = _until(lambda: _node_state(client, victim) == "down", 60, f"{victim} down")
        moved = _until(
            lambda: sum(c for h, c in _hosts(client, name).items() if h != victim) >= 1,
            60,
            "failover",
        )
        sandbox.restore(victim)
        ready = _until(lambda: _node_state(client, victim) == "ready", 60, f"{victim} ready")
        failback = None
        if controller is not None:
            back = _until(lambda: _hosts(client, name) == {victim: 1}, 60, "failback")
            failback = back - ready
        return moved - down, failback
    finally:
        if controller is not None:
            controller.terminate()
            controller.wait(timeout=20)
        client.api.remove_service(name)


FROM_KILL_REPLICAS = 3


AGENT_PORT = 9810
AGENTS_CASE = "speculative, agents"


@contextlib.contextmanager
def _agents(sandbox: Sandbox, secret: Path) -> Iterator[list[str]]:
    """An agent process in every node's network namespace, on its address: each listed
    with its node (NODE=URL, as --agents wants)."""
    processes = []
    try:
        for host in sandbox.nodes:
            node = sandbox.state.node(host)
            command = [sys.executable, "-m", "controller", "agent", "--listen"]
            command += [f"{node.ip}:{AGENT_PORT}", "--secret-file", str(secret)]
            command += ["--usage", "containers", "--interval", "1", "--window", "5"]
            processes.append(
                subprocess.Popen(
                    ["nsenter", f"--net=/run/netns/{node.netns}", *command],
                    env={**os.environ, "DOCKER_HOST": sandbox.docker_host(host)},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        time.sleep(3)  # listening, and a first usage sample taken
        yield [f"{h}=http://{sandbox.state.node(h).ip}:{AGENT_PORT}" for h in sandbox.nodes]
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=20)


def _answered(read):  # type: ignore[no-untyped-def]
    """`read()`, or None while no manager answers (Raft electing a leader)."""
    try:
        return read()
    except (docker.errors.DockerException, requests.RequestException):
        return None  # docker-py lets a read timeout through as requests' own


def _all_ready(client: docker.DockerClient) -> bool:
    return all(n["Status"]["State"] == "ready" for n in client.api.nodes())


def _leader(sandbox: Sandbox) -> str:
    return next(n["hostname"] for n in sandbox.node_info() if n["leader"])


def _from_kill_case(
    sandbox: Sandbox,
    mode: str | None,
    n: int,
    agents: tuple[list[str], Path] | None = None,
    fault: str = "crash",
) -> tuple[float, float | None]:
    """Seconds from the kill of a node to its replicas running off it, and (for the
    Raft leader) to a manager answering again. A worker holding one of 3 replicas is
    failed; with `fault` leader, the Raft leader's node, holding one of one-per-node,
    and the controller and the measurement use another manager."""
    leader_case = fault == "leader"
    name = f"fk-{(mode or 'native')[:4]}{'-ag' if agents else ''}-{n}"
    on = next(h for h in sandbox.nodes if h != _leader(sandbox)) if leader_case else "node-1"
    replicas = len(sandbox.nodes) - 1 if leader_case else FROM_KILL_REPLICAS
    client = docker.DockerClient(base_url=sandbox.docker_host(on), version="auto", timeout=10)
    controller = None
    labels = {"placement.managed": "true", "placement.failover-mode": mode} if mode else {}
    # The leader case: one task on every node but the last (a worker), so the leader's
    # node holds one and a free node is left; the constraint goes once they run.
    pin = [f"node.hostname!={sandbox.nodes[-1]}"] if leader_case else []
    if leader_case:  # every node back from the last run, or the tasks will not spread
        _until(lambda: _answered(lambda: _all_ready(client)), 120, "every node ready")
    sandbox.create_service(name, replicas=replicas, labels=labels, constraints=pin)

    def running() -> bool:
        hosts = _hosts(client, name)
        return (len(hosts) if leader_case else sum(hosts.values())) == replicas

    _until(running, 60, f"{name} running, one per node" if leader_case else f"{name} running")
    if pin:
        sandbox.set_constraints(name)
    if mode is not None:
        policy = Path(tempfile.mkdtemp()) / "policy.yaml"
        policy.write_text("apiVersion: placement/v1\n")
        netns = f"/run/netns/{sandbox.state.node(on).netns}"
        env = {**os.environ, "DOCKER_HOST": sandbox.docker_host(on)}
        command = [sys.executable, "-m", "controller", "run", "--policy", str(policy)]
        if agents is not None:
            urls, secret = agents
            command += ["--agents", ",".join(urls), "--agent-secret-file", str(secret)]
            command += ["--agent-interval", "1"]
        controller = subprocess.Popen(
            ["nsenter", f"--net={netns}", *command, "--resync", "1", "--liveness"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # Adopted, at rest, every node seen alive by gossip and probe, agents reporting.
        time.sleep(5)
    if leader_case:
        victim = _leader(sandbox)
    else:
        victim = next(h for h in sorted(_hosts(client, name)) if h != "node-1")
    fault = "crash" if leader_case else fault
    answering: list[float] = []
    try:
        killed = time.monotonic()
        sandbox.fail(victim, fault)

        def moved() -> bool:
            hosts = _answered(lambda: _hosts(client, name))
            if hosts is not None and not answering:
                answering.append(time.monotonic())
            return hosts is not None and sum(c for h, c in hosts.items() if h != victim) >= replicas

        at = _until(moved, 90, f"{name} off {victim}")
        sandbox.restore(victim)
        _until(
            lambda: _answered(lambda: _node_state(client, victim)) == "ready",
            90,
            f"{victim} ready",
        )
        return at - killed, (answering[0] - killed if leader_case else None)
    finally:
        if controller is not None:
            controller.terminate()
            controller.wait(timeout=20)
        _answered(lambda: client.api.remove_service(name))
        client.close()


def _from_kill(repeat: int, fault: str) -> int:
    leader = fault == "leader"
    spec = SandboxSpec(
        name=f"bench-fk-{os.getpid()}",
        nodes=5 if leader else 4,
        managers=3 if leader else 1,
        heartbeat_seconds=None,
    )
    results: dict[str, list[float]] = {}
    answered: list[float] = []
    secret = Path(tempfile.mkdtemp()) / "agent-secret"
    secret.write_text("failover-bench\n")
    cases = ("native Swarm", "confirmed", "speculative", AGENTS_CASE)
    if fault == "leader":
        cases = ("native Swarm", AGENTS_CASE)
    with Sandbox.up(spec) as sandbox, _agents(sandbox, secret) as urls:
        for n in range(repeat):
            for case in cases:
                mode = None if case == "native Swarm" else case.split(",")[0]
                with_agents = (urls, secret) if case == AGENTS_CASE else None
                took, election = _from_kill_case(sandbox, mode, n, with_agents, fault)
                results.setdefault(case, []).append(took)
                if election is not None:
                    answered.append(election)
                print(f"run {n + 1} {case}: {took:.2f} s", flush=True)
        client = sandbox.client()
        version = client.version().get("Version", "?")
        client.close()
    native = statistics.median(results["native Swarm"])
    print(f"dockerd {version}, Swarm's default heartbeat, {repeat} run(s) each, medians;")
    what = {"crash": "kill of a worker", "partition": "cut of a worker"}.get(
        fault, "kill of the Raft leader's node"
    )
    print(f"seconds from the {what} to its replicas running on other nodes")
    if answered:
        print(f"a manager answered again (a new Raft leader) {statistics.median(answered):.2f} s")
        print("after the kill (median of every run)")
    print(f"{'case':<22}{'failover s':>12}{'vs native':>11}")
    for case, runs in results.items():
        fo = statistics.median(runs)
        print(f"{case:<22}{fo:>12.2f}{fo / native:>10.2f}x")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--heartbeat", default="1", help="dispatcher heartbeat (s), or default: from the kill"
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--fault",
        choices=("crash", "cut", "leader"),
        default="crash",
        help="with --heartbeat default: a worker's dockerd SIGKILLed, its link cut, or the "
        "Raft leader's dockerd SIGKILLed (three managers)",
    )
    args = parser.parse_args()
    if args.heartbeat == "default":
        return _from_kill(args.repeat, {"cut": "partition"}.get(args.fault, args.fault))
    args.heartbeat = float(args.heartbeat)
    spec = SandboxSpec(name=f"bench-fo-{os.getpid()}", nodes=4, heartbeat_seconds=args.heartbeat)
    results: dict[str, list[tuple[float, float | None]]] = {}
    with Sandbox.up(spec) as sandbox:
        client = docker.DockerClient(base_url=sandbox.manager_host, version="auto")
        for n in range(args.repeat):
            for mode in (None, "standby", "strict", "open"):
                results.setdefault(mode or "native Swarm", []).append(
                    _case(sandbox, client, mode, n)
                )
        client.close()

    native = statistics.median(f for f, _ in results["native Swarm"])
    print(f"heartbeat {args.heartbeat:g} s, {args.repeat} run(s) each, medians; times from")
    print("node marked down (failover) and from node ready again (failback)")
    print(f"{'case':<16}{'failover s':>12}{'vs native':>11}{'failback s':>12}")
    for case, runs in results.items():
        fo = statistics.median(f for f, _ in runs)
        fbs = [b for _, b in runs if b is not None]
        fb = f"{statistics.median(fbs):>12.2f}" if fbs else f"{'never':>12}"
        print(f"{case:<16}{fo:>12.2f}{fo / native:>10.2f}x{fb}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
