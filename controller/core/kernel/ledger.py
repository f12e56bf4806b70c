"""The availability ledger: one account of every stop the controller causes.

For each service it counts, from the snapshot alone, how many of its replicas are down
or in flight right now, and every write that may stop a task is charged against it
before the guards let the write through:

- wanted: the operator's count. A replica record's base while the record is the
  controller's; the live count once an operator scaled over the record (now, or once
  before: `Memory.overridden`). A count the controller lowered with the service's consent
  (preemption of a preemptible service, a hold of a priority-none one) is wanted as it
  now is. A global service wants one task on each node Swarm alone would run it on: every
  node that is not down or drained and holds an assigned task of it, or that its
  operator's constraints allow while the controller's own (deny labels, exclusions) keep
  it off;
- up: its tasks running on a live node (`ClusterSnapshot.live_node_ids`: Swarm calls it
  ready and no liveness signal or health report says it is gone), that is not drained
  and that the service's constraints still allow. A task on an `unknown`,
  `disconnected` or suspected node is down for this count (a crashed engine's tasks read
  running until Swarm marks its node down), though it still holds its room. A task the
  constraints now refuse is leaving, whether or not Swarm has stopped it yet;
- down: wanted less up, at least 0: replicas missing, starting, leaving or on a node in
  doubt now, whoever stopped them.

A write's charge is the up tasks it may stop before a replacement runs, less the spare
ones (up beyond wanted: a surge the controller made). An eviction (a node label, a
constraint, a drain) is charged its running tasks on a node in doubt too: down for the
count, such a task may well serve (a false alarm), so stopping it may take the service
below what Swarm alone keeps. Only a task on a node that is down or reported failed
costs nothing to stop. It goes through only while down,
the charges of the writes planned before it and its own stay within the service's
`max-unavailable`. Nothing is remembered: a stop made in the last cycle shows in this
cycle's snapshot (its task is leaving, or its replacement still starting), so the
account holds across cycles, restarts and lease takeovers.

Besides the ledger, the policy caps the writes that may stop tasks per cycle, per node
and per service (`controller.budgets`). The guards charge one ledger through the whole
plan, each write as they admit it, and hold what exceeds it; a rule consults a copy of
that ledger as the rules before it left it (`PlanContext.budget()`), so it proposes
what will go through.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
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
from controller.core.kernel.drop_order import dropped_tasks
from controller.core.labels import exclusion_constraints, steering_constraint
from controller.core.model import (
    Availability,
    ClusterSnapshot,
    Node,
    Service,
    ServiceMode,
    Task,
)
from controller.core.outside_inputs import HealthState
from controller.core.replicas import operator_changed
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


def moved_from(action: Action) -> tuple[str, ...]:
    """Nodes a write moves the service's tasks off: they start its cooldown and are not
    taken straight back. A failover surge's trim stops tasks but moves none."""
    if isinstance(action, SetReplicas) and action.ends_surge:
        return ()
    return disrupted_nodes(action)


def _allows(service: Service) -> Callable[[Node], bool]:
    """The service's constraints as a node test (one Swarm refuses: every node passes,
    for Swarm keeps the tasks that run)."""
    try:
        return node_filter(parse_constraint(c) for c in service.constraints)
    except ConstraintError:
        return lambda _node: True


def _stays(node: Node | None, live: frozenset[str], allows: Callable[[Node], bool]) -> bool:
    """A running task on this node counts as up: the node is live, not drained, and the
    service's constraints still allow it."""
    return (
        node is not None
        and node.id in live
        and node.availability is not Availability.DRAIN
        and allows(node)
    )


def up_tasks(snapshot: ClusterSnapshot, service: Service) -> tuple[Task, ...]:
    """The service's tasks that run and may stay where they run: the one count of what is
    up, for every rule and guard."""
    allows = _allows(service)
    nodes, live = snapshot.node_by_id, snapshot.live_node_ids
    return tuple(
        t
        for t in snapshot.tasks_of(service.id)
        if t.is_running and _stays(nodes.get(t.node_id), live, allows)
    )


def wanted_count(service: Service, overridden: Mapping[str, float] | None = None) -> int:
    """The replicas the ledger holds a replicated service to (see the module's docstring):
    never below the operator's count, whatever a replica record says."""
    replicas = service.replicas or 0
    if service.replica_record_error is not None:
        return replicas
    record = service.replica_record
    if record is None or operator_changed(service, record, overridden):
        return replicas
    return min(replicas, record.base)


def _operators(service: Service) -> Callable[[Node], bool]:
    """The service's constraints without the controller's deny steering and exclusions
    (its possible-owner constraint stays: it is the operator's policy)."""
    ours = {steering_constraint(service.name), *exclusion_constraints(service.excluded)}
    try:
        return node_filter(parse_constraint(c) for c in service.constraints if c not in ours)
    except ConstraintError:
        return lambda _node: True


