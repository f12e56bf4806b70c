"""Room on nodes as Swarm's scheduler counts it, and where a scale-down frees it.

Swarm's scheduler admits a task on a node when the node's resources (`Description.
Resources`) minus the reservations of the tasks assigned there (assigned to running)
cover the task's reservation. It ignores real usage, so this arithmetic is exact up to
tasks that are stopping: they keep their reservation until they stop, but the snapshot
(tasks Swarm wants running) no longer shows them. Room they hold therefore looks free a
few seconds early, which only ever makes the rules wait, never act twice.

A scale-down does not choose tasks at random (swarmkit, replicated orchestrator): it
removes unassigned tasks first, then the tasks that are the n-th copy on their node for
the largest n. Which node gives up a task among nodes tied on n is Swarm's pick, so
`scale_down` reports the certain removals and the tied choice separately.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations, product
from math import comb

from controller.core.constraints import node_filter, parse_constraint
from controller.core.model import ClusterSnapshot, Resources, Service, Task, TaskState
from controller.core.replicas import Operation
from controller.core.snapshot_cache import per_snapshot

# States in which Swarm's scheduler counts a task's reservation against its node.
RESERVING_STATES = frozenset(
    {
        TaskState.ASSIGNED,
        TaskState.ACCEPTED,
        TaskState.PREPARING,
        TaskState.READY,
        TaskState.STARTING,
        TaskState.RUNNING,
    }
)
SHORT_OF_RESOURCES = "insufficient resources"
UNLIMITED = 1 << 30
# Swarm's tie-breaks are enumerated up to this many combinations; past it only the
# certain removals count, which can only make the rule take more, never act on hope.
MAX_OUTCOMES = 256


def _combine(a: Resources, b: Resources, sign: int) -> Resources:
    kinds = sorted({*a.generic, *b.generic})
    return Resources(
        a.nano_cpus + sign * b.nano_cpus,
        a.memory_bytes + sign * b.memory_bytes,
        {k: a.generic.get(k, 0) + sign * b.generic.get(k, 0) for k in kinds},
    )


def times(need: Resources, n: int) -> Resources:
    return Resources(
        need.nano_cpus * n, need.memory_bytes * n, {k: v * n for k, v in need.generic.items()}
    )


def copies_fitting(free: Resources, need: Resources) -> int:
    """How many tasks reserving `need` fit in `free`."""
    limits = [free.generic.get(k, 0) // v for k, v in need.generic.items() if v > 0]
    if need.nano_cpus > 0:
        limits.append(free.nano_cpus // need.nano_cpus)
    if need.memory_bytes > 0:
        limits.append(free.memory_bytes // need.memory_bytes)
    return max(0, min(limits)) if limits else UNLIMITED


def describe_resources(r: Resources, *, only: Resources | None = None) -> str:
    """`slot=2, cpu=1.5, memory=512MiB`; with `only`, just the kinds `only` asks for."""
    if only is not None:
        r = Resources(
            r.nano_cpus if only.nano_cpus else 0,
            r.memory_bytes if only.memory_bytes else 0,
            {k: r.generic.get(k, 0) for k, v in only.generic.items() if v},
        )
    parts = [f"{k}={v}" for k, v in sorted(r.generic.items())]
    if r.nano_cpus:
        parts.append(f"cpu={r.nano_cpus / 1e9:g}")
    if r.memory_bytes:
        parts.append(f"memory={r.memory_bytes // (1 << 20)}MiB")
    return ", ".join(parts) or "nothing"


def is_short_of_resources(task: Task) -> bool:
    return is_unassigned(task) and SHORT_OF_RESOURCES in task.error


def is_unassigned(task: Task) -> bool:
    return task.is_pending and not task.node_id


def eligible_nodes(snapshot: ClusterSnapshot, service: Service) -> tuple[str, ...]:
    """Nodes that accept tasks and satisfy every constraint of the service.

    Raises ConstraintError for a constraint the controller cannot read.
    """
    satisfies = node_filter(parse_constraint(c) for c in service.constraints)
    return tuple(n.id for n in snapshot.nodes if n.accepts_tasks and satisfies(n))


def wanted_count(service: Service) -> int:
    """Replicas the service is meant to run: a surge's extra tasks are not wanted."""
    record = service.replica_record  # None too when it cannot be read
    if record is not None and record.operation in {Operation.SURGE, Operation.REBALANCE}:
        return record.base
    return service.replicas or 0


