"""The whole cycle at scale: the real Docker client on recorded API answers.

planner_scale.py times `plan()` on attrs already decoded. What a controller pays each
cycle is more: the list calls over the engine's socket, their JSON decoding, the
conversion into a snapshot, the plan. This bench builds the same settled clusters as
planner_scale.py (about 20 running tasks per node), adds the task history Swarm keeps
(`--history` finished tasks per running one; Swarm keeps up to 5 per slot), serves the
answers as recorded JSON from a small HTTP server on a unix socket (Starlette on
uvicorn, in a process of its own as dockerd is; the mirror's config too, as the
settled controller wrote it), and runs the controller's own `observe_cluster` and
`plan()` through docker-py against it, as `run` does:

- observe: every API call of a cycle, HTTP and JSON decoding included, and the snapshot;
  split into the running-task list and the history list;
- plan: `plan()` on that snapshot with the memory of a settled controller;
- cycle: both (the writes of a settled cluster: none), with the history listed in it as
  the one-shot commands do, and without it as `run` does (its resync timer lists the
  history in another thread; also timed: a cycle while that listing runs beside it);
- view: the web view's document (every service explained), built once per cycle while
  a page is open.

    python bench/cycle_scale.py [--sizes 100,1000] [--history 2] [--repeat 3] [--profile N]

No swarm needed. Times are the best of --repeat (the machine is shared).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import multiprocessing
import os
import pstats
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner_scale import NOW, best_of, cluster_attrs, policy, settle

from controller.adapters.attrs import snapshot_from_attrs
from controller.adapters.engine import ClusterObserver, observe_cluster
from controller.adapters.task_list import list_tasks
from controller.core.actions import SetMirror
from controller.core.memory import Memory
from controller.core.mirror import (
    DOWNS_PREFIX,
    ENTRY_PREFIX,
    MIRROR_CONFIG,
    Mirror,
    patched,
)
from controller.core.plan import plan
from controller.policy import Policy
from controller.runtime.view_document import view_document

API = "1.41"
# The mirror's sections a settled controller keeps: the copies and the nodes' downs.
SETTLED = (ENTRY_PREFIX, DOWNS_PREFIX)


def history_of(tasks: list[dict[str, Any]], per_task: int) -> list[dict[str, Any]]:
    """Finished tasks as Swarm keeps them: earlier tasks of each slot, shut down."""
    out = []
    for task in tasks:
        for k in range(per_task):
            done = json.loads(json.dumps(task))
            done["ID"] = f"{task['ID']}h{k}"
            done["DesiredState"] = "shutdown"
            done["Status"] = {**done["Status"], "State": "shutdown", "Message": "shutdown"}
            out.append(done)
    return out


def mirrored(
    attrs: dict[str, list[dict[str, Any]]], pol: Policy, memory: Memory
) -> tuple[Memory, dict[str, str]]:
    """The mirror's labels as the settled controller wrote them (a real cycle
    reads and parses that config too), and its memory after that write."""
    snapshot = replace(snapshot_from_attrs(**attrs), mirror=Mirror())  # none kept yet
    result = plan(snapshot=snapshot, policy=pol, memory=memory, now=NOW)
    labels: dict[str, str] = {}
    for action in result.actions:
        if isinstance(action, SetMirror):
            save = {k: v for k, v in action.save.items() if k.startswith(SETTLED)}
            labels = patched(labels, (), save)
    return result.memory, labels


class RecordedEngine:
    """The answers of a manager's API for one cluster, served over a unix socket."""

    def __init__(
        self,
        attrs: dict[str, list[dict[str, Any]]],
        history: list[dict[str, Any]],
        records: dict[str, str] | None = None,
    ):
        self.answers = {
            "nodes": json.dumps(attrs["nodes"]).encode(),
            "services": json.dumps(attrs["services"]).encode(),
            "running": json.dumps(attrs["tasks"]).encode(),
            "shutdown": json.dumps(history).encode(),
        }
        if records is not None:
            config = {
                "ID": "recordsconfig",
                "Version": {"Index": 1},
                "Spec": {"Name": MIRROR_CONFIG, "Labels": records},
            }
            self.answers["config"] = json.dumps(config).encode()
        self._dir = tempfile.mkdtemp(prefix="engine-")
        self.socket = os.path.join(self._dir, "docker.sock")
        routes = [
            Route("/_ping", self._ping),
            Route("/version", self._version),
            Route(f"/v{API}/nodes", self._list("nodes")),
            Route(f"/v{API}/services", self._list("services")),
            Route(f"/v{API}/tasks", self._tasks),
            Route(f"/v{API}/configs/{{name}}", self._config),
            Route(f"/v{API}/swarm", self._swarm),
        ]
        config = uvicorn.Config(
            Starlette(routes=routes),
            uds=self.socket,
            log_level="error",
            lifespan="off",
            timeout_keep_alive=600,  # a cycle at scale outlasts the default 5 s
        )
        # A process of its own, as dockerd is: in a thread of the measured process, its
        # sending would take the interpreter from the client it serves.
        server = uvicorn.Server(config)
        self._process = multiprocessing.get_context("fork").Process(target=server.run, daemon=True)

    def __enter__(self) -> RecordedEngine:
        self._process.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.socket(socket.AF_UNIX) as probe:
                    probe.connect(self.socket)
                break
            except OSError:
                time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.join(timeout=10)
        shutil.rmtree(self._dir, ignore_errors=True)

    async def _ping(self, request: Request) -> Response:
        return Response(b"OK")

    async def _version(self, request: Request) -> Response:
        return Response(json.dumps({"ApiVersion": API, "Version": "26.1.5"}).encode())

    def _list(self, what: str) -> Callable[[Request], Any]:
        async def answer(request: Request) -> Response:
            return Response(self.answers[what], media_type="application/json")

        return answer

    async def _tasks(self, request: Request) -> Response:
        filters = json.loads(request.query_params.get("filters", "{}"))
        wanted = filters.get("desired-state", ["running"])
        state = next(iter(wanted)) if isinstance(wanted, dict | list) else wanted
        what = "shutdown" if state == "shutdown" else "running"
        return Response(self.answers[what], media_type="application/json")

    async def _swarm(self, request: Request) -> Response:
        spec = {"Dispatcher": {"HeartbeatPeriod": 5_000_000_000}}
        return Response(json.dumps({"ID": "swarm", "Spec": spec}).encode())

    async def _config(self, request: Request) -> Response:
        if "config" not in self.answers:
            return Response(b'{"message":"config not found"}', status_code=404)
        return Response(self.answers["config"], media_type="application/json")


