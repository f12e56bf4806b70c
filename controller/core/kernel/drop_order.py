"""Which tasks Swarm's scale-down drops: the order swarmkit's replicated orchestrator
keeps a service's slots in when its replica count goes down (the last ones go).

swarmkit sorts the slots running first (by observed state), then numbers each task as
the nth copy of the service on its node and sorts by that number, unassigned slots
last. So a scale-down drops a node's second copy before any first copy, running or not:
a not-running replacement alone on its node outlasts a running task that shares one.
The delayed replacements of Swarm's restart supervisor (desired state READY, assigned a
node at once) are slots like any other. Failover's trim, the speculative trim, a hold
and the ledger's charge for a lower count all read the same order.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.core.model import Task, TaskState

# Up to this many slots swarmkit's two sorts keep equal elements in order on every Go
# release Docker 20.10 to 26.1 was built with (insertion sort; a gap-6 pass above it).
STABLE_SORT_SLOTS = 6


def scale_down_order(tasks: Sequence[Task]) -> list[Task]:
    """The tasks in the order swarmkit keeps them when scaling down (the last ones go):
    running before not running, then by slot; each task counted as the nth copy on its
    node; sorted by that count, unassigned last."""
    by_state = sorted(tasks, key=lambda t: (t.state is not TaskState.RUNNING, t.slot))
    seen: dict[str, int] = {}
    indexed: list[tuple[int, Task]] = []
    for task in by_state:
        if task.node_id:
            seen[task.node_id] = seen.get(task.node_id, 0) + 1
            indexed.append((seen[task.node_id], task))
        else:
            indexed.append((-1, task))
    # Python's sort is stable, as swarmkit's is for few slots.
    indexed.sort(key=lambda it: (it[0] < 0, it[0]))
    return [t for _, t in indexed]


def dropped_tasks(slots: Sequence[Task], keep: int) -> tuple[Task, ...] | None:
    """The tasks a scale-down to `keep` drops, or None when Swarm's pick cannot be
    predicted: more slots than swarmkit sorts stably, or a slot holding two tasks (an
    update in progress), unless it drops only slots Swarm has not placed."""
    if len(slots) > STABLE_SORT_SLOTS or len({t.slot for t in slots}) != len(slots):
        return _unplaced_dropped(slots, keep)
    return tuple(scale_down_order(slots)[max(keep, 0) :])


def _unplaced_dropped(slots: Sequence[Task], keep: int) -> tuple[Task, ...] | None:
    """Swarm's pick where it drops only slots with no node: swarmkit sorts every slot
    that is not one task on a node after all the others, whatever its sort's stability,
    so when all of those are unplaced and the drop fits in them, only unplaced slots go
    (which of them is not known; none runs). None otherwise."""
    by_slot: dict[int, list[Task]] = {}
    for task in slots:
        by_slot.setdefault(task.slot, []).append(task)
    last = [s for s in by_slot.values() if len(s) != 1 or not s[0].node_id]
    drop = len(by_slot) - max(keep, 0)
    if drop <= 0:
        return ()
    if drop > len(last) or any(t.node_id for s in last for t in s):
        return None
    return tuple(t for s in last[:drop] for t in s)
