"""The controller's possible-owner marks on nodes: what each node should carry.

Adding a possible-owner label stops nothing; the constraint that requires it is added
only once every possible owner carries it (see the owners rule). Removing one evicts
that service's tasks from the node. The nodes rule writes these together with every
other label of ours on the node, in one write per node per cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.core.context import PlanContext
from controller.core.labels import POSSIBLE_LABEL_PREFIX, POSSIBLE_VALUE, possible_label
from controller.core.placement.candidates import expand_owner_list


@dataclass(frozen=True, slots=True)
class MarkChange:
    add: dict[str, str] = field(default_factory=dict)
    remove: frozenset[str] = frozenset()
    evicts: tuple[str, ...] = ()  # service ids whose tasks a removed mark evicts


def possible_marks(ctx: PlanContext) -> dict[str, MarkChange]:
    """Node id -> the possible-owner marks to add and remove (nodes with no change left out)."""
    managed = ctx.managed_services()
    wanted: dict[str, set[str]] = {n.id: set() for n in ctx.snapshot.nodes}
    for service in managed:
        settings = ctx.settings(service.id)
        if not settings.possible_nodes:
            continue
        for node_id in expand_owner_list(
            settings.possible_nodes, ctx.snapshot.nodes, ctx.policy.groups
        ):
            wanted[node_id].add(possible_label(service.name))
    out: dict[str, MarkChange] = {}
    for node in ctx.snapshot.nodes:
        have = {k for k in node.labels if k.startswith(POSSIBLE_LABEL_PREFIX)}
        to_set = {
            k: POSSIBLE_VALUE
            for k in sorted(wanted[node.id])
            if node.labels.get(k) != POSSIBLE_VALUE
        }
        to_remove = frozenset(have - wanted[node.id])
        if to_set or to_remove:
            evicts = tuple(s.id for s in managed if possible_label(s.name) in to_remove)
            out[node.id] = MarkChange(add=to_set, remove=to_remove, evicts=evicts)
    return out
