"""The blast radius: one cap on the nodes outside inputs may keep one service off.

Outside inputs are what the controller hears from outside Swarm's own state, and any of
them may be wrong or hostile: health reports (the webhook, plugins' health), suspicions
(speculative failover), quarantine (task failures and exits counted against a node), a
service's move-offs (its own failures on one node) and plugin vetoes. All of them
together may keep one service off at most `controller.health-panic-threshold` of the
nodes that are ready and active (rounded down: 0.34 is 1 node of 3 or 4, 2 of 6), never
a share each.

- The base is what Swarm offers: nodes it has not marked down (ready, or unknown after a
  leader change) whose availability is active, or paused by the controller itself (its
  own pause must not shrink the base of the share that caps it). An operator's drain or
  pause takes a node out of the base.
- Counted against it is every node not down that an input takes, drained or not: a word
  held on a drained node would come back with it.
- Node-wide inputs (health, suspicion, quarantine) take a node from every service; the
  health assessment judges them first, counting each service's move-offs in force (the
  health panic, core/health/panic.py). A service's own inputs, its move-offs and then the
  plugins' vetoes, get only the room left in that service's count, over the nodes its
  operator constraints allow (`ServiceRadius`).
- What is in force stays when the cap binds (it was within the cap when it was decided);
  a new input over it is held back, with a decision that names what fills the cap.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from controller.core.constraints import ConstraintError, node_satisfies, parse_constraint
from controller.core.model import Availability, ClusterSnapshot, Node, NodeState, Service

SETTING = "controller.health-panic-threshold"
# Nodes named in a reason; the rest are counted.
MAX_NAMED = 10


def allowed(share: float, nodes: int) -> int:
    """How many of `nodes` may be taken away at once (rounded down)."""
    return math.floor(share * nodes + 1e-9)


def not_down(nodes: Iterable[Node]) -> frozenset[str]:
    """Nodes Swarm has not given up: an input on them takes something away."""
    return frozenset(n.id for n in nodes if n.state is not NodeState.DOWN)


def ready_and_active(nodes: Iterable[Node], held: Collection[str]) -> frozenset[str]:
    """The base of the share: nodes not down that are active, or paused by the
    controller (`held`: the ids of the nodes it holds paused)."""
    return frozenset(
        n.id
        for n in nodes
        if n.state is not NodeState.DOWN and (n.availability is Availability.ACTIVE or n.id in held)
    )


def operator_allows(snapshot: ClusterSnapshot, service: Service) -> frozenset[str]:
    """The nodes the operator's constraints of the service allow; the controller's own
    (deny labels, exclusions) are left out: the base of a share must not shrink with
    what that share caps. Unreadable constraints: every node."""
    try:
        parsed = tuple(parse_constraint(c) for c in service.operator_constraints)
    except ConstraintError:
        parsed = ()
    return frozenset(n.id for n in snapshot.nodes if node_satisfies(n, parsed))


def named(nodes: Mapping[str, str], hostnames: Mapping[str, str]) -> str:
    """`node-2 degraded, node-3 quarantined`: what takes each node, by hostname."""
    items = sorted((hostnames.get(n, n), why) for n, why in nodes.items())
    text = ", ".join(f"{host} {why}" for host, why in items[:MAX_NAMED])
    if len(items) > MAX_NAMED:
        text += f" and {len(items) - MAX_NAMED} more"
    return text


@dataclass(frozen=True, slots=True)
class BlastRadius:
    """The cap of one cycle, and the nodes the node-wide inputs acted on take (node id ->
    what takes it: `failed`, `degraded`, `suspected`, `quarantined`)."""

    share: float
    base: frozenset[str] = frozenset()  # ready and active
    alive: frozenset[str] = frozenset()  # not down: where an input takes something
    hostnames: Mapping[str, str] = field(default_factory=dict)
    taken: Mapping[str, str] = field(default_factory=dict)

    @property
    def cap(self) -> int:
        return allowed(self.share, len(self.base))

    def for_service(self, snapshot: ClusterSnapshot, service: Service) -> ServiceRadius:
        """The count of one service, starting from the node-wide inputs on its nodes."""
        allows = operator_allows(snapshot, service)
        counted = self.alive & allows
        return ServiceRadius(
            share=self.share,
            homes=self.base & allows,
            counted=counted,
            hostnames=self.hostnames,
            off={n: why for n, why in self.taken.items() if n in counted},
        )


@dataclass
class ServiceRadius:
    """What outside inputs keep one service off, as its own inputs are admitted.

    `homes`: the ready and active nodes its operator constraints allow (the base of its
    count, so a service kept to few nodes loses no more than the share of those);
    `counted`: the nodes not down they allow; `off`: node id -> what keeps it off."""

    share: float
    homes: frozenset[str]
    counted: frozenset[str]
    hostnames: Mapping[str, str]
    off: dict[str, str] = field(default_factory=dict)

    @property
    def cap(self) -> int:
        return allowed(self.share, len(self.homes))

    def keep(self, node_id: str, why: str) -> None:
        """An input in force: it stays, whatever the count."""
        if node_id in self.counted:
            self.off.setdefault(node_id, why)

    def refusal(self, nodes: Mapping[str, str]) -> str | None:
        """Why these new inputs (node id -> what) would take the service past the cap,
        or None: they fit."""
        new = {n: why for n, why in nodes.items() if n in self.counted and n not in self.off}
        total = len(self.off) + len(new)
        if total <= self.cap:
            return None
        filled = f" ({named(self.off, self.hostnames)} already)" if self.off else ""
        return (
            f"it would be kept off {total} of the {len(self.homes)} ready and active node(s) "
            f"it may run on{filled}: {SETTING} {self.share:.0%} allows {self.cap}"
        )

    def take(self, nodes: Mapping[str, str]) -> None:
        for node_id, why in nodes.items():
            self.keep(node_id, why)