def global_wanted(snapshot: ClusterSnapshot, service: Service) -> int:
    """A global service's replicas: one per node Swarm alone would run it on (a node not
    down or drained with an assigned task of it, or one its operator's constraints allow,
    whether or not the controller's keep it off: a deploy that drops the controller's
    constraints lets a vetoed node start a task, not yet running when they are put back). A
    node a health report calls failed counts, though the rules see it down: Swarm alone
    reads no report and keeps the task there, so its loss is one of max-unavailable."""
    assigned = {
        t.node_id for t in snapshot.tasks_of(service.id) if t.is_active and not t.is_pending
    }
    failed = {r.node_id for r in snapshot.health if r.state is HealthState.FAILED}
    operators = _operators(service)
    return sum(
        1
        for n in snapshot.nodes
        if (n.holds_tasks or n.id in failed)
        and n.availability is not Availability.DRAIN
        and (n.id in assigned or operators(n))
    )


@dataclass(frozen=True, slots=True)
class Standing:
    """One service's account in the snapshot: the count it is held to, and its up tasks."""

    wanted: int
    up: int

    @property
    def down(self) -> int:
        return max(0, self.wanted - self.up)

    @property
    def spare(self) -> int:
        return max(0, self.up - self.wanted)


def standing(
    snapshot: ClusterSnapshot, service: Service, overridden: Mapping[str, float] | None = None
) -> Standing:
    """A service's account: a global service's task on each node is one replica, held
    to max-unavailable like any other (a task of it is never replaced elsewhere)."""
    up = len(up_tasks(snapshot, service))
    if service.mode is ServiceMode.GLOBAL:
        return Standing(max(up, global_wanted(snapshot, service)), up)
    if service.mode is not ServiceMode.REPLICATED:
        return Standing(up, up)
    return Standing(wanted_count(service, overridden), up)


@dataclass(frozen=True, slots=True)
class Disruption:
    nodes: tuple[str, ...]  # where tasks may stop
    services: tuple[str, ...]  # whose tasks may stop
    # Service id -> up tasks it may stop before a replacement runs (before spare).
    stops: Mapping[str, int] = field(default_factory=dict)


def _written_off(snapshot: ClusterSnapshot) -> frozenset[str]:
    """Nodes Swarm has given up (down) or a health report says failed: a task there is
    lost already, and stopping it costs nothing."""
    failed = {r.node_id for r in snapshot.health if r.state is HealthState.FAILED}
    return frozenset(n.id for n in snapshot.nodes if not n.holds_tasks or n.id in failed)


def _up_on(snapshot: ClusterSnapshot, service_id: str, nodes: Iterable[str]) -> int:
    """The tasks of the service on those nodes that a stop may take from what really
    runs: its up tasks, and its running tasks on a node in doubt (`unknown`,
    `disconnected`, suspected). Those are down for the count, but a node in doubt may be
    a false alarm whose tasks still serve, so stopping one is charged too. Only a task on
    a node that is down or reported failed costs nothing to stop."""
    service = snapshot.service_by_id.get(service_id)
    if service is None:
        return 0
    wanted = set(nodes) - _written_off(snapshot)
    allows, by_id = _allows(service), snapshot.node_by_id
    return sum(
        1
        for t in snapshot.tasks_of(service.id)
        if t.node_id in wanted
        and t.is_running
        and (node := by_id.get(t.node_id)) is not None
        and node.availability is not Availability.DRAIN
        and allows(node)
    )


def _evicted(
    snapshot: ClusterSnapshot, node_id: str, services: tuple[str, ...], *, drain: bool
) -> Disruption:
    if drain:  # a drain stops every task on the node
        services = tuple(
            sorted(
                {*services}
                | {t.service_id for t in snapshot.tasks if t.node_id == node_id and t.is_active}
            )
        )
    # Swarm's constraint enforcer and a drain stop first, whatever the update order.
    stops = {s: _up_on(snapshot, s, (node_id,)) for s in services}
    return Disruption((node_id,), services, {s: n for s, n in stops.items() if n})


def _slots(snapshot: ClusterSnapshot, service: Service) -> tuple[Task, ...]:
    """Every slot a scale-down counts: the tasks Swarm wants running and its delayed
    replacements (desired READY)."""
    delayed = tuple(t for t in snapshot.delayed if t.service_id == service.id)
    return (*snapshot.tasks_of(service.id), *delayed)


def scale_down_stops(
    snapshot: ClusterSnapshot, service: Service, replicas: int
) -> tuple[tuple[str, ...], int]:
    """Lowering the service's count to `replicas`: the nodes where an up task may stop,
    and how many up tasks may stop. Predicted in swarmkit's own order when it can be
    (core/kernel/drop_order), else every node Swarm may pick from, and as many up tasks
    as it drops."""
    up = up_tasks(snapshot, service)
    dropped = dropped_tasks(_slots(snapshot, service), replicas)
    if dropped is not None:
        ids = {t.id for t in up}
        gone = [t for t in dropped if t.id in ids]
        return tuple(sorted({t.node_id for t in gone})), len(gone)
    current = service.replicas or 0
    down = scale_down(snapshot, service, current - replicas)
    nodes = {*down.certain, *(down.tied if down.picks else ())}
    held = {t.node_id for t in up}
    return tuple(sorted(nodes & held)), min(current - replicas, len(up))


