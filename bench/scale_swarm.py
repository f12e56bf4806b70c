"""The controller on a large sandbox swarm, next to Swarm alone on the same swarm.

    python bench/scale_swarm.py [--sizes 4,8,16,20] [--services-per-node 7.5] [--idle 30]

For each size: a sandbox of N nodes (node-1..3 managers, heartbeat 1 s) running N x 7.5
managed services (30 tasks per node) in three priority tiers (high, medium, low). Forty
of them have one replica each and prefer the last node, the victim, and are put there
before each failover; the others are kept off it, so that it fails with the same 40
managed tasks both times. Then, in this order:

- Swarm alone: the victim's dockerd is SIGKILLed; the time from Swarm marking it down
  to each of the forty running elsewhere, by tier; the Raft entries it took;
- the controller (`run` against node-1, the default 10 s resync, a JSON decision log)
  adopts everything and settles; at rest: its CPU (share of one core over --idle
  seconds), RSS, writes (any version that moved), and the split of one cycle (observe
  with and without the task history, plan), timed here through the controller's own
  functions;
- event -> first write: new managed services created one by one, Swarm's UpdatedAt of
  the controller's first write minus CreatedAt (both on the manager's clock);
- the controller's failover: the forty put back on the victim, the victim killed
  again; the same times by tier, the controller's writes (decisions with an action), the
  Raft entries and the controller's CPU while it lasted.

Root is needed, as for the sandbox. Nothing here is asserted: the figures are printed
side by side, and docs/feasibility.md keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller_process import ControllerProcess

from controller.adapters.attrs import timestamp_from_attrs
from controller.adapters.engine import ClusterObserver
from controller.adapters.policy_file import load_policy_file
from controller.core.memory import Memory
from controller.core.plan import plan
from controller.sandbox import Sandbox, SandboxSpec

HOT = 40  # one-replica services that prefer the victim: the 40 tasks its failure costs
TASKS_PER_NODE = 30
TIERS = ("high", "medium", "low")
POLL = 0.1
TICK = os.sysconf("SC_CLK_TCK")
POLICY = "apiVersion: placement/v1\ncontroller: {move-cooldown: 0s}\n"
RESYNC = "10"  # the default: events trigger the cycles in between


def _until(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    start = time.monotonic()
    while not _quiet(predicate):
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out after {timeout:.0f} s: {what}")
        time.sleep(POLL)
    return time.monotonic()


def _quiet(read: Callable[[], Any]) -> Any:
    """`read()`, or None while the manager does not answer."""
    try:
        return read()
    except (docker.errors.DockerException, requests.RequestException):
        return None


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _raft_index(client: docker.DockerClient) -> int:
    """The highest Raft index any object was written at: every store change is one Raft
    entry, so the difference over a failover is the entries it took (the WAL's files are
    preallocated, so their size says nothing)."""
    found = [0]
    for listing in (client.api.nodes(), client.api.services(), client.api.tasks()):
        found.extend(int(o["Version"]["Index"]) for o in listing)
    return max(found)


def _services(n_nodes: int, per_node: float, victim: str) -> list[dict[str, Any]]:
    """HOT one-replica services on the victim; the others (kept off it, so that it holds
    the same 40 tasks whenever it fails) share the rest of TASKS_PER_NODE per node."""
    count = max(HOT + len(TIERS), round(n_nodes * per_node))
    # TASKS_PER_NODE x nodes in all: the first `extra` of the others take one more.
    spread, extra = divmod(max(count - HOT, TASKS_PER_NODE * n_nodes - HOT), count - HOT)
    out = []
    for i in range(count):
        hot = i < HOT
        labels = {"placement.managed": "true", "placement.priority": TIERS[i % len(TIERS)]}
        if hot:
            labels["placement.preferred-nodes"] = victim
        out.append(
            {
                "name": f"{'hot' if hot else 'svc'}{i:03d}",
                "labels": labels,
                "hot": hot,
                "replicas": 1 if hot else spread + (1 if i - HOT < extra else 0),
                "constraints": [] if hot else [f"node.hostname!={victim}"],
            }
        )
    return out


def _running_by_service(
    client: docker.DockerClient, skip_node: str, work: _Work | None = None
) -> dict[str, int]:
    ready = {n["ID"] for n in client.api.nodes() if n["Status"]["State"] == "ready"}
    out: dict[str, int] = {}
    tasks = client.api.tasks()
    if work is not None:
        work.see(tasks)
    for t in tasks:
        node = t.get("NodeID")
        if t["DesiredState"] != "running":
            continue
        if t["Status"]["State"] == "running" and node in ready and node != skip_node:
            out[t["ServiceID"]] = out.get(t["ServiceID"], 0) + 1
    return out


def _pin_hot(sandbox: Sandbox, client: docker.DockerClient, hot: list[str], victim: str) -> None:
    """The hot services' tasks onto the victim, then the pin removed (no task moves)."""
    for name in hot:
        sandbox.set_constraints(name, [f"node.hostname=={victim}"])
    victim_id = _node_id(client, victim)

    def all_there() -> bool:
        tasks = client.api.tasks(filters={"desired-state": "running"})
        ids = {client.api.inspect_service(n)["ID"] for n in hot}
        on = [t for t in tasks if t["ServiceID"] in ids and t["Status"]["State"] == "running"]
        return len(on) == len(hot) and all(t["NodeID"] == victim_id for t in on)

    _until(all_there, 300, "hot services on the victim")
    for name in hot:
        sandbox.set_constraints(name, [])