def measure(n_nodes: int, history: int, repeat: int, profile: bool) -> dict[str, float]:
    pol = policy("standby", None)
    attrs = cluster_attrs(n_nodes)
    memory, _ = settle(attrs, pol)
    memory, records = mirrored(attrs, pol, memory)
    finished = history_of(attrs["tasks"], history)
    engine = RecordedEngine(attrs, finished, records)
    listed = len(finished)
    # Only the recorded answers stay: the controller's heap holds no copy of the cluster's
    # JSON, and every collection the measured code triggers would walk this one.
    del attrs, finished
    gc.collect()
    with engine:
        client = docker.DockerClient(base_url=f"unix://{engine.socket}", version=API, timeout=60)
        try:
            snap = observe_cluster(client)
            now = NOW + 100

            def cycle() -> object:
                return plan(snapshot=observe_cluster(client), policy=pol, memory=memory, now=now)

            # As `run` observes: the history listed by its resync timer, off the worker.
            reusing = ClusterObserver(client, history_every=lambda: 1e9)
            reusing()

            def cycle_reusing() -> object:
                return plan(snapshot=reusing(), policy=pol, memory=memory, now=now)

            def cycle_beside_listing() -> float:
                """A cycle's time while the resync timer lists the history in another
                thread (they share the interpreter), the listing started first."""
                lister = threading.Thread(target=reusing.refresh_history)
                lister.start()
                try:
                    start = time.perf_counter()
                    cycle_reusing()
                    return time.perf_counter() - start
                finally:
                    lister.join()

            if profile:
                prof = cProfile.Profile()
                prof.enable()
                cycle()
                prof.disable()
                pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
            row = {
                "nodes": n_nodes,
                "services": len(snap.services),
                "tasks": len(snap.tasks),
                "history": listed,
                "mb": sum(len(a) for a in engine.answers.values()) / (1 << 20),
                "running_s": best_of(repeat, lambda: list_tasks(client, desired_state="running")),
                "history_s": best_of(repeat, lambda: list_tasks(client, desired_state="shutdown")),
                "running_whole_s": best_of(
                    repeat, lambda: client.api.tasks(filters={"desired-state": "running"})
                ),
                "history_whole_s": best_of(
                    repeat, lambda: client.api.tasks(filters={"desired-state": "shutdown"})
                ),
                "observe_s": best_of(repeat, lambda: observe_cluster(client)),
                "plan_s": best_of(
                    repeat, lambda: plan(snapshot=snap, policy=pol, memory=memory, now=now)
                ),
                "cycle_s": best_of(repeat, cycle),
                "observe_reusing_s": best_of(repeat, reusing),
                "cycle_reusing_s": best_of(repeat, cycle_reusing),
                "refresh_s": best_of(repeat, reusing.refresh_history),
                "cycle_beside_s": min(cycle_beside_listing() for _ in range(repeat)),
                "actions": len(plan(snapshot=snap, policy=pol, memory=memory, now=now).actions),
            }
            planned = plan(snapshot=snap, policy=pol, memory=memory, now=now)
            row["view_s"] = best_of(
                repeat,
                lambda: json.dumps(
                    view_document(
                        snapshot=snap,
                        plan=planned,
                        policy=pol,
                        timeline=(),
                        role="leader",
                        now=now,
                    ),
                    default=str,
                ),
            )
        finally:
            client.close()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000", help="node counts, comma-separated")
    parser.add_argument("--history", type=int, default=2, help="finished tasks per running one")
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing; the best counts")
    parser.add_argument("--profile", type=int, default=0, help="cProfile a cycle at this size")
    args = parser.parse_args()
    print(
        f"{'nodes':>6} {'services':>8} {'tasks':>7} {'history':>7} {'answers':>8} "
        f"{'list run':>8} {'(whole)':>8} {'list hist':>9} {'(whole)':>8} "
        f"{'observe':>8} {'plan':>7} {'cycle':>7} "
        f"{'observe*':>8} {'cycle*':>7} {'refresh':>7} {'cycle+':>7} {'actions':>7} {'view':>7}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        r = measure(size, args.history, args.repeat, profile=size == args.profile)
        print(
            f"{r['nodes']:>6} {r['services']:>8} {r['tasks']:>7} {r['history']:>7} "
            f"{r['mb']:>6.1f}MB {r['running_s'] * 1000:>6.0f}ms "
            f"{r['running_whole_s'] * 1000:>6.0f}ms {r['history_s'] * 1000:>7.0f}ms "
            f"{r['history_whole_s'] * 1000:>6.0f}ms "
            f"{r['observe_s'] * 1000:>6.0f}ms {r['plan_s'] * 1000:>5.0f}ms "
            f"{r['cycle_s'] * 1000:>5.0f}ms {r['observe_reusing_s'] * 1000:>6.0f}ms "
            f"{r['cycle_reusing_s'] * 1000:>5.0f}ms {r['refresh_s'] * 1000:>5.0f}ms "
            f"{r['cycle_beside_s'] * 1000:>5.0f}ms {r['actions']:>7} "
            f"{r['view_s'] * 1000:>5.0f}ms",
            flush=True,
        )
    print("list run / list hist: the running tasks and the history as the observer lists them")
    print("(HTTP, and JSON decoding of the fields it reads); (whole): docker-py's tasks(), every")
    print("field decoded; observe, cycle: every call, the history included, and the plan, as")
    print("the one-shot commands do. observe*, cycle*: a cycle of `run`, whose resync timer")
    print("lists the history off the worker (refresh: that listing and its failures);")
    print("cycle+: a cycle while such a listing runs in another thread. view: the web view's")
    print("document, built once per cycle while a page is open.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
