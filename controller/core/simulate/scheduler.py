"""Swarm's scheduler as swarmkit writes it: a filter pipeline, then a ranking.

Filters, in swarmkit's order (the first a node fails is the one Swarm counts in a pending
task's `Status.Err`): Ready (the node is ready and active), Resource (the service's
reservations fit in what the tasks assigned there leave), Constraint (every placement
constraint holds, see core/constraints), MaxReplicas (fewer of the service's tasks there
than `Placement.MaxReplicas`). The Plugin, Platform and HostPort filters need what the
snapshot does not record (volume and network plugins, image platforms, published host
ports) and pass every node here.

Ranking among the nodes that pass: fewest tasks of the service, then fewest tasks in all.
swarmkit breaks the remaining ties by map order (at random); here the hostname, then the
node ID, break them, so a simulation is repeatable. Recent task failures on a node (its
first criterion) are not modelled.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.core.capacity import describe_resources
from controller.core.constraints import ConstraintError, node_filter, parse_constraint
from controller.core.labels import is_own_constraint
from controller.core.model import Availability, Node, Resources, Service

READY, RESOURCES, CONSTRAINTS, MAX_REPLICAS = "ready", "resources", "constraints", "max-replicas"
# How swarmkit's filters explain themselves in "no suitable node (...)".
_EXPLAINED = {
    READY: "{n} not available for new tasks",
    RESOURCES: "insufficient resources on {n}",
    CONSTRAINTS: "scheduling constraints not satisfied on {n}",
    MAX_REPLICAS: "max replicas per node limit exceed",
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why one filter rejects one node for one service."""

    filter: str  # READY, RESOURCES, CONSTRAINTS or MAX_REPLICAS
    reason: str
    own: bool = False  # a constraint the controller itself wrote (steering)


def _minus(a: Resources, b: Resources) -> Resources:
    kinds = sorted({*a.generic, *b.generic})
    return Resources(
        a.nano_cpus - b.nano_cpus,
        a.memory_bytes - b.memory_bytes,
        {k: a.generic.get(k, 0) - b.generic.get(k, 0) for k in kinds},
    )


class Scheduler:
    """Free room and task counts per node; `place` assigns one task as Swarm would."""

    def __init__(
        self,
        nodes: Iterable[Node],
        services: Mapping[str, Service],
        assigned: Iterable[tuple[str, str]],  # (service id, node id) of every assigned task
    ) -> None:
        self.nodes = tuple(sorted(nodes, key=lambda n: (n.hostname, n.id)))
        self.services = services
        self.free = {n.id: n.capacity for n in self.nodes}
        self.mine: Counter[tuple[str, str]] = Counter()
        self.total: Counter[str] = Counter()
        for service_id, node_id in assigned:
            self._take(service_id, node_id)

    def _take(self, service_id: str, node_id: str) -> None:
        service = self.services.get(service_id)
        if node_id in self.free and service is not None:
            self.free[node_id] = _minus(self.free[node_id], service.reservations)
        self.mine[(service_id, node_id)] += 1
        self.total[node_id] += 1

    def refusals(self, node: Node, service: Service) -> list[Refusal]:
        """Every filter that rejects the node, in swarmkit's order; empty: it may run there."""
        out: list[Refusal] = []
        if not node.is_ready:
            out.append(Refusal(READY, f"the node is {node.state.value}"))
        elif node.availability is not Availability.ACTIVE:
            out.append(Refusal(READY, f"the node's availability is {node.availability.value}"))
        need, free = service.reservations, self.free.get(node.id, node.capacity)
        if not need.fits_within(free):
            out.append(
                Refusal(
                    RESOURCES,
                    f"insufficient resources: needs {describe_resources(need)}, "
                    f"{describe_resources(free, only=need)} free",
                )
            )
        for text in service.constraints:
            try:
                ok = parse_constraint(text).matches(node)
            except ConstraintError as exc:
                out.append(Refusal(CONSTRAINTS, f"unreadable constraint: {exc}"))
                break
            if not ok:
                own = is_own_constraint(text, service.name, service.labels)
                out.append(Refusal(CONSTRAINTS, f"constraint {text} is not met", own=own))
        cap = service.max_replicas_per_node
        if cap and self.mine[(service.id, node.id)] >= cap:
            out.append(Refusal(MAX_REPLICAS, f"already {cap} task(s) there (max-replicas {cap})"))
        return out

    def rank(self, service: Service) -> list[Node]:
        """The nodes that pass every filter, best first (the same tests as `refusals`,
        with the constraints compiled once)."""
        try:
            satisfies = node_filter(parse_constraint(c) for c in service.constraints)
        except ConstraintError:
            return []
        cap, need = service.max_replicas_per_node, service.reservations
        passing = [
            n
            for n in self.nodes
            if n.accepts_tasks
            and need.fits_within(self.free[n.id])
            and satisfies(n)
            and not (cap and self.mine[(service.id, n.id)] >= cap)
        ]
        return sorted(
            passing, key=lambda n: (self.mine[(service.id, n.id)], self.total[n.id], n.hostname)
        )

    def place(self, service: Service) -> tuple[str | None, str]:
        """Assign one task: (node id, "") or (None, the scheduler's error)."""
        ranked = self.rank(service)
        if ranked:
            self._take(service.id, ranked[0].id)
            return ranked[0].id, ""
        return None, self.explain(service)

    def explain(self, service: Service) -> str:
        """`no suitable node (...)`, counting each node under the first filter it fails,
        the filter that failed most nodes first (as swarmkit's Pipeline.Explain)."""
        first = Counter(r[0].filter for n in self.nodes if (r := self.refusals(n, service)))
        order = (READY, RESOURCES, CONSTRAINTS, MAX_REPLICAS)
        parts = [
            _EXPLAINED[f].format(n=f"{first[f]} node{'s' if first[f] != 1 else ''}")
            for f in sorted((f for f in order if first[f]), key=lambda f: -first[f])
        ]
        return f"no suitable node ({'; '.join(parts) or 'no nodes'})"