def demand(snapshot: ClusterSnapshot, service: Service) -> int:
    """Unassigned tasks the service still needs placed, at most what it wants.

    During a rolling update each slot with an unassigned task counts once: a start-first
    update's new task needs room beside the old one it replaces, or the update stalls
    (and a slot whose old task is still pending too needs one task's room, not two).
    """
    if service.id not in _with_unassigned(snapshot):
        return 0
    tasks = snapshot.tasks_of(service.id)
    unassigned = sum(1 for t in tasks if is_unassigned(t))
    if service.updating:
        return len({t.slot for t in tasks if is_unassigned(t)})
    ready = {n.id for n in snapshot.nodes if n.is_ready}
    placed = sum(1 for t in tasks if t.node_id in ready and t.state in RESERVING_STATES)
    return max(0, min(unassigned, wanted_count(service) - placed))


@per_snapshot
def _with_unassigned(snapshot: ClusterSnapshot) -> frozenset[str]:
    """Services with an unassigned task: the only ones with any demand."""
    return frozenset(t.service_id for t in snapshot.tasks if is_unassigned(t))


@dataclass(frozen=True)
class Room:
    """Free resources per node that accepts tasks, and tasks per service and node."""

    free: Mapping[str, Resources]
    counts: Mapping[str, Mapping[str, int]]  # service id -> node id -> assigned tasks

    def fit_count(self, service: Service, eligible: Iterable[str]) -> int:
        """How many more tasks of the service fit, over all the given nodes."""
        total = 0
        for node_id in eligible:
            if node_id not in self.free:
                continue
            fit = copies_fitting(self.free[node_id], service.reservations)
            if service.max_replicas_per_node:
                here = self.counts.get(service.id, {}).get(node_id, 0)
                fit = min(fit, max(0, service.max_replicas_per_node - here))
            total = min(UNLIMITED, total + fit)
        return total

    def place(self, service: Service, eligible: Iterable[str], count: int) -> Room:
        """Room after placing up to `count` tasks, on the nodes Swarm would rank first:
        fewest tasks of the service, then fewest tasks overall."""
        if count <= 0:
            return self
        free = dict(self.free)
        mine = Counter(self.counts.get(service.id, {}))
        load = Counter[str]()
        for per_node in self.counts.values():
            load.update(per_node)
        candidates = [n for n in eligible if n in free]
        for _ in range(count):
            fitting = [
                n
                for n in candidates
                if copies_fitting(free[n], service.reservations) > 0
                and not (service.max_replicas_per_node and mine[n] >= service.max_replicas_per_node)
            ]
            if not fitting:
                break
            best = min(fitting, key=lambda n: (mine[n], load[n], n))
            free[best] = _combine(free[best], service.reservations, -1)
            mine[best] += 1
            load[best] += 1
        counts = {**self.counts, service.id: dict(mine)}
        return Room(free=free, counts=counts)

    def taken(self, service: Service, per_node: Mapping[str, int]) -> Room:
        """Room after placing tasks of `service` on exactly these nodes (node id -> tasks)."""
        free = dict(self.free)
        mine = dict(self.counts.get(service.id, {}))
        for node_id, n in per_node.items():
            if n <= 0:
                continue
            if node_id in free:
                free[node_id] = _combine(free[node_id], times(service.reservations, n), -1)
            mine[node_id] = mine.get(node_id, 0) + n
        return Room(free=free, counts={**self.counts, service.id: mine})

    def freed(self, removals: Iterable[tuple[Service, Mapping[str, int]]]) -> Room:
        """Room after removing tasks: (service, node id -> tasks removed there)."""
        free = dict(self.free)
        counts = {sid: dict(per_node) for sid, per_node in self.counts.items()}
        for service, per_node in removals:
            for node_id, n in per_node.items():
                if n and node_id in free:
                    free[node_id] = _combine(free[node_id], times(service.reservations, n), 1)
                mine = counts.setdefault(service.id, {})
                mine[node_id] = mine.get(node_id, 0) - n
        return Room(free=free, counts=counts)


