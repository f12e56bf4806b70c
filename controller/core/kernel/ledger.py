"""The one disruption budget: every write that stops, or may stop, a task spends from it.

What a write disrupts is read from the write itself and the snapshot: the nodes where
tasks may stop, the services whose tasks may stop, and per service how many tasks go
down with no replacement running first. The policy caps the first three per cycle
(`controller.budgets`: writes per cycle, per node, per service) and the last per service
(`max-unavailable`). Rules consult a copy charged with what earlier rules planned
(`PlanContext.budget()`), so they propose what will go through; the guards spend the
same budget again over the whole plan and drop what exceeds it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.actions import (
    Action,
    SetNodeAvailability,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
)
from controller.core.capacity import scale_down
from controller.core.constraints import ConstraintError, node_filter, parse_constraint
from controller.core.model import ACTIVE_TASK_STATES, Availability, ClusterSnapshot, Service
from controller.core.replicas import RecordError, read_record
from controller.policy import Budgets


def disrupted_nodes(action: Action) -> tuple[str, ...]:
    """Nodes the action names as losing tasks (moves are remembered by these)."""
    match action:
        case SetServiceConstraints(evicts_from=nodes) | SetReplicas(evicts_from=nodes):
            return nodes
        case SetNodeLabels(node_id=node, evicts_services=services) if services:
            return (node,)
        case SetNodeAvailability(node_id=node, availability=Availability.DRAIN):
            return (node,)
        case SetNodeAvailability(node_id=node, evicts_services=services) if services:
            return (node,)
    return ()


@dataclass(frozen=True, slots=True)
class Disruption:
    nodes: tuple[str, ...]  # where tasks may stop
    services: tuple[str, ...]  # whose tasks may stop
    # Service id -> tasks stopped before a replacement runs (what max-unavailable caps).
    unavailable: Mapping[str, int] = field(default_factory=dict)


def _tasks_on(snapshot: ClusterSnapshot, service_id: str, nodes: tuple[str, ...]) -> int:
    """Active tasks of the service on those nodes, where the node is up: a task on a node
    that is down (or that health reports failed) is unavailable already."""
    up = {n for n in nodes if (node := snapshot.node_by_id.get(n)) is not None and node.is_ready}
    return sum(
        1
        for t in snapshot.tasks_of(service_id)
        if t.node_id in up and t.desired_state in ACTIVE_TASK_STATES
    )


def _evicted(
    snapshot: ClusterSnapshot, node_id: str, services: tuple[str, ...], *, drain: bool
) -> Disruption:
    if drain:  # a drain stops every task on the node
        services = tuple(
            sorted(
                {*services}
                | {
                    t.service_id
                    for t in snapshot.tasks
                    if t.node_id == node_id and t.desired_state in ACTIVE_TASK_STATES
                }
            )
        )
    # Swarm's constraint enforcer and a drain stop first, whatever the update order.
    unavailable = {s: _tasks_on(snapshot, s, (node_id,)) for s in services}
    return Disruption((node_id,), services, {s: n for s, n in unavailable.items() if n})


def _scaled_down(snapshot: ClusterSnapshot, action: SetReplicas) -> Disruption | None:
    service = snapshot.service_by_id.get(action.service_id)
    current = service.replicas if service is not None else None
    if service is None or current is None or action.replicas >= current:
        return None
    # Swarm drops unassigned slots first, then tasks on the nodes with the most.
    down = scale_down(snapshot, service, current - action.replicas)
    nodes = tuple(sorted({*down.certain, *(down.tied if down.picks else ())}))
    return Disruption(nodes, (service.id,)) if nodes else None


def _ruled_out(snapshot: ClusterSnapshot, action: SetServiceConstraints) -> tuple[str, ...]:
    """Ready nodes running the service's tasks that the new constraints no longer allow:
    Swarm replaces those tasks, whether or not the write names the nodes. (A task on a
    node that is down is lost already: excluding that node stops nothing.)"""
    try:
        allowed = node_filter(parse_constraint(c) for c in action.constraints)
    except ConstraintError:
        return ()  # Swarm refuses the write itself
    running = {
        t.node_id
        for t in snapshot.tasks_of(action.service_id)
        if t.node_id and t.desired_state in ACTIVE_TASK_STATES
    }
    return tuple(
        sorted(
            n
            for n in running
            if (node := snapshot.node_by_id.get(n)) is not None
            and node.is_ready
            and not allowed(node)
        )
    )


def _spare(snapshot: ClusterSnapshot, service: Service) -> int:
    """Tasks running on ready nodes beyond the operator's count (a surge recorded on the
    service raised it); 0 without a readable record."""
    try:
        record = read_record(service.labels)
    except RecordError:
        return 0
    if record is None:
        return 0
    ready = {n.id for n in snapshot.nodes if n.is_ready}
    running = sum(1 for t in snapshot.tasks_of(service.id) if t.node_id in ready and t.is_running)
    return max(0, running - record.base)


def disruption(action: Action, snapshot: ClusterSnapshot) -> Disruption | None:
    """What the action may stop, or None when it stops nothing."""
    match action:
        case SetServiceConstraints() if action.evicts_from or _ruled_out(snapshot, action):
            nodes = tuple(sorted({*action.evicts_from, *_ruled_out(snapshot, action)}))
            service = snapshot.service_by_id.get(action.service_id)
            stop_first = service is None or service.update_order != "start-first"
            moved = _tasks_on(snapshot, action.service_id, nodes) if stop_first else 0
            if service is not None and service.update_batch:
                # Swarm's updater replaces them a batch at a time, each once the last
                # runs; its constraint enforcer judges a task by the task's own spec.
                moved = min(moved, service.update_batch)
            if moved and service is not None:
                # A stop-first move's surge runs beyond the operator's count: stopping
                # that many leaves no replica missing.
                moved = max(0, moved - _spare(snapshot, service))
            return Disruption(
                nodes, (action.service_id,), {action.service_id: moved} if moved else {}
            )
        case SetReplicas(evicts_from=nodes) if nodes:
            # A surge-and-trim never runs fewer than the desired count; a scale-down
            # lowers the count itself (preemption: the service's `preemptible` consents).
            return Disruption(nodes, (action.service_id,))
        case SetReplicas():
            return _scaled_down(snapshot, action)
        case SetNodeAvailability(
            node_id=node, availability=Availability.DRAIN, evicts_services=services
        ):
            return _evicted(snapshot, node, services, drain=True)
        case (
            SetNodeLabels(node_id=node, evicts_services=services)
            | SetNodeAvailability(node_id=node, evicts_services=services)
        ) if services:
            return _evicted(snapshot, node, services, drain=False)
    return None


class DisruptionBudget:
    """The disruptions spent so far this cycle, per cycle, node, service and tasks."""

    def __init__(
        self, budgets: Budgets, snapshot: ClusterSnapshot, max_unavailable: Mapping[str, int]
    ) -> None:
        self._budgets = budgets
        self._snapshot = snapshot
        self._max_unavailable = max_unavailable
        self._spent: Counter[tuple[str, str]] = Counter()
        self._down: Counter[str] = Counter()

    def copy(self) -> DisruptionBudget:
        other = DisruptionBudget(self._budgets, self._snapshot, self._max_unavailable)
        other._spent = self._spent.copy()
        other._down = self._down.copy()
        return other

    def _name(self, service_id: str) -> str:
        found = self._snapshot.service_by_id.get(service_id)
        return found.name if found is not None else service_id

    def refusal(self, action: Action) -> str | None:
        """The budget this action would exceed, if any (None also when it stops nothing)."""
        found = disruption(action, self._snapshot)
        if found is None:
            return None
        b = self._budgets
        for scope, keys, limit in (
            ("cycle", ("",), b.actions_per_cycle),
            ("node", found.nodes, b.actions_per_node),
            ("service", found.services, b.actions_per_service),
        ):
            if any(self._spent[scope, key] >= limit for key in keys):
                return f"budget: {limit} disruptive actions per {scope}"
        for service_id, count in sorted(found.unavailable.items()):
            limit = self._max_unavailable.get(service_id, 0)
            if self._down[service_id] + count > limit:
                return (
                    f"budget: max-unavailable {limit} for {self._name(service_id)}, and this "
                    f"write stops {count} of its task(s) at once"
                )
        return None

    def spend(self, action: Action) -> None:
        found = disruption(action, self._snapshot)
        if found is None:
            return
        self._spent["cycle", ""] += 1
        self._spent.update(("node", n) for n in found.nodes)
        self._spent.update(("service", s) for s in found.services)
        self._down.update(found.unavailable)
