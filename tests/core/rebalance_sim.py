"""Replaying rebalance actions the way Swarm carries them out, with Swarm's ties broken at
random: written apart from the core's own simulation so the two can disagree.

- Surge (replicas + k, operation `rebalance`): each new task goes to an active node that
  meets the constraints, has room for the reservation and is under max-per-node, with
  the fewest tasks of the service; the trim then removes k tasks, each from a node with
  the most tasks of the service.
- Exclusion (constraints gain `node.id!=X`): every task on X is replaced on a node that
  meets the new constraints, with the fewest tasks of the service.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from controller.core.actions import Action, SetReplicas, SetServiceConstraints
from controller.core.constraints import node_satisfies, parse_constraint
from controller.core.model import ClusterSnapshot, Node, Resources, Service


class StuckError(AssertionError):
    """A task the plan moves has nowhere to go: it would stay pending."""


@dataclass
class SimSwarm:
    snapshot: ClusterSnapshot
    rng: random.Random
    # Service id -> node id -> tasks.
    placed: dict[str, Counter[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for task in self.snapshot.tasks:
            self.placed.setdefault(task.service_id, Counter())[task.node_id] += 1

    def reserved(self, node_id: str) -> tuple[int, int]:
        cpu = mem = 0
        for service in self.snapshot.services:
            count = self.placed.get(service.id, Counter())[node_id]
            cpu += count * service.reservations.nano_cpus
            mem += count * service.reservations.memory_bytes
        return cpu, mem

    def _fits(self, node: Node, need: Resources) -> bool:
        cpu, mem = self.reserved(node.id)
        return (not need.nano_cpus or cpu + need.nano_cpus <= node.capacity.nano_cpus) and (
            not need.memory_bytes or mem + need.memory_bytes <= node.capacity.memory_bytes
        )

    def allowed(self, service: Service, constraints: tuple[str, ...]) -> list[Node]:
        parsed = tuple(parse_constraint(c) for c in constraints)
        return [n for n in self.snapshot.nodes if n.accepts_tasks and node_satisfies(n, parsed)]

    def takers(self, service: Service, constraints: tuple[str, ...]) -> list[Node]:
        """The nodes Swarm's filters pass for one more task: constraints, room for the
        reservation, max-replicas-per-node."""
        counts = self.placed.setdefault(service.id, Counter())
        return [
            n
            for n in self.allowed(service, constraints)
            if self._fits(n, service.reservations)
            and (not service.max_replicas_per_node or counts[n.id] < service.max_replicas_per_node)
        ]

    def place_one(self, service: Service, constraints: tuple[str, ...]) -> str:
        counts = self.placed.setdefault(service.id, Counter())
        nodes = self.takers(service, constraints)
        if not nodes:
            raise StuckError(f"no node for a task of {service.name}")
        low = min(counts[n.id] for n in nodes)
        pick = self.rng.choice(sorted(n.id for n in nodes if counts[n.id] == low))
        counts[pick] += 1
        return pick

    def remove_one(self, service: Service) -> str:
        counts = self.placed[service.id]
        high = max(counts.values())
        pick = self.rng.choice(sorted(n for n, c in counts.items() if c == high))
        counts[pick] -= 1
        return pick

    def apply(self, action: Action) -> list[str]:
        """Carry out one action; returns the nodes that received tasks."""
        service = self.snapshot.service_by_id[action.service_id]  # type: ignore[union-attr]
        received: list[str] = []
        if isinstance(action, SetReplicas):
            surge = action.replicas - (service.replicas or 0)
            for _ in range(surge):
                received.append(self.place_one(service, service.constraints))
            for _ in range(surge):
                self.remove_one(service)
        elif isinstance(action, SetServiceConstraints):
            counts = self.placed.get(service.id, Counter())
            for node_id in action.evicts_from:
                for _ in range(counts[node_id]):
                    counts[node_id] -= 1
                    received.append(self.place_one(service, action.constraints))
        return received

    def counts(self, service_id: str) -> Counter[str]:
        return +self.placed.get(service_id, Counter())

    def load(self, node: Node) -> float:
        """The larger of the CPU and memory fractions reserved (the reservations model)."""
        cpu, mem = self.reserved(node.id)
        cap = node.capacity
        return max(
            cpu / cap.nano_cpus if cap.nano_cpus else 0.0,
            mem / cap.memory_bytes if cap.memory_bytes else 0.0,
        )