@per_snapshot  # read by preemption and restore alike; Room is never changed in place
def observe_room(snapshot: ClusterSnapshot) -> Room:
    counts: dict[str, dict[str, int]] = {}
    for task in snapshot.tasks:
        if not task.node_id or task.state not in RESERVING_STATES:
            continue
        if task.service_id not in snapshot.service_by_id:
            continue
        per_node = counts.setdefault(task.service_id, {})
        per_node[task.node_id] = per_node.get(task.node_id, 0) + 1
    # Plain sums per node, made into Resources once: one object per node, not per task.
    cpus: dict[str, int] = {}
    memory: dict[str, int] = {}
    generic: dict[str, dict[str, int]] = {}
    for service_id, per_node in counts.items():
        need = snapshot.service_by_id[service_id].reservations
        for node_id, n in per_node.items():
            cpus[node_id] = cpus.get(node_id, 0) + need.nano_cpus * n
            memory[node_id] = memory.get(node_id, 0) + need.memory_bytes * n
            kinds = generic.setdefault(node_id, {})
            for kind, amount in need.generic.items():
                kinds[kind] = kinds.get(kind, 0) + amount * n
    used = {n: Resources(cpus[n], memory[n], generic[n]) for n in cpus}
    free = {
        n.id: _combine(n.capacity, used.get(n.id, Resources()), -1)
        for n in snapshot.nodes
        if n.accepts_tasks
    }
    return Room(free=free, counts=counts)


@dataclass(frozen=True, slots=True)
class ScaleDown:
    """What Swarm removes when a service is scaled down by some count."""

    certain: Mapping[str, int]  # node id -> tasks removed there whatever Swarm picks
    tied: tuple[str, ...] = ()  # nodes among which Swarm picks ...
    picks: int = 0  # ... this many, one task each

    def outcomes(self) -> list[dict[str, int]]:
        if not self.picks:
            return [dict(self.certain)]
        out = []
        for chosen in combinations(self.tied, self.picks):
            removed = dict(self.certain)
            for node_id in chosen:
                removed[node_id] = removed.get(node_id, 0) + 1
            out.append(removed)
        return out

    def outcome_count(self) -> int:
        return comb(len(self.tied), self.picks) if self.picks else 1


def scale_down(snapshot: ClusterSnapshot, service: Service, count: int) -> ScaleDown:
    """Swarm's choice of tasks when `service` goes down by `count` replicas."""
    tasks = snapshot.tasks_of(service.id)
    unassigned = sum(1 for t in tasks if not t.node_id)
    left = max(0, count - unassigned)
    per_node = Counter(t.node_id for t in tasks if t.node_id)
    certain: dict[str, int] = {}
    level = max(per_node.values(), default=0)
    while left and level > 0:
        # One task per node that holds at least `level` copies: the `level`-th copy.
        at_level = sorted(n for n, c in per_node.items() if c >= level)
        if left < len(at_level):
            return ScaleDown(certain=certain, tied=tuple(at_level), picks=left)
        for node_id in at_level:
            certain[node_id] = certain.get(node_id, 0) + 1
        left -= len(at_level)
        level -= 1
    return ScaleDown(certain=certain)


def running_count(snapshot: ClusterSnapshot, service: Service) -> int:
    """The service's tasks that run on a live node (`ClusterSnapshot.live_node_ids`, the
    availability ledger's definition): a crashed engine's tasks read running until Swarm
    marks its node down."""
    live = snapshot.live_node_ids
    return sum(1 for t in snapshot.tasks_of(service.id) if t.node_id in live and t.is_running)


def worst_case(
    room: Room, downs: list[tuple[Service, ScaleDown]], *, service: Service, eligible: Iterable[str]
) -> int:
    """Tasks of `service` that fit after the scale-downs, whichever tasks Swarm picks."""
    nodes = tuple(eligible)
    total = 1
    for _, down in downs:
        total *= down.outcome_count()
    if total > MAX_OUTCOMES:
        return room.freed((s, d.certain) for s, d in downs).fit_count(service, nodes)
    worst = UNLIMITED
    for choice in product(*(down.outcomes() for _, down in downs)):
        after = room.freed(zip((s for s, _ in downs), choice, strict=True))
        worst = min(worst, after.fit_count(service, nodes))
    return worst
