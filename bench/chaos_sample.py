"""The chaos benchmark's observer: every service's running tasks every 0.5 s, and every
write to a service or node that the fault schedule did not make.

A task counts as running when Swarm wants it running, it is running, and its node is
ready (or `unknown`, as every node is just after a leader change) in a manager's view and
not failed by the schedule at that moment: a task on a node whose dockerd was just
killed, or whose link was cut, serves nobody even before Swarm notices. Both runs are
measured the same way.

Writes. The schedule never writes a node, so any change of a node's Spec is the
controller's. A service's (Spec, PreviousSpec) changes only by a write; a write the
schedule makes is recognised by its PreviousSpec being the spec it replaced (a write that
slipped in between is still counted). A Version.Index move with neither of those changed
is Swarm's own bookkeeping if UpdateStatus or Endpoint changed with it, or if every other
service moved to the same version (a new Raft leader's commit); one service's version
moving alone counts as a write (one that re-sent the same spec).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import docker
from chaos_load import LoadMeter

INTERVAL = 0.5


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _nodes_after_tasks(client: docker.DockerClient) -> tuple[Any, Any, Any]:
    """Nodes, services and tasks, the nodes read last: a task Swarm stopped because its
    node went down then never shows beside that node still `ready` (read first, the node
    could be, and the stop counted as one on a sound node)."""
    tasks = client.api.tasks()
    services = client.api.services()
    return client.api.nodes(), services, tasks


@dataclass
class ServiceState:
    spec: str
    previous: str
    version: int
    bookkeeping: str  # UpdateStatus and Endpoint: what Swarm itself updates


@dataclass
class Sample:
    t: float
    running: dict[str, int]  # service (stack name) -> tasks counted running
    desired: dict[str, int]
    # service -> hostname -> of those, the tasks there: how exposed each service was to
    # each node's faults (Swarm places an unmanaged service by node totals, which the
    # controller's steering changes).
    where: dict[str, dict[str, int]] = field(default_factory=dict)
    answered: bool = True  # False: no manager answered, the last sample carried over
    nodes: dict[str, str] = field(default_factory=dict)  # hostname -> state, as answered
    faulted: list[str] = field(default_factory=list)  # hostnames the schedule had failed
    busy: float = 0.0  # share of the machine's cores busy since the last sample
    controller_cpu: float = 0.0  # cores the controller process used since then


@dataclass
class Tally:
    """What one run saw, per service (stack names) unless said otherwise."""

    samples: list[Sample] = field(default_factory=list)
    writes: dict[str, list[float]] = field(default_factory=dict)  # "service x" / "node n"
    started: dict[str, set[str]] = field(default_factory=dict)  # task IDs that ever ran
    stops: dict[str, int] = field(default_factory=dict)  # stopped on a sound node, no edit
    overruns: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    # service -> per overrun, the stops it is made of: [when, hostname], so that each can
    # be set beside the controller's writes (bench/chaos_audit.py)
    overrun_stops: dict[str, list[list[list[object]]]] = field(default_factory=dict)
    stop_log: dict[str, list[list[object]]] = field(default_factory=dict)  # [when, hostname]
    failed_samples: int = 0
    write_log: list[tuple[float, str, str]] = field(default_factory=list)  # when, what, how
    waiting: dict[str, dict[str, int]] = field(default_factory=dict)  # service -> why -> samples
    waiting_at: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # ... -> when
    errors: list[str] = field(default_factory=list)  # samples the observer itself failed
    # service -> samples in which a slot ran two tasks Swarm wants running (a rollout's
    # leftover: more tasks than replicas, which no scale-down takes away)
    doubled_at: dict[str, list[float]] = field(default_factory=dict)
    # hostname -> [when, its labels] at the first sample and at each change: what a
    # constraint on node labels meant at a given moment (bench/chaos_audit.py)
    node_labels: dict[str, list[list[object]]] = field(default_factory=dict)


class Recorder:
    """Samples in a background thread. `edit` runs the schedule's own writes under the
    same lock, so they are told apart from everyone else's."""

    def __init__(
        self,
        desired: dict[str, int],  # the operator's replica counts, kept by the schedule
        budgets: dict[str, int],  # service -> max-unavailable
        prefix: str,
    ) -> None:
        # Set before `begin`: the Docker hosts of managers, best first, and the hostnames
        # the schedule has failed right now.
        self.hosts: Callable[[], list[str]] = list
        self.faulted: Callable[[], set[str]] = set
        self.meter: LoadMeter | None = None  # how busy the machine and the controller were
        self._desired = desired
        self._budgets, self._prefix = budgets, prefix
        self._clients: dict[str, docker.DockerClient] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.tally = Tally()
        self.start = time.monotonic()
        self._services: dict[str, ServiceState] = {}
        self._nodes: dict[str, str] = {}
        self._running: dict[str, set[str]] = {}  # service -> task IDs counted last sample
        self._outstanding: dict[str, int] = {}
        self._owing_since: dict[str, float] = {}  # service -> when its count last left 0
        self._edited: dict[str, float] = {}  # service -> when the schedule last edited it
        self.edit_grace = 20.0
        self._pending: set[str] = set()  # services the schedule is writing right now
        self._host_of: dict[str, str] = {}  # task ID -> hostname, last sample
        self._faulted_at: dict[str, float] = {}  # hostname -> last sample the schedule failed it

    # --- life cycle ---------------------------------------------------------------------

    def begin(self) -> None:
        self._thread.start()

    def reset(self) -> None:
        """Measure from now on: the set-up (deploy, the controller's adoption) is not counted."""
        with self._lock:
            # Times kept so far move to the new clock: an edit 15 s before t = 0 still
            # excuses the stops of its grace, and no more of them.
            shift = time.monotonic() - self.start
            self._edited = {k: v - shift for k, v in self._edited.items()}
            self._faulted_at = {k: v - shift for k, v in self._faulted_at.items()}
            self.start += shift
            started = self.tally.started
            self.tally = Tally(started={k: set(v) for k, v in started.items()})
            self.baseline = {k: set(v) for k, v in started.items()}
            self._outstanding = {}
            self._owing_since = {}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=20)
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                client.close()

    def now(self) -> float:
        return time.monotonic() - self.start

    # --- the schedule's writes ----------------------------------------------------------

    def edit(
        self, services: Iterable[str], write: Callable[[], tuple[bool, str]]
    ) -> tuple[bool, str]:
        """Run one of the schedule's writes to these services; returns whether Swarm took
        it, and what it said.

        Sampling goes on meanwhile (a write may be retried for a while), but the services'
        specs are not compared until the write is done; then a PreviousSpec other than
        the spec it replaced, and other than the spec it wrote, means someone else wrote
        in between (counted once). A write that failed is not the schedule's: whatever
        changed is left to `_observe`."""
        names = [self._prefix + s for s in services]
        with self._lock:
            self._observe()  # everyone else's writes so far are attributed first
            before = {n: self._services[n].spec for n in names if n in self._services}
            self._pending.update(names)
            for name in before:  # what the write stops while it runs is its doing too
                self._edited[name[len(self._prefix) :]] = self.now()
        try:
            ok, result = write()
        finally:
            with self._lock:
                attrs = self._read(lambda c: c.api.services()) if ok else None
                for svc in attrs or []:
                    name = svc["Spec"]["Name"]
                    if name not in before:
                        continue
                    state = self._state_of(svc)
                    # PreviousSpec equal to Spec: the edit sent again (a stack deploy
                    # refused half way and retried), not a write in between.
                    resent = state.previous == state.spec
                    if state.previous != before[name] and state.spec != before[name] and not resent:
                        self._wrote(f"service {name[len(self._prefix) :]}", "during an edit")
                    self._services[name] = state
                    self._edited[name[len(self._prefix) :]] = self.now()
                self._pending.difference_update(names)
        return ok, result

    # --- sampling -----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                try:
                    self._observe()
                except Exception as exc:  # the sampler must outlive one bad sample
                    self.tally.errors.append(f"{self.now():.1f}s {exc!r}")
            self._stop.wait(INTERVAL)

    def _client(self, host: str) -> docker.DockerClient:
        if host not in self._clients:
            self._clients[host] = docker.DockerClient(base_url=host, version="auto", timeout=2)
        return self._clients[host]

    def _read(self, call: Callable[[docker.DockerClient], Any]) -> Any:
        for host in self.hosts():
            try:
                return call(self._client(host))
            except Exception:  # a manager down or electing: ask the next
                continue
        return None

    def _state_of(self, svc: dict[str, Any]) -> ServiceState:
        return ServiceState(
            spec=_canon(svc.get("Spec")),
            previous=_canon(svc.get("PreviousSpec")),
            version=int(svc["Version"]["Index"]),
            bookkeeping=_canon([svc.get("UpdateStatus"), svc.get("Endpoint")]),
        )

    def _wrote(self, subject: str, what: str) -> None:
        self.tally.writes.setdefault(subject, []).append(self.now())
        self.tally.write_log.append((round(self.now(), 1), subject, what))

    def _observe(self) -> None:
        got = self._read(_nodes_after_tasks)
        t, faulted = self.now(), self.faulted()
        load = self.meter.read() if self.meter is not None else (0.0, 0.0)
        self._faulted_at.update(dict.fromkeys(faulted, t))
        if got is None:
            # No manager answers (a Raft election): nothing new is scheduled meanwhile, and
            # a task on a node the schedule has just failed serves nobody. So the sample is
            # the last one less the tasks on failed nodes, rather than the last one as it was.
            self.tally.failed_samples += 1
            kept = {
                service: [task for task in ids if self._host_of.get(task) not in faulted]
                for service, ids in self._running.items()
            }
            left = {service: len(ids) for service, ids in kept.items()}
            where = {service: self._hosts_of(ids) for service, ids in kept.items()}
            self.tally.samples.append(Sample(t, left, dict(self._desired), where, answered=False))
            self._stamp(sorted(faulted), load)
            return
        nodes, services, tasks = got
        hostname = {n["ID"]: n["Description"]["Hostname"] for n in nodes}
        # After a leader change every node is `unknown` until it reports to the new
        # leader, while its tasks run on: only `down` (or failed by the schedule) is lost.
        sound = {
            n["ID"]
            for n in nodes
            if n["Status"]["State"] in ("ready", "unknown") and hostname[n["ID"]] not in faulted
        }
        for n in nodes:
            spec = _canon(n["Spec"])
            if n["ID"] in self._nodes and self._nodes[n["ID"]] != spec:
                self._wrote(f"node {hostname[n['ID']]}", "spec")
            self._nodes[n["ID"]] = spec
            labels = dict(n["Spec"].get("Labels") or {})
            seen = self.tally.node_labels.setdefault(hostname[n["ID"]], [])
            if not seen or seen[-1][1] != labels:
                seen.append([round(t, 1), labels])
        names = {}
        quiet_moves: dict[int, list[str]] = {}  # new version -> services it moved alone
        for svc in services:
            name = svc["Spec"]["Name"]
            if not name.startswith(self._prefix):
                continue
            names[svc["ID"]] = name[len(self._prefix) :]
            if name in self._pending:
                continue  # `edit` compares it when the write is done
            state, old = self._state_of(svc), self._services.get(name)
            if old is None:
                pass
            elif state.spec != old.spec:
                self._wrote(f"service {names[svc['ID']]}", "spec")
            elif state.previous != old.previous:
                self._wrote(f"service {names[svc['ID']]}", "previous spec")
            elif state.version != old.version and state.bookkeeping == old.bookkeeping:
                quiet_moves.setdefault(state.version, []).append(names[svc["ID"]])
            self._services[name] = state
        for version, moved in quiet_moves.items():
            # A new Raft leader touches every service in one commit (measured: all six to
            # one version, only UpdatedAt with it); one service alone is someone's write.
            if len(moved) == 1:
                self._wrote(f"service {moved[0]}", f"version alone to {version}")
        self._count_tasks(t, tasks, names, sound, hostname)
        states = {hostname[n["ID"]]: n["Status"]["State"] for n in nodes}
        self.tally.samples[-1].nodes = states
        self._stamp(sorted(faulted), load)

    def _stamp(self, faulted: list[str], load: tuple[float, float]) -> None:
        sample = self.tally.samples[-1]
        sample.faulted = faulted
        sample.busy, sample.controller_cpu = load

    def _count_tasks(
        self,
        t: float,
        tasks: list[dict[str, Any]],
        names: dict[str, str],
        sound: set[str],
        hostname: dict[str, str],
    ) -> None:
        running: dict[str, set[str]] = {n: set() for n in names.values()}
        desired_of: dict[str, str] = {}
        for task in tasks:
            service = names.get(task.get("ServiceID", ""))
            if service is None:
                continue
            state = task["Status"]["State"]
            desired_of[task["ID"]] = task.get("DesiredState", "")
            has_container = bool((task["Status"].get("ContainerStatus") or {}).get("ContainerID"))
            if state == "running" or (
                state in ("complete", "shutdown", "failed") and has_container
            ):
                self.tally.started.setdefault(service, set()).add(task["ID"])
            if (
                state == "running"
                and task.get("DesiredState") == "running"
                and task.get("NodeID") in sound
            ):
                running[service].add(task["ID"])
            elif task.get("DesiredState") == "running" and state in ("pending", "assigned"):
                # Why a task waits, in Swarm's words: how a shortfall is explained.
                why = task["Status"].get("Err") or task["Status"].get("Message") or state
                seen = self.tally.waiting.setdefault(service, {})
                seen[why] = seen.get(why, 0) + 1
                when = self.tally.waiting_at.setdefault(service, {}).setdefault(why, [])
                if not when or when[-1] != round(t, 1):  # one entry per sample
                    when.append(round(t, 1))
        slot_of = {task["ID"]: task.get("Slot") for task in tasks}
        for service, ids in running.items():
            slots = [slot_of[task_id] for task_id in ids]
            if len(set(slots)) < len(slots):
                self.tally.doubled_at.setdefault(service, []).append(round(t, 1))
        node_of = {task["ID"]: task.get("NodeID") for task in tasks}
        self._host_of = {task: hostname.get(str(node), "") for task, node in node_of.items()}
        # A node restored moments ago: its dockerd restarted and stopped its containers,
        # which the node's own Swarm agent reports only now (a crash shorter than the
        # heartbeat grace leaves the node `ready` throughout). The schedule's doing.
        restarted = {
            node_id
            for node_id, host in hostname.items()
            if t - self._faulted_at.get(host, -1e9) < self.edit_grace
        }
        desired = dict(self._desired)
        for service, now in running.items():
            before = self._running.get(service, set())
            # A task that ran on a sound node and was stopped there, with no edit of the
            # schedule's to explain it: the controller's doing (Swarm alone stops nothing
            # on a sound node; the Swarm-alone run shows that noise floor).
            edited = t - self._edited.get(service, -1e9) < self.edit_grace
            stopped = [
                task_id
                for task_id in before - now
                if desired_of.get(task_id, "gone") != "running"
                and node_of.get(task_id) in sound - restarted
            ]
            if stopped and not edited:
                self.tally.stops[service] = self.tally.stops.get(service, 0) + len(stopped)
                log = self.tally.stop_log.setdefault(service, [])
                log += [[round(t, 1), self._host_of.get(task_id, "")] for task_id in stopped]
            deficit = max(0, desired.get(service, 0) - len(now))
            if edited:
                stopped = []
            out = self._outstanding.get(service, 0) + len(stopped) - len(now - before)
            out = max(0, min(out, deficit))
            budget = self._budgets.get(service, 1)
            if out and not self._outstanding.get(service, 0):
                self._owing_since[service] = round(t, 1)
            if out > budget and self._outstanding.get(service, 0) <= budget:
                self.tally.overruns.setdefault(service, []).append((round(t, 1), out))
                since = self._owing_since.get(service, 0.0)
                made_of = [s for s in self.tally.stop_log.get(service, []) if s[0] >= since]
                self.tally.overrun_stops.setdefault(service, []).append(made_of)
            self._outstanding[service] = out
        self._running = running
        counted = {s: len(ids) for s, ids in running.items()}
        where = {s: self._hosts_of(ids) for s, ids in running.items()}
        self.tally.samples.append(Sample(t, counted, desired, where))

    def _hosts_of(self, task_ids: Iterable[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for task in task_ids:
            host = self._host_of.get(task, "")
            out[host] = out.get(host, 0) + 1
        return out
