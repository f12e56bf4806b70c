"""The record of a replica count the controller changed, kept on the service itself.

A count change and its record go out in one spec write, so Swarm never holds one
without the other: a controller killed at any instant leaves a service either untouched
or changed *and* recorded, and the next controller finishes or undoes it.

Labels:
- `swarm-placement.replicas`: the operator's count, to restore;
- `swarm-placement.replicas-set`: the count the controller wrote; a different live count
  means the operator scaled the service meanwhile, and the operator wins;
- `swarm-placement.operation`: why (`surge`, `hold`, `preempt`, `rebalance`), with
  `swarm-placement.operation-since` (epoch seconds) and `-detail` (free text).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.actions import SetReplicas
from controller.core.labels import OWN_PREFIX
from controller.core.model import Service

BASE_LABEL = OWN_PREFIX + "replicas"
SET_LABEL = OWN_PREFIX + "replicas-set"
OPERATION_LABEL = OWN_PREFIX + "operation"
SINCE_LABEL = OWN_PREFIX + "operation-since"
DETAIL_LABEL = OWN_PREFIX + "operation-detail"
RECORD_LABELS = (BASE_LABEL, SET_LABEL, OPERATION_LABEL, SINCE_LABEL, DETAIL_LABEL)

SURGE, HOLD, PREEMPT, REBALANCE = "surge", "hold", "preempt", "rebalance"


@dataclass(frozen=True, slots=True)
class ReplicaRecord:
    base: int
    written: int
    operation: str
    since: float
    detail: str = ""


class RecordError(ValueError):
    pass


def read_record(labels: Mapping[str, str]) -> ReplicaRecord | None:
    """The record on a service, None when there is none. Raises RecordError if garbled."""
    if BASE_LABEL not in labels:
        return None
    try:
        return ReplicaRecord(
            base=int(labels[BASE_LABEL]),
            written=int(labels[SET_LABEL]),
            operation=labels[OPERATION_LABEL],
            since=float(labels.get(SINCE_LABEL, "0")),
            detail=labels.get(DETAIL_LABEL, ""),
        )
    except (KeyError, ValueError) as exc:
        raise RecordError(f"unreadable replica record: {exc}") from exc


def operator_changed(service: Service, record: ReplicaRecord) -> bool:
    return service.replicas != record.written


def change_replicas(
    service: Service,
    *,
    replicas: int,
    operation: str,
    now: float,
    detail: str = "",
    base: int | None = None,
) -> SetReplicas:
    """Write a new count with its record; the base is kept from an existing record."""
    existing = read_record(service.labels)
    if base is None:
        base = existing.base if existing else (service.replicas or 0)
    return SetReplicas(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        replicas=replicas,
        set_labels={
            BASE_LABEL: str(base),
            SET_LABEL: str(replicas),
            OPERATION_LABEL: operation,
            SINCE_LABEL: f"{now:.3f}",
            DETAIL_LABEL: detail,
        },
    )


def restore_replicas(service: Service, record: ReplicaRecord) -> SetReplicas:
    """Back to the operator's count, and the record gone, in one write."""
    return SetReplicas(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        replicas=record.base,
        remove_labels=RECORD_LABELS,
    )


def forget_record(service: Service) -> SetReplicas:
    """The operator scaled meanwhile: keep their count, drop our record."""
    return SetReplicas(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        replicas=service.replicas or 0,
        remove_labels=RECORD_LABELS,
    )
