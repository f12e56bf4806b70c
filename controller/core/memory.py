"""What the controller remembers between cycles, as a value.

Nothing here is durable: a restarted controller starts empty and is still correct,
only more patient (a node counts as ready from the first time it is seen ready).
Durable state lives in Swarm's labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from controller.core.model import ClusterSnapshot
from controller.policy import ResolvedService


@dataclass(frozen=True, slots=True)
class Memory:
    # Node id -> when it was last seen turning ready; a flap restarts the clock.
    node_ready_since: Mapping[str, float] = field(default_factory=dict)
    # Service id -> when the controller last moved one of its tasks (cooldowns).
    last_move: Mapping[str, float] = field(default_factory=dict)
    # Service id -> last settings that resolved cleanly, kept while its labels are bad.
    resolved: Mapping[str, ResolvedService] = field(default_factory=dict)
    # False until the first observation: nodes ready then date from their last update.
    started: bool = False

    def observe(self, snapshot: ClusterSnapshot, now: float) -> Memory:
        """Track when each node turned ready. At the first observation a ready node is
        dated from Swarm's UpdatedAt (its last status or spec change, so never too early);
        afterwards from the cycle that first sees it ready, so a flap restarts the clock."""
        ready_since = {}
        for node in snapshot.nodes:
            if not node.is_ready:
                continue
            if node.id in self.node_ready_since:
                ready_since[node.id] = self.node_ready_since[node.id]
            elif not self.started and node.updated_at:
                ready_since[node.id] = min(node.updated_at, now)
            else:
                ready_since[node.id] = now
        return replace(self, node_ready_since=ready_since, started=True)

    def record_move(self, service_id: str, now: float) -> Memory:
        return replace(self, last_move={**self.last_move, service_id: now})

    def with_resolved(self, resolved: Mapping[str, ResolvedService]) -> Memory:
        return replace(self, resolved=resolved)
