"""The record of a replica count the controller changed, kept on the service itself.

A count change and its record go out in one spec write, so Swarm never holds one
without the other: a controller killed at any instant leaves a service either untouched
or changed *and* recorded, and the next controller finishes or undoes it.

Labels:
- `swarm-placement.replicas`: the operator's count, to restore;
- `swarm-placement.replicas-set`: the count the controller wrote; a different live count
  means the operator scaled the service meanwhile, and the operator wins;
- `swarm-placement.operation`: why (an `Operation`: `surge`, `hold`, `preempt`,
  `rebalance`, `speculate`), with
  `swarm-placement.operation-since` (epoch seconds) and `-detail` (free text);
- `swarm-placement.operation-vacate`: for the rebalance that moves a stop-first service,
  the node IDs its tasks leave once the surged tasks run (see rules/owners).
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.actions import SetReplicas
from controller.core.model import Service
from controller.core.replica_record import (
    BASE_LABEL,
    DETAIL_LABEL,
    OPERATION_LABEL,
    REPLICA_RECORD_LABELS,
    SET_LABEL,
    SINCE_LABEL,
    VACATE_LABEL,
    Operation,
    ReplicaRecord,
    ReplicaRecordError,
    read_replica_record,
)

__all__ = [
    "BASE_LABEL",
    "DETAIL_LABEL",
    "OPERATION_LABEL",
    "REPLICA_RECORD_LABELS",
    "SET_LABEL",
    "SINCE_LABEL",
    "VACATE_LABEL",
    "Operation",
    "ReplicaRecord",
    "ReplicaRecordError",
    "change_replicas",
    "ends_own_move",
    "forget_replica_record",
    "is_in_flight",
    "operator_changed",
    "read_replica_record",
    "replica_record_taken_back",
    "restore_replicas",
]


def is_in_flight(service: Service) -> bool:
    """A surge or rebalance is under way: placement steering must wait for it."""
    if service.replica_record_error is not None:
        return True
    record = service.replica_record
    return record is not None and record.operation in {
        Operation.SURGE,
        Operation.REBALANCE,
        Operation.SPECULATE,
    }


def operator_changed(
    service: Service, record: ReplicaRecord, overridden: Mapping[str, float] | None = None
) -> bool:
    """An operator scaled the service while the record stood: now, or once before
    (`overridden`, core/memory), even if they scaled back to the count it wrote."""
    if service.replicas != record.written:
        return True
    return overridden is not None and overridden.get(service.id) == record.since


def change_replicas(
    service: Service,
    *,
    replicas: int,
    operation: str,
    now: float,
    detail: str = "",
    base: int | None = None,
    evicts_from: tuple[str, ...] = (),
    vacate: tuple[str, ...] = (),
) -> SetReplicas:
    """Write a new count with its record; the base is kept from an existing record.

    `evicts_from`: the nodes on which the change (or the trim that ends it) may stop a
    task, so the disruption budgets and the cooldown apply to it."""
    existing = service.replica_record
    if base is None:
        base = existing.base if existing else (service.replicas or 0)
    labels = {
        BASE_LABEL: str(base),
        SET_LABEL: str(replicas),
        OPERATION_LABEL: operation,
        SINCE_LABEL: f"{now:.3f}",
        DETAIL_LABEL: detail,
    }
    if vacate:
        labels[VACATE_LABEL] = ",".join(sorted(vacate))
    return SetReplicas(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        replicas=replicas,
        set_labels=labels,
        evicts_from=evicts_from,
    )


def restore_replicas(
    service: Service,
    record: ReplicaRecord,
    *,
    evicts_from: tuple[str, ...] = (),
    ends_surge: bool = False,
) -> SetReplicas:
    """Back to the operator's count, and the record gone, in one write."""
    return SetReplicas(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        replicas=record.base,
        remove_labels=REPLICA_RECORD_LABELS,
        evicts_from=evicts_from,
        ends_surge=ends_surge,
    )


def forget_replica_record(service: Service) -> SetReplicas:
    """The operator scaled meanwhile: keep their count, drop our record."""
    return SetReplicas(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        replicas=service.replicas or 0,
        remove_labels=REPLICA_RECORD_LABELS,
    )


def replica_record_taken_back(service: Service, action: SetReplicas) -> ReplicaRecord | None:
    """The service's record, if `action` is the write that ends it: back to the
    operator's count, the record's labels gone (see `restore_replicas`)."""
    record = service.replica_record
    if (
        record is None
        or action.replicas != record.base
        or not set(action.remove_labels) >= set(REPLICA_RECORD_LABELS)
    ):
        return None
    return record


def ends_own_move(service: Service, action: SetReplicas) -> bool:
    """The trim that ends a stop-first move of the controller's (rules/owners/owner_moves),
    once its sources are excluded. The exclusion started a rolling update whose replacement
    for the stopped task may find no node (the targets are full): this trim drops exactly
    that replacement and so ends the rollout, which would otherwise wait for good. The
    rollout is the controller's own: the spec it rolls is the exclusion the controller
    wrote."""
    record = replica_record_taken_back(service, action)
    return (
        record is not None
        and record.operation == Operation.REBALANCE
        and bool(record.vacate)
        and set(record.vacate) <= service.excluded
    )
