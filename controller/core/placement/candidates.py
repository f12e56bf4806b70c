"""Which nodes a service may use, in which order, and in which fault domain.

Two sets matter: nodes where a task may *stay* (ready, not drained, allowed by the
operator's constraints, the possible owners and hard anti-affinity) and nodes where a
task may be *placed* (the same, and active: a paused node keeps its tasks but takes no
new ones).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.core.constraints import Constraint, node_satisfies, parse_constraint
from controller.core.labels import is_own_constraint
from controller.core.model import Availability, Node, Service
from controller.policy import NodeGroup, Policy, ServiceSettings


def entry_matches(node: Node, entry: str, groups: Mapping[str, NodeGroup]) -> bool:
    """An owner-list entry names a hostname, a node ID or a group."""
    if entry in groups:
        return groups[entry].contains(hostname=node.hostname, labels=node.labels)
    return entry in {node.hostname, node.id}


def expand_owner_list(
    entries: Iterable[str], nodes: Iterable[Node], groups: Mapping[str, NodeGroup]
) -> tuple[str, ...]:
    """Node IDs in list order; a group contributes its nodes by hostname, once each."""
    ordered = sorted(nodes, key=lambda n: n.hostname)
    out: list[str] = []
    for entry in entries:
        for node in ordered:
            if node.id not in out and entry_matches(node, entry, groups):
                out.append(node.id)
    return tuple(out)


def operator_constraints(service: Service) -> tuple[Constraint, ...]:
    """The operator's own constraints (ours are recognised and left out). May raise."""
    return tuple(
        parse_constraint(text)
        for text in service.constraints
        if not is_own_constraint(text, service.name, service.labels)
    )


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

    def rank(self, node_id: str) -> int:
        """0 for the first preferred owner; every other node ranks after all of them."""
        try:
            return self.preferred.index(node_id)
        except ValueError:
            return len(self.preferred)


def find_candidates(
    service: Service,
    settings: ServiceSettings,
    nodes: Iterable[Node],
    policy: Policy,
    *,
    constraints: tuple[Constraint, ...],
    hard_excluded: frozenset[str] = frozenset(),
) -> Candidates:
    nodes = tuple(nodes)
    possible = (
        frozenset(expand_owner_list(settings.possible_nodes, nodes, policy.groups))
        if settings.possible_nodes
        else None
    )
    keepable = frozenset(
        n.id
        for n in nodes
        if n.is_ready
        and n.availability is not Availability.DRAIN
        and node_satisfies(n, constraints)
        and (possible is None or n.id in possible)
        and n.id not in hard_excluded
    )
    by_id = {n.id: n for n in nodes}
    placeable = frozenset(i for i in keepable if by_id[i].availability is Availability.ACTIVE)
    preferred = tuple(
        i
        for i in expand_owner_list(settings.preferred_nodes, nodes, policy.groups)
        if possible is None or i in possible
    )
    return Candidates(
        keepable=keepable, placeable=placeable, preferred=preferred, possible=possible
    )
