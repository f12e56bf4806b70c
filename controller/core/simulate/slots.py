"""Which slots swarmkit's replicated orchestrator adds and removes when a count changes.

Scale-down (`reconcile`, `case specifiedSlots < numSlots`): slots are ordered running
first, then by slot number; each slot holding exactly one task on a node gets the index
"n-th copy of the service on that node"; every other slot (no node yet, or two tasks in a
start-first replacement) sorts last. The slots after the first `replicas` are removed:
unassigned ones first, then one copy from each of the nodes with the most. swarmkit's sort
is not stable; here, of slots with equal index, the later in that order goes first (a
non-running slot before a running one, a higher slot number before a lower).

Scale-up (`addTasks`): each new task takes the lowest slot number no task holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from controller.core.model import TaskState


@dataclass(frozen=True, slots=True)
class SlotTask:
    """What the orchestrator looks at in one task."""

    id: str
    slot: int
    node_id: str  # "" while unassigned
    state: TaskState


def slots_to_remove(tasks: Iterable[SlotTask], replicas: int) -> list[int]:
    """The slot numbers a scale-down to `replicas` removes (every task in them goes)."""
    by_slot: dict[int, list[SlotTask]] = {}
    for task in tasks:
        by_slot.setdefault(task.slot, []).append(task)
    ordered = sorted(
        by_slot.items(),
        key=lambda item: (not any(t.state is TaskState.RUNNING for t in item[1]), item[0]),
    )
    copies: dict[str, int] = {}
    indexed: list[tuple[float, int, int]] = []  # (index, position, slot)
    for position, (slot, members) in enumerate(ordered):
        if len(members) == 1 and members[0].node_id:
            node = members[0].node_id
            copies[node] = copies.get(node, 0) + 1
            indexed.append((copies[node], position, slot))
        else:
            indexed.append((float("inf"), position, slot))
    indexed.sort()
    return [slot for _, _, slot in indexed[replicas:]]


def new_slots(used: Iterable[int], count: int) -> list[int]:
    """The lowest `count` slot numbers not in `used`."""
    taken, slot = set(used), 0
    out: list[int] = []
    while len(out) < count:
        slot += 1
        if slot not in taken:
            out.append(slot)
    return out
