"""Node load from reservations or measured usage, and what moving a service changes.

A node's load is a fraction of its capacity per resource (CPU, memory); its score is
the larger of the two, as a failover cluster's balancer compares. Where the node agent
reports usage (`ClusterSnapshot.usage`) the measurement is the load; elsewhere the
reservations of the tasks there are. What one task weighs: its reservation where it has
one, else an even share of its node's measured usage (the agent reports per node).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.counts import active_counts, is_active, reserved_by_node
from controller.core.model import ClusterSnapshot, Node, Service


@dataclass(frozen=True, slots=True)
class Load:
    """Fractions of one node's capacity (1.0: full)."""

    cpu: float = 0.0
    memory: float = 0.0

    @property
    def score(self) -> float:
        return max(self.cpu, self.memory)

    def __add__(self, other: Load) -> Load:
        return Load(self.cpu + other.cpu, self.memory + other.memory)

    def __sub__(self, other: Load) -> Load:
        return Load(max(self.cpu - other.cpu, 0.0), max(self.memory - other.memory, 0.0))

    def times(self, n: int) -> Load:
        return Load(self.cpu * n, self.memory * n)


@dataclass(frozen=True, slots=True)
class Demand:
    """What one task uses in absolute units: nano-CPUs and bytes."""

    nano_cpus: float = 0.0
    memory_bytes: float = 0.0

    @property
    def is_zero(self) -> bool:
        return not self.nano_cpus and not self.memory_bytes

    def on(self, node: Node) -> Load:
        """As a fraction of that node's capacity (a resource it does not report: 0)."""
        cap = node.capacity
        return Load(
            self.nano_cpus / cap.nano_cpus if cap.nano_cpus else 0.0,
            self.memory_bytes / cap.memory_bytes if cap.memory_bytes else 0.0,
        )


def measured_nodes(snapshot: ClusterSnapshot) -> tuple[Node, ...]:
    """Ready nodes that take tasks and report a capacity: the ones load compares."""
    return tuple(
        n
        for n in snapshot.nodes
        if n.accepts_tasks and (n.capacity.nano_cpus or n.capacity.memory_bytes)
    )


def node_loads(snapshot: ClusterSnapshot) -> dict[str, Load]:
    """Node id -> load, for the measured nodes."""
    reserved = reserved_by_node(snapshot)
    loads: dict[str, Load] = {}
    for node in measured_nodes(snapshot):
        usage = snapshot.usage.get(node.id)
        if usage is not None:
            loads[node.id] = Load(max(usage.cpu, 0.0), max(usage.memory, 0.0))
            continue
        r = reserved.get(node.id)
        loads[node.id] = Demand(r.nano_cpus, r.memory_bytes).on(node) if r is not None else Load()
    return loads


def mean_score(loads: Mapping[str, Load]) -> float:
    return sum(load.score for load in loads.values()) / len(loads) if loads else 0.0


def _active_tasks_on(snapshot: ClusterSnapshot, node_id: str) -> int:
    return sum(1 for t in snapshot.tasks if t.node_id == node_id and is_active(t))


def task_demand(snapshot: ClusterSnapshot, service: Service, node: Node) -> Demand:
    """What one task of the service on `node` is taken to use (see the module doc)."""
    res = service.reservations
    if snapshot.usage.get(node.id) is None or res.nano_cpus or res.memory_bytes:
        return Demand(res.nano_cpus, res.memory_bytes)
    usage = snapshot.usage[node.id]
    tasks = _active_tasks_on(snapshot, node.id)
    if not tasks:
        return Demand()
    return Demand(
        usage.cpu * node.capacity.nano_cpus / tasks,
        usage.memory * node.capacity.memory_bytes / tasks,
    )


@dataclass(frozen=True, slots=True)
class Projection:
    """Loads after moving every task of one service off one node."""

    source: str
    moved: int  # tasks that move
    loads: Mapping[str, Load]  # node id -> load after, for the nodes involved
    at_most: Mapping[str, int]  # node id -> most tasks it may receive (any tie-break)

    @property
    def targets(self) -> frozenset[str]:
        return frozenset(self.at_most)

    def worst(self) -> float:
        return max(load.score for load in self.loads.values())


def project_move(
    snapshot: ClusterSnapshot,
    service: Service,
    *,
    source: str,
    loads: Mapping[str, Load],
    at_most: Mapping[str, int],
) -> Projection:
    """Loads once the service's tasks on `source` run elsewhere; each node that may
    receive some is charged the most it may get, so no tie-break of Swarm's does worse."""
    nodes = snapshot.node_by_id
    moved = active_counts(snapshot, service.id).get(source, 0)
    demand = task_demand(snapshot, service, nodes[source])
    after = {source: loads[source] - demand.on(nodes[source]).times(moved)}
    for target, most in at_most.items():
        after[target] = loads.get(target, Load()) + demand.on(nodes[target]).times(most)
    return Projection(source, moved, after, dict(at_most))
