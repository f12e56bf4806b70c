"""`start`: give a held service (priority `none`) back the replicas the controller held.

The failover rule scales a priority-`none` service's lost replicas away and records its
count (`operation=hold`). Starting it is one version-checked raw write that puts the
recorded count back and removes the record together, so a start that races the
controller either lands whole or is retried from a fresh read.

It is the operator's word, like `docker service scale`, and takes no lease: it plans
nothing from a cluster view, and its one write goes at the version it read, so a running
controller's write planned before it is refused as a conflict and planned again from
what `start` left. But like every write of the controller's, it never goes into a
rollout Swarm is running or has paused (the guards' rule, core/guards): it would restart
the rollout, or resume a paused one.
"""

from __future__ import annotations

from dataclasses import dataclass

import docker

from controller.adapters.attrs import AttrsError, service_from_attrs
from controller.adapters.docker_read import ServiceNotFoundError
from controller.adapters.engine import ConflictError, GoneError, inspect_service
from controller.adapters.errors import RetryableError, TerminalError
from controller.adapters.writes import execute_action
from controller.core.guards import rollout_reason
from controller.core.replica_operations import End, transition
from controller.core.replicas import Operation, operator_changed

# Who ends a hold, in the table of the record's operations (core/replica_operations).
START = "start"
ATTEMPTS = 3


class NothingToStartError(TerminalError, LookupError):
    """The service holds no replicas the controller could give back."""


class InRolloutError(RetryableError, RuntimeError):
    """Swarm is rolling an update or rollback of the service, or has paused one: nothing
    was written, and `start` may succeed once the rollout has ended."""

    cause = "in-rollout"
    words = "the service is in a rollout"


@dataclass(frozen=True, slots=True)
class Started:
    name: str
    before: int
    after: int


def start_service(client: docker.DockerClient, name: str) -> Started:
    """Restore the held count of service `name` (name or ID)."""
    for attempt in range(ATTEMPTS):
        try:
            attrs = inspect_service(client, name)
        except GoneError:
            raise ServiceNotFoundError(f"no service named {name!r}") from None
        try:
            service = service_from_attrs(attrs)
        except AttrsError as exc:
            raise NothingToStartError(f"service {name} cannot be read: {exc}") from exc
        if service.replica_record_error is not None:
            raise NothingToStartError(
                f"service {name} cannot be read: {service.replica_record_error}"
            )
        record = service.replica_record
        if record is None:
            raise NothingToStartError(f"service {service.name} is not held: nothing to start")
        if record.operation != Operation.HOLD:
            raise NothingToStartError(
                f"service {service.name} is not held but under a controller operation "
                f"({record.operation}, count {record.base} recorded): the controller "
                "restores it itself"
            )
        if operator_changed(service, record):
            raise NothingToStartError(
                f"service {service.name} was scaled to {service.replicas} by hand after it "
                f"was held at {record.written}: that count stands, nothing to start"
            )
        # As the guards hold a write that no rule's exception lets into a rollout.
        if service.in_rollout:
            raise InRolloutError(
                f"service {service.name} is in a rollout ({service.update_state}): "
                f"{rollout_reason(service)}. Nothing was written: run start again once "
                "the rollout has ended (a paused one ends when you resume it or roll it "
                "back: docker service update, docker service rollback)"
            )
        try:
            execute_action(client, transition(service, START, End.RESTORE).action)
        except ConflictError:
            if attempt == ATTEMPTS - 1:
                raise
            continue  # changed since read: read again
        except GoneError:
            raise ServiceNotFoundError(f"no service named {name!r}") from None
        return Started(name=service.name, before=service.replicas or 0, after=record.base)
    raise AssertionError("unreachable")