def _node_id(client: docker.DockerClient, host: str) -> str:
    return next(n["ID"] for n in client.api.nodes() if n["Description"]["Hostname"] == host)


def _failover(
    sandbox: Sandbox, client: docker.DockerClient, victim: str, tier_of: dict[str, str]
) -> dict[str, Any]:
    """Kill the victim; seconds from Swarm's down to each of its (one-replica) services
    running elsewhere."""
    victim_id = _node_id(client, victim)
    raft_before = _raft_index(client)
    sandbox.fail(victim, "crash")
    killed, killed_at = time.monotonic(), time.time()
    down = _until(
        lambda: any(
            n["ID"] == victim_id and n["Status"]["State"] == "down" for n in client.api.nodes()
        ),
        60,
        f"{victim} down",
    )
    down_at = killed_at + (down - killed)  # on the wall clock, as the decision log
    whole: dict[str, float] = {}
    work = _Work(set(tier_of), killed_at)
    while len(whole) < len(tier_of) and time.monotonic() - down < 180:
        running = _quiet(lambda: _running_by_service(client, victim_id, work)) or {}
        now = time.monotonic()
        for sid in tier_of:
            if sid not in whole and running.get(sid, 0) >= 1:
                whole[sid] = now - down
        time.sleep(POLL)
    for _ in range(20):  # the trims' victims, a few seconds on
        _quiet(lambda: _running_by_service(client, victim_id, work))
        time.sleep(POLL)
    by_tier = {
        tier: sorted(v for sid, v in whole.items() if tier_of[sid] == tier) for tier in TIERS
    }
    return {
        "detect_s": down - killed,
        "down_at": down_at,
        "by_tier": by_tier,
        "all_s": max(whole.values()) if len(whole) == len(tier_of) else None,
        "missing": len(tier_of) - len(whole),
        "raft_entries": _raft_index(client) - raft_before,
        **work.counts(),
    }


class _Work:
    """The services' tasks created since `since` (a wall-clock time, the managers' clock
    on this machine), as the failover's polls saw them: a task scaled away is deleted
    soon after, so one listing at the end would miss it. `containers`: those that got a
    container (prepared); `ran`: those seen running. One per lost task is the least; a
    surged task whose delayed twin also runs costs two."""

    def __init__(self, service_ids: set[str], since: float) -> None:
        self.service_ids, self.since = service_ids, since
        self.created: set[str] = set()
        self.containers: set[str] = set()
        self.ran: set[str] = set()

    def see(self, tasks: list[dict[str, Any]]) -> None:
        for t in tasks:
            if t["ServiceID"] not in self.service_ids:
                continue
            if timestamp_from_attrs(t["CreatedAt"]) <= self.since:
                continue
            status = t.get("Status") or {}
            self.created.add(t["ID"])
            if (status.get("ContainerStatus") or {}).get("ContainerID"):
                self.containers.add(t["ID"])
            if status.get("State") == "running":
                self.ran.add(t["ID"])

    def counts(self) -> dict[str, int]:
        return {
            "tasks_created": len(self.created),
            "containers": len(self.containers),
            "ran": len(self.ran),
        }


def _cycle_split(docker_host: str, policy_path: Path) -> dict[str, float]:
    """One cycle's parts, best of three, through the controller's own observer and plan."""
    policy = load_policy_file(policy_path).policy
    client = docker.DockerClient(base_url=docker_host, version="auto", timeout=60)
    try:
        fresh: list[float] = []
        reused: list[float] = []
        planned: list[float] = []
        observer = ClusterObserver(client, history_every=lambda: 1e9)
        for _ in range(3):
            start = time.perf_counter()
            ClusterObserver(client)()
            fresh.append(time.perf_counter() - start)
            start = time.perf_counter()
            snapshot = observer()
            reused.append(time.perf_counter() - start)
            start = time.perf_counter()
            plan(snapshot=snapshot, policy=policy, memory=Memory(), now=time.time())
            planned.append(time.perf_counter() - start)
        return {"observe": min(fresh), "observe_reused": min(reused), "plan": min(planned)}
    finally:
        client.close()


