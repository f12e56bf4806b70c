"""The part of a refused steering write that may still be made: the exclusions it drops.

The guards refuse a constraint write that would strand a service or stop tasks on a node
Swarm does not report yet (a new Raft leader's first seconds). Refusing all of it keeps
the steering already in place, and that can be what holds a replica pending: its target
and standby lost together, the nodes the new steering would open still excluded. Swarm
alone would have placed it on any node. Dropping a constraint only widens placement, so
it stops no task; this module gives the write that drops the owners rule's exclusions
the refused one drops, and adds nothing.

Only exclusions the controller recorded (its `excluded` label) are dropped, and only of
nodes the policy lets the service use: a possible owner, and never under hard
anti-affinity (whose exclusions are the policy itself).
"""

from __future__ import annotations

from controller.core.actions import Action, SetServiceConstraints
from controller.core.context import PlanContext
from controller.core.kernel.candidates import expand_owner_list
from controller.core.labels import (
    EXCLUDED_LABEL,
    excluded_node_set,
    exclusion_constraints,
    format_exclusions,
)
from controller.core.model import Service
from controller.policy import AntiAffinityMode


def widening_part(ctx: PlanContext, action: Action) -> SetServiceConstraints | None:
    """The write that drops what `action` drops of the controller's exclusions and adds
    nothing, or None when it drops none (or the write is not the owners rule's steering)."""
    if not isinstance(action, SetServiceConstraints):
        return None
    service = ctx.swarm.service_by_id.get(action.service_id)
    if service is None or set(action.set_labels) != {EXCLUDED_LABEL} or action.remove_labels:
        return None
    settings = ctx.settings(service.id)
    if settings.anti_affinity and settings.anti_affinity_mode is AntiAffinityMode.HARD:
        return None
    before = excluded_node_set(service.labels)
    dropped = before - excluded_node_set(action.set_labels)
    if settings.possible_nodes:
        possible = expand_owner_list(settings.possible_nodes, ctx.swarm.nodes, ctx.policy.groups)
        dropped &= set(possible)
    drop = set(exclusion_constraints(frozenset(dropped)))
    constraints = tuple(c for c in service.constraints if c not in drop)
    if len(constraints) == len(service.constraints):
        return None
    return SetServiceConstraints(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        constraints=constraints,
        set_labels={EXCLUDED_LABEL: format_exclusions(before - dropped)},
    )


def opening_ready_nodes(ctx: PlanContext, service: Service) -> SetServiceConstraints | None:
    """While steering waits for a whole view (a new Raft leader has not heard from every
    node), a replica Swarm is placing must not wait behind the controller's exclusions of
    nodes that take tasks now: Swarm alone would have placed it there. The write that
    drops those exclusions (the policy's own limits kept, as above), or None."""
    if not any(t.is_pending for t in ctx.snapshot.tasks_of(service.id)):
        return None
    excluded = excluded_node_set(service.labels)
    opening = {n.id for n in ctx.snapshot.nodes if n.accepts_tasks and n.id in excluded}
    if not opening:
        return None
    proposed = SetServiceConstraints(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        constraints=service.constraints,
        set_labels={EXCLUDED_LABEL: format_exclusions(excluded - opening)},
    )
    return widening_part(ctx, proposed)
