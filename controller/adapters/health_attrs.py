"""Swarm's task history -> workload events: which task failed on which node, when.

Swarm keeps a few finished tasks per slot (`task-history-retention-limit`, 5 by default),
so the failures of the last minutes are there to read on every poll. Only tasks that
ended in state `failed` count: a task the controller or Swarm stopped on purpose ends
`shutdown`, and one the constraint enforcer turned away ends `rejected`.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.adapters.attrs import Attrs, AttrsError, timestamp_from_attrs
from controller.core.outside_inputs import WorkloadEvent, WorkloadEventKind


def failure_events_from_attrs(tasks: Iterable[Attrs]) -> tuple[WorkloadEvent, ...]:
    """One event per failed task that ran on a node; unreadable tasks are skipped."""
    events: dict[str, WorkloadEvent] = {}
    for attrs in tasks:
        status = attrs.get("Status") or {}
        if str(status.get("State", "")).lower() != "failed":
            continue
        task_id, service_id, node_id = attrs.get("ID"), attrs.get("ServiceID"), attrs.get("NodeID")
        if not (
            isinstance(task_id, str) and isinstance(service_id, str) and isinstance(node_id, str)
        ):
            continue
        if not node_id:
            continue
        try:
            at = timestamp_from_attrs(status.get("Timestamp"))
        except AttrsError:
            continue
        if not at:
            continue
        detail = str(status.get("Err") or status.get("Message") or "")
        events[task_id] = WorkloadEvent(
            task_id, service_id, node_id, at, WorkloadEventKind.FAILED, detail[:200]
        )
    return tuple(sorted(events.values(), key=lambda e: (e.at, e.task_id)))
