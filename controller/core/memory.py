"""What the controller remembers between cycles, as a value.

Nothing here is durable: a restarted controller starts empty and is still correct,
only more patient (a node counts as ready from the first time it is seen ready).
Durable state lives in Swarm's labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from controller.core.model import ACTIVE_TASK_STATES, ClusterSnapshot, TaskState
from controller.policy import ResolvedService

# How long a node loss is remembered for failover: past this, Swarm has long replaced
# the tasks itself and surging would only add replicas.
LOST_MEMORY_SECONDS = 60.0


def active_placement(snapshot: ClusterSnapshot) -> dict[str, dict[str, int]]:
    """Service id -> ready node id -> tasks meant to run there."""
    ready = {n.id for n in snapshot.nodes if n.is_ready}
    out: dict[str, dict[str, int]] = {}
    for task in snapshot.tasks:
        if (
            task.node_id in ready
            and task.desired_state is TaskState.RUNNING
            and task.state in ACTIVE_TASK_STATES
        ):
            per_node = out.setdefault(task.service_id, {})
            per_node[task.node_id] = per_node.get(task.node_id, 0) + 1
    return out


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
    # Service id -> node id -> active tasks, as last observed (to know what a node held).
    placement: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # Service id -> (tasks lost with nodes that went down, when first lost).
    lost: Mapping[str, tuple[int, float]] = field(default_factory=dict)

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
        went_down = {
            n.id for n in snapshot.nodes if n.id in self.node_ready_since and not n.is_ready
        }
        lost = {k: v for k, v in self.lost.items() if now - v[1] < LOST_MEMORY_SECONDS}
        for service_id, per_node in self.placement.items():
            count = sum(c for node_id, c in per_node.items() if node_id in went_down)
            if count:
                before, since = lost.get(service_id, (0, now))
                lost[service_id] = (before + count, since)
        return replace(
            self,
            node_ready_since=ready_since,
            started=True,
            placement=active_placement(snapshot),
            lost=lost,
        )

    def record_move(self, service_id: str, now: float) -> Memory:
        return replace(self, last_move={**self.last_move, service_id: now})

    def with_resolved(self, resolved: Mapping[str, ResolvedService]) -> Memory:
        return replace(self, resolved=resolved)
