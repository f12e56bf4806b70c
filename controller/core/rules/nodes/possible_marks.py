"""The controller's possible-owner marks on nodes: what each node should carry.

Adding a possible-owner label stops nothing; the constraint that requires it is added
only once every possible owner carries it (see the owners rule). Removing one would
stop that service's tasks on the node at once (Swarm's constraint enforcer ignores the
update order), so a mark the policy no longer wants stays while the service's tasks
still run there: the owners rule moves them off first (a stop-first one by surge, or
not at all if it cannot do so safely), and the mark goes once none is left. "Still run"
counts a node Swarm calls `unknown` or `disconnected` (a new Raft leader has not heard
from it yet): its tasks may run, and once it reports the enforcer would stop them. A mark that
any other service's constraint still requires (one no longer managed, whose release
drops the constraint first; one whose possible owners were unset; one the controller
cannot read) stays until that constraint is gone. The nodes rule writes these together
with every other label of ours on the node, in one write per node per cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.core.context import PlanContext
from controller.core.kernel.candidates import expand_owner_list
from controller.core.kernel.mark_needs import mark_requirements, required_on
from controller.core.labels import POSSIBLE_LABEL_PREFIX, POSSIBLE_VALUE, possible_label


@dataclass(frozen=True, slots=True)
class MarkChange:
    add: dict[str, str] = field(default_factory=dict)
    remove: frozenset[str] = frozenset()
    evicts: tuple[str, ...] = ()  # service ids whose tasks a removed mark evicts
    # Marks that stay though no policy wants them: label -> services that require them.
    kept: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Marks that stay while their service's tasks still run on the node: label -> service.
    moving: dict[str, str] = field(default_factory=dict)


def possible_marks(ctx: PlanContext) -> dict[str, MarkChange]:
    """Node id -> the possible-owner marks to add and remove (nodes with no change left out)."""
    managed = ctx.managed_services()
    wanted: dict[str, set[str]] = {n.id: set() for n in ctx.snapshot.nodes}
    # Marks that follow a policy: one the policy no longer wants goes once the owners rule
    # has moved the service's tasks off the node (counted against the budgets all the same).
    followed: set[str] = set()
    # Label -> (service, node id -> its active tasks): where a mark still holds tasks.
    holding: dict[str, tuple[str, dict[str, int]]] = {}
    for service in managed:
        settings = ctx.settings(service.id)
        if not settings.possible_nodes:
            continue
        followed.add(possible_label(service.name))
        holding[possible_label(service.name)] = (
            service.name,
            dict(ctx.swarm.held_placement.get(service.id, {})),
        )
        for node_id in expand_owner_list(
            settings.possible_nodes, ctx.snapshot.nodes, ctx.policy.groups
        ):
            wanted[node_id].add(possible_label(service.name))
    # A service the controller cannot read may carry a constraint requiring its mark.
    unreadable = [u.name for u in ctx.snapshot.unreadable if u.kind == "service"]
    requirements = mark_requirements(ctx.snapshot.services, unreadable)
    out: dict[str, MarkChange] = {}
    for node in ctx.snapshot.nodes:
        have = {k for k in node.labels if k.startswith(POSSIBLE_LABEL_PREFIX)}
        to_set = {
            k: POSSIBLE_VALUE
            for k in sorted(wanted[node.id])
            if node.labels.get(k) != POSSIBLE_VALUE
        }
        to_remove = have - wanted[node.id]
        kept = _still_required(to_remove, required_on(requirements, node), followed)
        to_remove -= set(kept)
        moving = {
            label: holding[label][0]
            for label in sorted(to_remove & holding.keys())
            if holding[label][1].get(node.id)
        }
        to_remove -= set(moving)
        if to_set or to_remove or kept or moving:
            evicts = tuple(s.id for s in managed if possible_label(s.name) in to_remove)
            out[node.id] = MarkChange(
                add=to_set, remove=frozenset(to_remove), evicts=evicts, kept=kept, moving=moving
            )
    return out


def _still_required(
    removing: set[str], required: dict[str, list[str]], followed: set[str]
) -> dict[str, tuple[str, ...]]:
    """Marks about to go that a constraint needs, other than the mark's own service's
    when that follows its policy: label -> the services that need it."""
    out: dict[str, tuple[str, ...]] = {}
    for label in sorted(removing):
        names = tuple(
            n
            for n in required.get(label, ())
            if not (label in followed and label == possible_label(n))
        )
        if names:
            out[label] = names
    return out
