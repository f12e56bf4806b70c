"""A move of the controller's own that can no longer finish.

A move steers a service's tasks onto its targets, and Swarm's updater waits, with no
timeout, for each replacement to run. When every node the steering allows goes down
first, the old tasks keep running (start-first) and the rollout waits: the replacement
Swarm restarts stays pending, and the moment a target returns the move completes onto
it, however often it has just failed. Steering the service away from the down nodes calls
the move off: the updater restarts with the new spec, keeps each old task where it runs
(only its placement changed, and its node is still allowed) and drops the rest.
"""

from __future__ import annotations

from controller.core.constraints import ConstraintError, node_filter, parse_constraint
from controller.core.counts import active_placement
from controller.core.model import ClusterSnapshot, Service


def stalled_on(snapshot: ClusterSnapshot, service: Service) -> frozenset[str]:
    """The down nodes the controller's own rollout of `service` waits for: those its
    constraints allow, when they allow no node that takes tasks now while a task still
    runs where they refuse it (empty: none). A rollout that has replaced every task (in
    Swarm's monitor period) has nothing left to call off, and an operator's rollout is
    Swarm's to finish: neither counts."""
    if not (service.updating and service.rollout_is_own):
        return frozenset()
    try:
        allows = node_filter(parse_constraint(c) for c in service.constraints)
    except ConstraintError:
        return frozenset()
    allowed = [n for n in snapshot.nodes if allows(n)]
    if any(n.accepts_tasks for n in allowed):
        return frozenset()
    nodes = snapshot.node_by_id
    active = active_placement(snapshot).get(service.id, {})  # ready nodes only
    leaving = any(not allows(nodes[n]) for n in active)
    return frozenset(n.id for n in allowed if not n.is_ready) if leaving else frozenset()
