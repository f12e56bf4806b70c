"""Which nodes a service may use, in which order, and in which fault domain.

Two sets matter: nodes where a task may *stay* (ready, not drained, allowed by the
operator's constraints, the possible owners and hard anti-affinity, and not refusing the
service with a deny label) and nodes where a task may be *placed* (the same, and active:
a paused node keeps its tasks but takes no new ones).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from controller.core.constraints import Constraint, node_filter, parse_constraint
from controller.core.labels import DENY_LABEL_PREFIX, DENY_VALUE, deny_label
from controller.core.model import Availability, Node, Service
from controller.policy import NodeGroup, Policy, ServiceSettings


def entry_matches(node: Node, entry: str, groups: Mapping[str, NodeGroup]) -> bool:
    """An owner-list entry names a hostname, a node ID or a group."""
    if entry in groups:
        return groups[entry].contains(hostname=node.hostname, labels=node.labels)
    return entry in {node.hostname, node.id}


def expand_owner_list(
    entries: Iterable[str],
    nodes: Iterable[Node],
    groups: Mapping[str, NodeGroup],
    *,
    index: NodeIndex | None = None,
) -> tuple[str, ...]:
    """Node IDs in list order; a group contributes its nodes by hostname, once each."""
    index = index or NodeIndex(nodes)
    out: list[str] = []
    seen: set[str] = set()
    for entry in entries:
        for node_id in index.named(entry, groups):
            if node_id not in seen:
                seen.add(node_id)
                out.append(node_id)
    return tuple(out)


def operator_constraints(service: Service) -> tuple[Constraint, ...]:
    """The operator's own constraints (ours are recognised and left out). May raise."""
    return tuple(parse_constraint(text) for text in service.operator_constraints)


class NodeIndex:
    """The cycle's nodes, indexed once for every service's owner lists and candidates:
    by hostname and ID, by readiness and availability, and by constraint (cached)."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.ordered = tuple(sorted(nodes, key=lambda n: n.hostname))
        self._named: dict[str, list[str]] = {}
        for node in self.ordered:
            for name in {node.hostname, node.id}:
                self._named.setdefault(name, []).append(node.id)
        self.keepable = frozenset(
            n.id for n in self.ordered if n.is_ready and n.availability is not Availability.DRAIN
        )
        self.active = frozenset(n.id for n in self.ordered if n.availability is Availability.ACTIVE)
        self._groups: dict[NodeGroup, tuple[str, ...]] = {}
        self._matching: dict[tuple[Constraint, ...], frozenset[str]] = {}
        self._allowed: dict[tuple[Constraint, ...], tuple[frozenset[str], frozenset[str]]] = {}
        # Node label swarm-placement.deny.<service> -> the nodes that carry it set to true.
        self._denied: dict[str, set[str]] = {}
        for node in self.ordered:
            for key, value in node.labels.items():
                if key.startswith(DENY_LABEL_PREFIX) and value == DENY_VALUE:
                    self._denied.setdefault(key, set()).add(node.id)

    def denied(self, service_name: str) -> frozenset[str]:
        """Nodes that refuse the service with a deny label."""
        return frozenset(self._denied.get(deny_label(service_name), ()))

    def named(self, entry: str, groups: Mapping[str, NodeGroup]) -> Sequence[str]:
        """The nodes an owner-list entry names, by hostname order (see entry_matches)."""
        group = groups.get(entry)
        if group is None:
            return self._named.get(entry, ())
        if group not in self._groups:
            self._groups[group] = tuple(
                n.id for n in self.ordered if group.contains(hostname=n.hostname, labels=n.labels)
            )
        return self._groups[group]

    def matching(self, constraints: tuple[Constraint, ...]) -> frozenset[str]:
        """The nodes that meet every constraint."""
        if constraints not in self._matching:
            satisfies = node_filter(constraints)
            self._matching[constraints] = frozenset(n.id for n in self.ordered if satisfies(n))
        return self._matching[constraints]

    def allowed(self, constraints: tuple[Constraint, ...]) -> tuple[frozenset[str], frozenset[str]]:
        """(keepable, placeable) under these constraints alone: shared by every service
        with the same constraints, so most services reuse one pair of sets."""
        if constraints not in self._allowed:
            keepable = self.keepable & self.matching(constraints) if constraints else self.keepable
            self._allowed[constraints] = (keepable, keepable & self.active)
        return self._allowed[constraints]


def domain_of(node: Node, level: str | None, policy: Policy) -> str:
    """The node's fault domain at `level` ("" when unlabelled: one domain of its own)."""
    if level is None:
        return ""
    label = policy.fault_domains.get(level)
    return node.labels.get(label, "") if label else ""


@dataclass(frozen=True, slots=True)
class Candidates:
    """Node sets and order for one service, by node ID."""

    keepable: frozenset[str]  # a task there may stay
    placeable: frozenset[str]  # a task may be placed there now
    preferred: tuple[str, ...]  # preferred owners, in order (may include unavailable nodes)
    possible: frozenset[str] | None  # None: every node
    # Preferred owner -> its rank (0: the first), made once with the value.
    ranks: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ranks: dict[str, int] = {}
        for index, node_id in enumerate(self.preferred):
            ranks.setdefault(node_id, index)
        object.__setattr__(self, "ranks", ranks)

    def rank(self, node_id: str) -> int:
        """0 for the first preferred owner; every other node ranks after all of them."""
        return self.ranks.get(node_id, len(self.preferred))


def find_candidates(
    service: Service,
    settings: ServiceSettings,
    nodes: Iterable[Node],
    policy: Policy,
    *,
    constraints: tuple[Constraint, ...],
    hard_excluded: frozenset[str] = frozenset(),
    index: NodeIndex | None = None,
) -> Candidates:
    """`index`: the cycle's NodeIndex over `nodes`, shared by every service (built here
    when not given)."""
    index = index or NodeIndex(nodes)
    possible = (
        frozenset(expand_owner_list(settings.possible_nodes, (), policy.groups, index=index))
        if settings.possible_nodes
        else None
    )
    keepable, placeable = index.allowed(constraints)
    # Refused by the health rules (failed, degraded, failing there, a plugin veto).
    denied = index.denied(service.name)
    if possible is not None or hard_excluded or denied:
        keepable = keepable - hard_excluded - denied
        if possible is not None:
            keepable &= possible
        placeable = keepable & index.active
    preferred = tuple(
        i
        for i in expand_owner_list(settings.preferred_nodes, (), policy.groups, index=index)
        if possible is None or i in possible
    )
    return Candidates(
        keepable=keepable, placeable=placeable, preferred=preferred, possible=possible
    )
