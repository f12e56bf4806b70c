"""A small model of Swarm's orchestrator and scheduler, written apart from the core.

Enough to replay plans against: a replica count change removes tasks the way swarmkit's
replicated orchestrator does (unassigned first, then the n-th copy on a node for the
largest n) and adds unassigned ones; the scheduler then places unassigned tasks on
nodes with room, fewest tasks of the service first. Tasks removed are gone at once (no
stop grace), which is the one simplification.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from itertools import combinations

from controller.core.actions import Action
from controller.core.apply import apply_actions
from controller.core.model import ClusterSnapshot, Resources, Service, Task, TaskState

SHORT = "no suitable node (insufficient resources on 3 nodes)"


def _index_keys(tasks: list[Task]) -> dict[str, float]:
    """swarmkit's sort key for a scale-down: the n-th copy on its node, unassigned last."""
    keys: dict[str, float] = {}
    per_node: Counter[str] = Counter()
    ordered = sorted(tasks, key=lambda t: (t.state is not TaskState.RUNNING, t.slot))
    for task in ordered:
        if task.node_id:
            per_node[task.node_id] += 1
            keys[task.id] = per_node[task.node_id]
        else:
            keys[task.id] = float("inf")
    return keys


def removals(tasks: list[Task], count: int) -> Iterator[frozenset[str]]:
    """Every set of task ids a scale-down by `count` may remove (any tie-break)."""
    keys = _index_keys(tasks)
    ids = sorted(keys)
    for chosen in combinations(ids, count):
        removed = set(chosen)
        kept = [i for i in ids if i not in removed]
        if all(keys[r] >= keys[k] for r in removed for k in kept):
            yield frozenset(removed)


def _fits(free: Resources, need: Resources) -> bool:
    return need.fits_within(free)


def _minus(a: Resources, b: Resources) -> Resources:
    kinds = {*a.generic, *b.generic}
    return Resources(
        a.nano_cpus - b.nano_cpus,
        a.memory_bytes - b.memory_bytes,
        {k: a.generic.get(k, 0) - b.generic.get(k, 0) for k in sorted(kinds)},
    )


def free_room(snap: ClusterSnapshot) -> dict[str, Resources]:
    free = {n.id: n.capacity for n in snap.nodes if n.accepts_tasks}
    for task in snap.tasks:
        if task.node_id in free:
            free[task.node_id] = _minus(
                free[task.node_id], snap.service_by_id[task.service_id].reservations
            )
    return free


def fit_count(free: dict[str, Resources], service: Service) -> int:
    total = 0
    for room in free.values():
        left = room
        while _fits(left, service.reservations) and total < 1000:
            left = _minus(left, service.reservations)
            total += 1
    return total


def schedule(snap: ClusterSnapshot) -> ClusterSnapshot:
    """Place unassigned tasks where they fit; the rest stay pending, short of resources."""
    free = free_room(snap)
    placed: list[Task] = []
    mine: Counter[tuple[str, str]] = Counter(
        (t.service_id, t.node_id) for t in snap.tasks if t.node_id
    )
    for task in sorted(snap.tasks, key=lambda t: (t.node_id != "", t.service_id, t.slot)):
        if task.node_id:
            placed.append(task)
            continue
        need = snap.service_by_id[task.service_id].reservations
        fitting = sorted(
            (mine[(task.service_id, n)], n) for n, room in free.items() if _fits(room, need)
        )
        if not fitting:
            placed.append(replace(task, state=TaskState.PENDING, error=SHORT))
            continue
        node_id = fitting[0][1]
        free[node_id] = _minus(free[node_id], need)
        mine[(task.service_id, node_id)] += 1
        placed.append(replace(task, node_id=node_id, state=TaskState.RUNNING, error=""))
    return replace(snap, tasks=tuple(placed))


def execute(snap: ClusterSnapshot, actions: tuple[Action, ...]) -> ClusterSnapshot:
    """Apply the writes, then let the orchestrator and the scheduler react."""
    after = apply_actions(snap, actions)
    tasks: list[Task] = []
    for service in after.services:
        own = [t for t in after.tasks if t.service_id == service.id]
        wanted = service.replicas or 0
        if len(own) > wanted:
            gone = next(removals(own, len(own) - wanted))
            own = [t for t in own if t.id not in gone]
        next_slot = max((t.slot for t in own), default=0) + 1
        while len(own) < wanted:
            own.append(
                Task(
                    id=f"t-{service.name}-{next_slot}-v{service.version}",
                    service_id=service.id,
                    node_id="",
                    slot=next_slot,
                    desired_state=TaskState.RUNNING,
                    state=TaskState.NEW,
                )
            )
            next_slot += 1
        tasks.extend(own)
    return schedule(replace(after, tasks=tuple(tasks)))
