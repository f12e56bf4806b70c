"""Planner scale benchmark: how plan time and memory grow with the cluster.

Synthetic clusters of 100, 1,000 and 5,000 nodes with about 20 tasks per node, built as
the Docker API returns them (node, service and task attrs shaped like Docker 26's), then:

- snapshot: `snapshot_from_attrs` over all the attrs, decoded from JSON as the API hands
  them over (what `observe_cluster` does once its list calls have returned);
- plan (steady): `plan()` on a cluster the controller has already settled, with the
  memory of a previous cycle: the cost of every resync cycle;
- plan (node down): the same cluster with one node just marked down, which wakes the
  failover path for every service that had a task there;
- peak memory: tracemalloc's peak from decoding the attrs' JSON to the end of both plans,
  every cache emptied first (a controller holds the attrs while it converts them).

The workload (one service per node on average, replicas cycling 1..80, mean 20):
every service managed; every 10th has three preferred owners with immediate failback,
every 10th (offset 1) spreads over racks of 40 nodes, every 10th (offset 2) is in one
of 7 soft anti-affinity classes, every 10th (offset 3) opts into rebalancing, every
10th (offset 4) is low priority; all reserve 0.1 CPU and 64 MiB. Before timing, the
controller's non-disruptive writes (adoption, steering constraints, node labels) are
applied until the plan proposes none, so the steady cycle sees the constraints a
settled cluster carries: with `--steering standby` (the default policy) each steered
service excludes every node but its targets and one standby, one `node.id!=` each, as
long as that is at most `steering-max-exclusions` (100 by default) and none beyond it;
so at 100 nodes the constraints grow with services x nodes, and from there on with
services. `--max-exclusions 1000000` keeps standby's full lists at every size;
`--steering open` excludes none at rest.
The cluster is placed as the policy wants it (replicas across racks, preferred owners
first, anti-affinity classes apart), so the steady plan has no action.

Times are the best of --repeat runs (this machine is shared; the best is the least
disturbed). The growth exponent is the least-squares slope of log(time) on log(nodes).

Usage: python bench/planner_scale.py [--sizes 100,1000,5000] [--repeat 3]
                                    [--steering standby|strict|open]
                                    [--max-exclusions N] [--profile N]
No Docker needed. At 5,000 nodes with standby's full lists it needs about 3 GB of memory.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import functools
import gc
import json
import math
import pstats
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from controller.adapters.attrs import snapshot_from_attrs
from controller.core.actions import Action, SetNodeLabels, SetServiceConstraints
from controller.core.memory import Memory
from controller.core.plan import plan
from controller.policy import Policy, policy_from_data

TASKS_PER_NODE = 20
RACK_SIZE = 40
REPLICA_CYCLE = (1, 2, 3, 5, 10, 20, 40, 80, 19, 20)  # mean 20
NOW = 1_750_000_000.0
STAMP = "2025-06-15T15:06:40.123456789Z"
MIB = 1 << 20


def policy(steering: str, max_exclusions: int | None) -> Policy:
    controller: dict[str, Any] = {"steering": steering}
    if max_exclusions is not None:
        controller["steering-max-exclusions"] = max_exclusions
    return policy_from_data(
        {
            "apiVersion": "placement/v1",
            "defaults": {"managed": True, "failback-delay": "30s"},
            "nodes": {"fault-domains": {"rack": "rack"}},
            "controller": controller,
        }
    )


def node_attrs(i: int) -> dict[str, Any]:
    host = f"node-{i:05d}"
    manager = i < 3
    attrs: dict[str, Any] = {
        "ID": f"nodeid{i:019d}",
        "Version": {"Index": 100 + i},
        "CreatedAt": STAMP,
        "UpdatedAt": STAMP,
        "Spec": {
            "Labels": {"rack": f"r{i // RACK_SIZE:03d}", "zone": f"z{i % 3}"},
            "Role": "manager" if manager else "worker",
            "Availability": "active",
        },
        "Description": {
            "Hostname": host,
            "Platform": {"Architecture": "x86_64", "OS": "linux"},
            "Resources": {"NanoCPUs": 16_000_000_000, "MemoryBytes": 64 << 30},
            "Engine": {
                "EngineVersion": "26.1.5",
                "Plugins": [{"Type": "Log", "Name": "json-file"}],
            },
            "TLSInfo": {"TrustRoot": "-----BEGIN CERTIFICATE-----\n" + "A" * 600},
        },
        "Status": {"State": "ready", "Addr": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"},
    }
    if manager:
        attrs["ManagerStatus"] = {"Leader": i == 0, "Reachability": "reachable"}
    return attrs


def service_labels(i: int, hosts: list[str]) -> dict[str, str]:
    labels = {"com.docker.stack.namespace": f"stack{i % 50}", "owner": f"team-{i % 13}"}
    kind = i % 10
    if kind == 0:
        picks = [hosts[(i * 7 + k * 97) % len(hosts)] for k in range(3)]
        labels["placement.preferred-nodes"] = ",".join(picks)
        labels["placement.failback"] = "immediate"
    elif kind == 1:
        labels["placement.spread"] = "rack"
    elif kind == 2:
        labels["placement.anti-affinity"] = f"class{i % 7}"
    elif kind == 3:
        labels["placement.rebalance"] = "on"
    elif kind == 4:
        labels["placement.priority"] = "low"
    return labels


def service_attrs(i: int, replicas: int, hosts: list[str]) -> dict[str, Any]:
    name = f"svc-{i:05d}"
    return {
        "ID": f"svcid{i:020d}",
        "Version": {"Index": 1000 + i},
        "CreatedAt": STAMP,
        "UpdatedAt": STAMP,
        "Spec": {
            "Name": name,
            "Labels": service_labels(i, hosts),
            "TaskTemplate": {
                "ContainerSpec": {
                    "Image": "registry.example/app@sha256:" + "0" * 64,
                    "Args": ["serve", "--port", "8080"],
                    "Env": ["MODE=production", f"NAME={name}"],
                    "Init": False,
                    "StopGracePeriod": 10_000_000_000,
                },
                "Resources": {
                    "Limits": {"NanoCPUs": 500_000_000, "MemoryBytes": 256 * MIB},
                    "Reservations": {"NanoCPUs": 100_000_000, "MemoryBytes": 64 * MIB},
                },
                "RestartPolicy": {"Condition": "any", "Delay": 5_000_000_000, "MaxAttempts": 0},
                "Placement": {"Constraints": [], "Platforms": [{"Architecture": "amd64"}]},
                "Networks": [{"Target": "netid000000000000000001"}],
                "ForceUpdate": 0,
                "Runtime": "container",
            },
            "Mode": {"Replicated": {"Replicas": replicas}},
            "UpdateConfig": {"Parallelism": 1, "Order": "start-first", "FailureAction": "pause"},
            "EndpointSpec": {"Mode": "vip"},
        },
        "Endpoint": {"Spec": {"Mode": "vip"}, "VirtualIPs": [{"Addr": "10.0.0.2/24"}]},
    }


def task_attrs(service: dict[str, Any], slot: int, node: dict[str, Any]) -> dict[str, Any]:
    sid = service["ID"]
    return {
        "ID": f"task{sid[5:]}{slot:05d}",
        "Version": {"Index": 5000},
        "CreatedAt": STAMP,
        "UpdatedAt": STAMP,
        "Labels": {},
        # Docker repeats the task template in every task, as it was when the task was
        # made: the controller's later constraint writes restart nothing, so settled
        # tasks carry the operator's spec (the JSON round trip in `measure` gives every
        # task its own copy, as the API does).
        "Spec": copy.deepcopy(service["Spec"]["TaskTemplate"]),
        "ServiceID": sid,
        "Slot": slot,
        "NodeID": node["ID"],
        "Status": {
            "Timestamp": STAMP,
            "State": "running",
            "Message": "started",
            "ContainerStatus": {"ContainerID": "c" * 64, "PID": 4242, "ExitCode": 0},
            "PortStatus": {},
        },
        "DesiredState": "running",
        "NetworksAttachments": [
            {"Network": {"ID": "netid000000000000000001"}, "Addresses": ["10.0.1.7/24"]}
        ],
    }


def cluster_attrs(n_nodes: int) -> dict[str, list[dict[str, Any]]]:
    """A cluster already placed as the policy wants it, so the steady cycle is steady:
    replicas step across racks (a stride of RACK_SIZE + 1 nodes), preferred owners hold
    the first replicas of their services, and the services of one anti-affinity class
    share a cursor of their own, so they never share a node."""
    nodes = [node_attrs(i) for i in range(n_nodes)]
    hosts = [n["Description"]["Hostname"] for n in nodes]
    index = {h: i for i, h in enumerate(hosts)}
    services: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    cursors: dict[str, int] = {}
    total, i = n_nodes * TASKS_PER_NODE, 0
    while len(tasks) < total:
        replicas = min(REPLICA_CYCLE[i % len(REPLICA_CYCLE)], total - len(tasks))
        svc = service_attrs(i, replicas, hosts)
        services.append(svc)
        labels = svc["Spec"]["Labels"]
        preferred = labels.get("placement.preferred-nodes", "")
        used = [index[h] for h in preferred.split(",") if h][:replicas]
        lane = labels.get("placement.anti-affinity", "all")
        while len(used) < replicas:
            at = cursors.get(lane, 0)
            cursors[lane] = at + 1
            spot = (at * (RACK_SIZE + 1)) % n_nodes
            if spot not in used:
                used.append(spot)
        for slot, spot in enumerate(used, 1):
            tasks.append(task_attrs(svc, slot, nodes[spot]))
        i += 1
    return {"nodes": nodes, "services": services, "tasks": tasks}


def _apply_quiet(attrs: dict[str, list[dict[str, Any]]], actions: tuple[Action, ...]) -> int:
    """Apply the writes that move no task to the attrs, as Swarm would; count them."""
    services = {s["ID"]: s for s in attrs["services"]}
    nodes = {n["ID"]: n for n in attrs["nodes"]}
    applied = 0
    for action in actions:
        if isinstance(action, SetServiceConstraints) and not action.evicts_from:
            spec = services[action.service_id]["Spec"]
            spec["TaskTemplate"]["Placement"]["Constraints"] = list(action.constraints)
            labels = {k: v for k, v in spec["Labels"].items() if k not in action.remove_labels}
            spec["Labels"] = {**labels, **action.set_labels}
        elif isinstance(action, SetNodeLabels) and not action.evicts_services:
            spec = nodes[action.node_id]["Spec"]
            labels = {k: v for k, v in spec["Labels"].items() if k not in action.remove_labels}
            spec["Labels"] = {**labels, **action.set_labels}
        else:
            continue
        target = services.get(getattr(action, "service_id", "")) or nodes[action.node_id]  # type: ignore[union-attr]
        target["Version"]["Index"] += 1
        applied += 1
    return applied


def settle(attrs: dict[str, list[dict[str, Any]]], pol: Policy) -> tuple[Memory, int]:
    """Let the controller adopt and steer the cluster (writes that move nothing)."""
    memory, rounds = Memory(), 0
    for rounds in range(1, 8):
        snap = snapshot_from_attrs(**attrs)
        result = plan(snapshot=snap, policy=pol, memory=memory, now=NOW + rounds)
        memory = result.memory
        if not _apply_quiet(attrs, result.actions):
            break
    return memory, rounds


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def down_one(attrs: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    nodes = [dict(n) for n in attrs["nodes"]]
    victim = len(nodes) // 2
    nodes[victim] = {**nodes[victim], "Status": {**nodes[victim]["Status"], "State": "down"}}
    return {**attrs, "nodes": nodes}


def timings(
    attrs: dict[str, Any], pol: Policy, memory: Memory, repeat: int, profile: bool
) -> dict[str, float]:
    snap = snapshot_from_attrs(**attrs)
    down = snapshot_from_attrs(**down_one(attrs))
    now = NOW + 100

    def steady() -> object:
        return plan(snapshot=snap, policy=pol, memory=memory, now=now)

    def failing() -> object:
        return plan(snapshot=down, policy=pol, memory=memory, now=now)

    if profile:
        prof = cProfile.Profile()
        prof.enable()
        steady()
        failing()
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
    return {
        "services": len(snap.services),
        "tasks": len(snap.tasks),
        "constraints": sum(len(s.constraints) for s in snap.services),
        "snapshot_s": best_of(repeat, lambda: snapshot_from_attrs(**attrs)),
        "plan_steady_s": best_of(repeat, steady),
        "plan_down_s": best_of(repeat, failing),
        "steady_actions": len(plan(snapshot=snap, policy=pol, memory=memory, now=now).actions),
        "down_actions": len(plan(snapshot=down, policy=pol, memory=memory, now=now).actions),
    }


def peak_memory(text: str, pol: Policy, memory: Memory) -> tuple[float, float]:
    """(attrs held, peak) in MiB, from decoding the attrs to the end of both plans, with
    every cache emptied first."""
    for obj in gc.get_objects():  # start cold: what the caches hold counts too
        if isinstance(obj, functools._lru_cache_wrapper):
            obj.cache_clear()
    gc.collect()
    tracemalloc.start()
    held = json.loads(text)  # traced from here: the attrs as a controller holds them
    base = tracemalloc.get_traced_memory()[0]
    now = NOW + 100
    plan(snapshot=snapshot_from_attrs(**held), policy=pol, memory=memory, now=now)
    plan(snapshot=snapshot_from_attrs(**down_one(held)), policy=pol, memory=memory, now=now)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return base / MIB, peak / MIB


def measure(
    n_nodes: int, repeat: int, profile: bool, steering: str, max_exclusions: int | None
) -> dict[str, float]:
    pol = policy(steering, max_exclusions)
    settled = cluster_attrs(n_nodes)
    memory, rounds = settle(settled, pol)
    # As the Docker API hands them over: decoded JSON, nothing shared between objects.
    text = json.dumps(settled)
    del settled
    out: dict[str, float] = {"nodes": n_nodes, "settle_rounds": rounds}
    out.update(timings(json.loads(text), pol, memory, repeat, profile))
    out["attrs_mb"], out["peak_mb"] = peak_memory(text, pol, memory)
    return out


def slope(xs: list[float], ys: list[float]) -> float:
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum(
        (a - mx) ** 2 for a in lx
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000", help="node counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing; the best counts")
    parser.add_argument("--profile", type=int, default=0, help="cProfile the plans at this size")
    parser.add_argument(
        "--steering",
        choices=("standby", "strict", "open"),
        default="standby",
        help="controller.steering: standby (the default) excludes every node but the "
        "targets and one standby, open excludes none at rest",
    )
    parser.add_argument(
        "--max-exclusions",
        type=int,
        default=None,
        help="controller.steering-max-exclusions (default: the policy's default, 100); "
        "a large value keeps standby steering at every size",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    header = (
        f"{'nodes':>6} {'services':>8} {'tasks':>7} {'constraints':>11} "
        f"{'snapshot':>9} {'plan':>8} {'plan,down':>9} {'actions':>7} "
        f"{'attrs':>8} {'peak':>8}"
    )
    cap = args.max_exclusions if args.max_exclusions is not None else "default"
    print(f"controller.steering: {args.steering}, steering-max-exclusions: {cap}")
    print(header)
    for size in sizes:
        row = measure(
            size,
            args.repeat,
            profile=size == args.profile,
            steering=args.steering,
            max_exclusions=args.max_exclusions,
        )
        rows.append(row)
        print(
            f"{row['nodes']:>6} {row['services']:>8} {row['tasks']:>7} "
            f"{row['constraints']:>11} {row['snapshot_s'] * 1000:>7.0f}ms "
            f"{row['plan_steady_s'] * 1000:>6.0f}ms {row['plan_down_s'] * 1000:>7.0f}ms "
            f"{row['steady_actions']:>3}/{row['down_actions']:<3} "
            f"{row['attrs_mb']:>6.0f}MB {row['peak_mb']:>6.0f}MB",
            flush=True,
        )
    if len(rows) >= 2:
        xs = [float(r["nodes"]) for r in rows]
        print(
            "growth exponent (time ~ nodes^k): "
            f"snapshot k={slope(xs, [r['snapshot_s'] for r in rows]):.2f}, "
            f"plan k={slope(xs, [r['plan_steady_s'] for r in rows]):.2f}, "
            f"plan with a node down k={slope(xs, [r['plan_down_s'] for r in rows]):.2f}"
        )
    print("peak: tracemalloc's peak while converting the attrs and planning both cycles,")
    print("      the attrs (held throughout) included; attrs: their size before conversion.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