def _latencies(sandbox: Sandbox, client: docker.DockerClient, count: int) -> list[float]:
    out = []
    for i in range(count):
        name = f"lat{i:02d}"
        sandbox.create_service(name, labels={"placement.managed": "true"})

        def adopted(name: str = name) -> bool:
            attrs = client.api.inspect_service(name)
            return bool(attrs["UpdatedAt"] != attrs["CreatedAt"])

        _until(adopted, 60, f"{name} adopted")
        attrs = client.api.inspect_service(name)
        out.append(
            timestamp_from_attrs(attrs["UpdatedAt"]) - timestamp_from_attrs(attrs["CreatedAt"])
        )
    for i in range(count):
        client.api.remove_service(f"lat{i:02d}")
    return out


def _records(log: Path, since: int) -> Iterator[dict[str, Any]]:
    """The JSON lines of the decision log from line `since` on."""
    for line in log.read_text().splitlines()[since:]:
        if line.startswith("{"):
            yield json.loads(line)


def _writes(log: Path, since: int) -> int:
    """Decisions with an action (the guards' repeat of a rule's write not counted again)."""
    return sum(
        1
        for r in _records(log, since)
        if r.get("event") == "decision" and r.get("action") and r.get("rule") != "guard"
    )


def _surges_after(log: Path, since: int, down_at: float) -> tuple[float, float] | None:
    """Seconds from Swarm's down (as this bench saw it, polling) to the first and the
    last failover surge the controller decided: its own part of the failover."""
    times = [
        timestamp_from_attrs(r["time"]) - down_at
        for r in _records(log, since)
        if r.get("rule") == "failover" and r.get("outcome") == "surge"
    ]
    return (min(times), max(times)) if times else None


def _versions(client: docker.DockerClient) -> dict[str, int]:
    found = {s["ID"]: s["Version"]["Index"] for s in client.api.services()}
    found.update({n["ID"]: n["Version"]["Index"] for n in client.api.nodes()})
    return found


def measure(n_nodes: int, per_node: float, idle: float, workdir: Path) -> dict[str, Any]:
    victim = f"node-{n_nodes}"
    spec = SandboxSpec(name=f"scale-{n_nodes}", nodes=n_nodes, managers=3, heartbeat_seconds=1.0)
    row: dict[str, Any] = {"nodes": n_nodes}
    with Sandbox.up(spec) as sandbox:
        client = docker.DockerClient(base_url=sandbox.manager_host, version="auto", timeout=60)
        try:
            services = _services(n_nodes, per_node, victim)
            hot_specs = [s for s in services if s["hot"]]
            hot = [s["name"] for s in hot_specs]
            for s in services:
                sandbox.create_service(
                    s["name"],
                    replicas=s["replicas"],
                    labels=s["labels"],
                    constraints=s["constraints"],
                )
            started = time.monotonic()
            sandbox.wait_services_running([s["name"] for s in services], timeout=900)
            row["start_all_s"] = time.monotonic() - started
            _pin_hot(sandbox, client, hot, victim)
            ids = {s["name"]: client.api.inspect_service(s["name"])["ID"] for s in hot_specs}
            tier_of = {ids[s["name"]]: s["labels"]["placement.priority"] for s in hot_specs}
            row["services"], row["tasks"] = len(services), sum(s["replicas"] for s in services)
            row["on_victim"] = sum(
                1
                for t in client.api.tasks(filters={"desired-state": "running", "node": victim})
                if t["ServiceID"] in tier_of
            )
            row["native"] = _failover(sandbox, client, victim, tier_of)
            sandbox.restore(victim)
            sandbox.wait_node_state(victim, "ready", timeout=120)

            _pin_hot(sandbox, client, hot, victim)
            policy_path = workdir / f"policy-{n_nodes}.yaml"
            policy_path.write_text(POLICY)
            log = workdir / f"controller-{n_nodes}.log"
            controller = ControllerProcess(
                sandbox.manager_host,
                log,
                *("--policy", str(policy_path), "--log-format", "json", "--resync", RESYNC),
            )
            try:
                # Settled: no version moves for 10 s (adoption writes every service once).
                settled, before = time.monotonic(), _versions(client)
                deadline = settled + 600
                while time.monotonic() - settled < 10:
                    time.sleep(1)
                    now_versions = _versions(client)
                    if now_versions != before:
                        settled, before = time.monotonic(), now_versions
                    if time.monotonic() > deadline:
                        raise SystemExit("the controller did not settle in 10 minutes")
                pid = controller.proc.pid
                ticks, lines = _cpu_ticks(pid), len(log.read_text().splitlines())
                time.sleep(idle)
                row["idle_cpu_pct"] = 100 * (_cpu_ticks(pid) - ticks) / TICK / idle
                row["idle_writes"] = _writes(log, lines)
                row["idle_versions_moved"] = sum(
                    1 for k, v in _versions(client).items() if before.get(k) != v
                )
                row["rss_mib"] = _rss_mib(pid)
                row["split"] = _cycle_split(sandbox.manager_host, policy_path)
                row["latency_ms"] = [x * 1000 for x in _latencies(sandbox, client, 10)]
                time.sleep(3)
                ticks, lines = _cpu_ticks(pid), len(log.read_text().splitlines())
                started = time.monotonic()
                row["controller"] = _failover(sandbox, client, victim, tier_of)
                row["failover_cpu_pct"] = (
                    100 * (_cpu_ticks(pid) - ticks) / TICK / (time.monotonic() - started)
                )
                row["failover_writes"] = _writes(log, lines)
                row["surges_s"] = _surges_after(log, lines, row["controller"]["down_at"])
                row["failover_rss_mib"] = _rss_mib(pid)
            finally:
                controller.stop()
        finally:
            client.close()
    return row