def _scaled_down(snapshot: ClusterSnapshot, action: SetReplicas) -> Disruption | None:
    service = snapshot.service_by_id.get(action.service_id)
    current = service.replicas if service is not None else None
    if service is None or current is None or action.replicas >= current:
        # A surge that names nodes is the first half of a move: it stops nothing yet, but
        # spends the writes of its cycle, node and service (its trim stops the tasks).
        if action.evicts_from:
            return Disruption(action.evicts_from, (action.service_id,))
        return None
    nodes, stops = scale_down_stops(snapshot, service, action.replicas)
    nodes = tuple(sorted({*nodes, *action.evicts_from}))
    if not nodes and not stops:
        return None
    return Disruption(nodes, (service.id,), {service.id: stops} if stops else {})


def _ruled_out(snapshot: ClusterSnapshot, action: SetServiceConstraints) -> tuple[str, ...]:
    """Nodes holding the service's tasks that the new constraints no longer allow:
    Swarm replaces those tasks, whether or not the write names the nodes. (A task on a
    node that is down is lost already: excluding that node stops nothing.)"""
    if action.parsed is None:
        return ()  # Swarm refuses the write itself
    allowed = node_filter(action.parsed)
    running = {t.node_id for t in snapshot.tasks_of(action.service_id) if t.node_id and t.is_active}
    return tuple(
        sorted(
            n
            for n in running
            if (node := snapshot.node_by_id.get(n)) is not None
            and node.holds_tasks
            and not allowed(node)
        )
    )


def disruption(action: Action, snapshot: ClusterSnapshot) -> Disruption | None:
    """What the action may stop, or None when it stops nothing."""
    match action:
        case SetServiceConstraints() if action.evicts_from or _ruled_out(snapshot, action):
            nodes = tuple(sorted({*action.evicts_from, *_ruled_out(snapshot, action)}))
            service = snapshot.service_by_id.get(action.service_id)
            stop_first = service is None or service.update_order != "start-first"
            moved = _up_on(snapshot, action.service_id, nodes) if stop_first else 0
            if service is not None and service.update_batch:
                # Swarm's updater replaces them a batch at a time, each once the last
                # runs; its constraint enforcer judges a task by the task's own spec.
                moved = min(moved, service.update_batch)
            return Disruption(
                nodes, (action.service_id,), {action.service_id: moved} if moved else {}
            )
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


class AvailabilityLedger:
    """The account of a plan: each service's standing in the snapshot, the stops charged
    so far, and the writes spent per cycle, node and service."""

    def __init__(
        self,
        budgets: Budgets,
        snapshot: ClusterSnapshot,
        max_unavailable: Mapping[str, int],
        overridden: Mapping[str, float] | None = None,
    ) -> None:
        self._budgets = budgets
        self._overridden = overridden or {}
        self._snapshot = snapshot
        self._max_unavailable = max_unavailable
        self._standing: dict[str, Standing] = {}
        self._spent: Counter[tuple[str, str]] = Counter()
        self._charged: Counter[str] = Counter()  # service id -> up tasks stopped so far

    def copy(self) -> AvailabilityLedger:
        other = AvailabilityLedger(
            self._budgets, self._snapshot, self._max_unavailable, self._overridden
        )
        other._standing = self._standing  # a function of the snapshot: shared
        other._spent = self._spent.copy()
        other._charged = self._charged.copy()
        return other

    def standing(self, service_id: str) -> Standing:
        found = self._standing.get(service_id)
        if found is None:
            service = self._snapshot.service_by_id.get(service_id)
            found = (
                standing(self._snapshot, service, self._overridden)
                if service is not None
                else Standing(0, 0)
            )
            self._standing[service_id] = found
        return found

    def down(self, service_id: str) -> int:
        """Replicas down or in flight, with the stops charged so far in this plan."""
        account = self.standing(service_id)
        return max(0, account.wanted - (account.up - self._charged[service_id]))

    def stops_left(self, service_id: str) -> int:
        """How many more up tasks of the service a write of this plan may stop."""
        account = self.standing(service_id)
        cap = self._max_unavailable.get(service_id, 0)
        left = account.up - self._charged[service_id]
        return max(0, left - max(0, account.wanted - cap))

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
        for service_id, count in sorted(found.stops.items()):
            if count <= self.stops_left(service_id):
                continue
            limit = self._max_unavailable.get(service_id, 0)
            down = self.down(service_id)
            already = f", {down} already down or starting" if down else ""
            return (
                f"budget: max-unavailable {limit} for {self._name(service_id)}{already}, "
                f"and this write stops {count} of its task(s) at once"
            )
        return None

    def spend(self, action: Action) -> None:
        found = disruption(action, self._snapshot)
        if found is None:
            return
        self._spent["cycle", ""] += 1
        self._spent.update(("node", n) for n in found.nodes)
        self._spent.update(("service", s) for s in found.services)
        self._charged.update(found.stops)
