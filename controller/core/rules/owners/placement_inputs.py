"""What an assignment knows of the cluster, as plain values: the service's inputs and
the cycle's shared order of nodes by fault domain and load."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from controller.core.kernel.candidates import Candidates


@dataclass(frozen=True)
class NodeOrder:
    """Nodes grouped by fault domain, each group least busy first (load, hostname, ID).

    It depends only on the cycle's load and the spread level, so the owners rule builds
    one per level per cycle and shares it among services.
    """

    domain_of: Mapping[str, str]  # node ID -> domain ("" for every node without spread)
    by_domain: Mapping[str, tuple[str, ...]]
    _domains: dict[frozenset[str], frozenset[str]] = field(default_factory=dict, compare=False)

    def domains(self, nodes: frozenset[str]) -> frozenset[str]:
        """The domains of these nodes (most services share their placeable set)."""
        if nodes not in self._domains:
            self._domains[nodes] = frozenset(self.domain_of[n] for n in nodes)
        return self._domains[nodes]


def node_order(
    nodes: Iterable[str],
    *,
    load: Mapping[str, int],
    hostname: Mapping[str, str],
    domain: Callable[[str], str] | None,
) -> NodeOrder:
    domain_of = {n: domain(n) if domain is not None else "" for n in nodes}
    by_domain: dict[str, list[str]] = {}
    for node in sorted(domain_of, key=lambda n: (load.get(n, 0), hostname.get(n, n), n)):
        by_domain.setdefault(domain_of[node], []).append(node)
    return NodeOrder(domain_of, {d: tuple(ns) for d, ns in by_domain.items()})


@dataclass(frozen=True)
class PlacementInputs:
    """What the assignment needs to know about the cluster, as plain values."""

    replicas: int
    current: Mapping[str, int]  # node ID -> active tasks of this service
    candidates: Candidates
    domain: Callable[[str], str] | None  # node ID -> fault domain, None: no spread
    mates: Mapping[str, int]  # node ID -> tasks of soft anti-affinity mates
    load: Mapping[str, int]  # node ID -> tasks of all services (tie-break)
    hostname: Mapping[str, str]
    failback_ready: frozenset[str]  # preferred owners a task may fail back to now
    max_moves: int  # 0 when moves are not permitted this cycle
    # Node ID -> placement plugins' score (higher is better): ranks nodes the policy
    # leaves equal, after the preferred order and before the tie-breaks.
    scores: Mapping[str, float] = field(default_factory=dict)
    # The cycle's shared order over (at least) the placeable nodes, built with the same
    # load, hostname and domain as above; None: built here.
    order: NodeOrder | None = None
    # Node ID -> how many tasks beyond `current` Swarm would accept there (resources,
    # max-replicas-per-node, ports, platform); a node not listed has no such limit.
    room: Mapping[str, int] = field(default_factory=dict)
    # Node ID -> standbys the services planned before this one in the cycle chose: the
    # standby counts them as load (see `standby.standby_for`).
    standbys: Mapping[str, int] = field(default_factory=dict)
    # The nodes the service's steering allows now (None: not steered): the one of them
    # that holds no desired task is its standby, kept while it stays good enough.
    allowed_now: frozenset[str] | None = None
    # Nodes back from a down that have not settled yet: no standby moves onto one.
    returning: frozenset[str] = frozenset()