def _tier_text(result: dict[str, Any]) -> str:
    parts = []
    for tier in TIERS:
        times = result["by_tier"][tier]
        parts.append(f"{tier} {max(times):.1f}" if times else f"{tier} -")
    return ", ".join(parts)


def report(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'nodes':>5} {'svcs':>4} {'tasks':>5} {'victim':>6} {'observe':>8} {'obs*':>6} "
        f"{'plan':>6} {'ev->w p50':>9} {'idle cpu':>8} {'rss':>6} {'idle w':>6}"
    )
    for r in rows:
        s, lat = r["split"], r["latency_ms"]
        print(
            f"{r['nodes']:>5} {r['services']:>4} {r['tasks']:>5} {r['on_victim']:>6} "
            f"{s['observe'] * 1000:>6.0f}ms {s['observe_reused'] * 1000:>4.0f}ms "
            f"{s['plan'] * 1000:>4.0f}ms {statistics.median(lat):>7.0f}ms "
            f"{r['idle_cpu_pct']:>7.2f}% {r['rss_mib']:>4.0f}MB "
            f"{r['idle_writes'] + r['idle_versions_moved']:>6}"
        )
    print()
    print("failover of the victim: seconds from Swarm's down to every replica running elsewhere")
    for r in rows:
        native, ctl = r["native"], r["controller"]
        ratio = ctl["all_s"] / native["all_s"] if native["all_s"] and ctl["all_s"] else None
        print(
            f"  {r['nodes']:>2} nodes, {r['on_victim']} tasks: Swarm alone {_fmt(native['all_s'])}"
            f" ({_tier_text(native)}); controller {_fmt(ctl['all_s'])} ({_tier_text(ctl)})"
            f"; ratio {_fmt(ratio, 2)}"
        )
        print(
            f"     writes {r['failover_writes']}, Raft entries {ctl['raft_entries']} "
            f"(Swarm alone {native['raft_entries']}), tasks created {ctl['tasks_created']} "
            f"(Swarm alone {native['tasks_created']}), containers {ctl['containers']} "
            f"(Swarm alone {native['containers']}), ran {ctl['ran']} "
            f"(Swarm alone {native['ran']}), surges decided {_span(r['surges_s'])} s "
            f"after the down, controller CPU "
            f"{r['failover_cpu_pct']:.1f}%, RSS {r['failover_rss_mib']:.0f} MB, "
            f"not whole in 180 s: {native['missing']} / {ctl['missing']}"
        )


def _span(span: tuple[float, float] | None) -> str:
    return "-" if span is None else f"{span[0]:.2f} to {span[1]:.2f}"


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,8,16,20", help="node counts, comma-separated")
    parser.add_argument("--services-per-node", type=float, default=7.5)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds measured at rest")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="scale-"))
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        rows.append(measure(size, args.services_per_node, args.idle, workdir))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    report(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    print(f"controller logs: {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
