"""Failover's exceptions to the rollout rule of the guards (core/guards).

No write goes to a service Swarm is rolling an update for: it would restart the rollout
and replace the spec `docker service rollback` returns to. Failover's own writes are the
exception while Swarm actively rolls, because a replica lost with a node must not wait
for a rollout to end.
"""

from __future__ import annotations

from controller.core.actions import Action, SetReplicas
from controller.core.context import PlanContext, RolloutExemption
from controller.core.model import Service
from controller.core.replicas import (
    OPERATION_LABEL,
    Operation,
    ends_own_move,
    replica_record_taken_back,
)


def failover_raise(service: Service, action: Action) -> bool:
    """Failover raising the replica count (a surge for tasks lost with a node) while Swarm
    actively rolls an update whose failure action is not rollback. Swarm's updater
    carries on with the same spec and the new tasks run it; the price is a restarted
    update and a PreviousSpec of the new spec (docs/failover.md). Never while paused: the
    write would resume the rollout. Never with failure action rollback: Swarm's own
    rollback would then go back to the new spec."""
    return (
        isinstance(action, SetReplicas)
        and _raise_may_go(service)
        and service.replicas is not None
        and action.replicas > service.replicas
        and not action.evicts_from
        and not action.remove_labels
        and action.set_labels.get(OPERATION_LABEL) == Operation.SURGE
    )


def _raise_may_go(service: Service) -> bool:
    """Swarm actively rolls an update whose failure action is not rollback."""
    return service.update_state == "updating" and service.update_failure_action != "rollback"


def takes_back_failover_raise(service: Service, action: Action) -> bool:
    """The trim that ends a failover surge, under the raise's own conditions, at the same
    price. Held back, the surge would outlast the rollout, and should Swarm pause it, stay
    until an operator resumes it: replicas nobody asked for, holding room other tasks need."""
    if not (isinstance(action, SetReplicas) and _raise_may_go(service)):
        return False
    record = replica_record_taken_back(service, action)
    return record is not None and record.operation == Operation.SURGE and not action.set_labels


def _raise(ctx: PlanContext, service: Service, action: Action) -> str | None:
    del ctx
    return "a failover raise of the replica count" if failover_raise(service, action) else None


def _raise_taken_back(ctx: PlanContext, service: Service, action: Action) -> str | None:
    del ctx
    if takes_back_failover_raise(service, action):
        return "the trim that takes back the controller's failover raise"
    return None


def _move_ended(ctx: PlanContext, service: Service, action: Action) -> str | None:
    del ctx
    if isinstance(action, SetReplicas) and service.updating and ends_own_move(service, action):
        return "the trim that ends the controller's own stop-first move"
    return None


FAILOVER_EXEMPTIONS: tuple[RolloutExemption, ...] = (_raise, _raise_taken_back, _move_ended)
