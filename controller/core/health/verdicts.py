"""What the health assessment says of each node (`NodeVerdict`) and of the cycle
(`Assessment`): the values the rules read, apart from how they are worked out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from controller.core.decisions import Decision
from controller.core.exit_history import HealthMemory
from controller.core.health.node_marks import HealthMark, paused_for
from controller.core.health.panic import Panic
from controller.core.health.suspicion import Suspicion
from controller.core.kernel.blast_radius import BlastRadius
from controller.core.model import Availability, ClusterSnapshot, Node, NodeState
from controller.core.outside_inputs import HealthState
from controller.policy import ControllerSettings

RULE = "health"


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    node_id: str
    hostname: str
    health: HealthState = HealthState.OK
    # The health marks the node should carry (non-ok, unexpired), by source.
    marks: Mapping[str, HealthMark] = field(default_factory=dict)
    quarantine_until: float | None = None  # set while quarantined (or from this cycle)
    quarantine_reason: str = ""  # set when the quarantine starts this cycle
    pause: frozenset[str] = frozenset()  # why the controller should hold it paused

    @property
    def quarantined(self) -> bool:
        return self.quarantine_until is not None


@dataclass(frozen=True)
class Assessment:
    verdicts: Mapping[str, NodeVerdict] = field(default_factory=dict)
    decisions: tuple[Decision, ...] = ()
    memory: HealthMemory = field(default_factory=HealthMemory)
    panic: Panic | None = None  # set while too many nodes are reported (panic.py)
    # The one cap, with the nodes the node-wide inputs acted on take: plugin vetoes and
    # move-offs get only the room it leaves (core/kernel/blast_radius.py).
    radius: BlastRadius = field(
        default_factory=lambda: BlastRadius(ControllerSettings().health_panic_threshold)
    )
    # Ready nodes faster signals agree are gone (suspicion.py); empty in a panic.
    suspected: Mapping[str, Suspicion] = field(default_factory=dict)

    def verdict(self, node: Node) -> NodeVerdict:
        return self.verdicts.get(node.id) or NodeVerdict(node.id, node.hostname)

    @property
    def failed(self) -> frozenset[str]:
        return frozenset(n for n, v in self.verdicts.items() if v.health is HealthState.FAILED)

    def effective(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """The cluster as the other rules should see it: a failed node is down, a node
        the controller holds paused is paused and one it releases is active (from this
        cycle on, before Swarm says so)."""
        if not self.verdicts:
            return snapshot
        nodes = []
        for seen in snapshot.nodes:
            node, verdict = seen, self.verdicts.get(seen.id)
            if verdict is not None and verdict.health is HealthState.FAILED:
                node = replace(node, state=NodeState.DOWN)
            if verdict is not None and verdict.pause and node.availability is Availability.ACTIVE:
                node = replace(node, availability=Availability.PAUSE)
            released = verdict is None or not verdict.pause
            if released and paused_for(node.labels) and node.availability is Availability.PAUSE:
                node = replace(node, availability=Availability.ACTIVE)
            if verdict is not None and verdict.quarantined and node.accepts_tasks:
                node = replace(node, availability=Availability.PAUSE)
            nodes.append(node)
        return replace(snapshot, nodes=tuple(nodes))
