"""The replica record's labels, and reading them: the operator's count to restore, the
count the controller wrote, why and since when (see core/replicas for the writes).

Read once per service, when the service value is made (core/model `Service`): every
rule then reads `service.replica_record`, or `service.replica_record_error` when the
labels are garbled, rather than decoding and catching again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from controller.core.labels import OWN_PREFIX

BASE_LABEL = OWN_PREFIX + "replicas"
SET_LABEL = OWN_PREFIX + "replicas-set"
OPERATION_LABEL = OWN_PREFIX + "operation"
SINCE_LABEL = OWN_PREFIX + "operation-since"
DETAIL_LABEL = OWN_PREFIX + "operation-detail"
VACATE_LABEL = OWN_PREFIX + "operation-vacate"
REPLICA_RECORD_LABELS = (
    BASE_LABEL,
    SET_LABEL,
    OPERATION_LABEL,
    SINCE_LABEL,
    DETAIL_LABEL,
    VACATE_LABEL,
)


class Operation(StrEnum):
    """Why the controller holds a service's count: the `operation` label's value, as
    written (a `StrEnum`, so the label text is the member's value, byte for byte). Which
    rule may start, keep or end which one: core/replica_operations."""

    SURGE = "surge"  # failover: tasks lost with a node, started again before Swarm does
    HOLD = "hold"  # priority none: lost tasks not failed over, until `start`
    PREEMPT = "preempt"  # scaled down to make room for a higher priority
    REBALANCE = "rebalance"  # a move: surge onto the targets, trim from the sources
    # A speculative failover's surge for the tasks of a suspected node (rules/failover/speculative).
    SPECULATE = "speculate"


@dataclass(frozen=True, slots=True)
class ReplicaRecord:
    base: int
    written: int
    operation: Operation
    since: float
    detail: str = ""
    vacate: tuple[str, ...] = ()  # nodes a stop-first move leaves once its surge runs


class ReplicaRecordError(ValueError):
    pass


def read_replica_record(labels: Mapping[str, str]) -> ReplicaRecord | None:
    """The record on a service, None when there is none. Raises ReplicaRecordError if garbled."""
    if BASE_LABEL not in labels:
        return None
    try:
        return ReplicaRecord(
            base=int(labels[BASE_LABEL]),
            written=int(labels[SET_LABEL]),
            operation=_operation(labels[OPERATION_LABEL]),
            since=float(labels.get(SINCE_LABEL, "0")),
            detail=labels.get(DETAIL_LABEL, ""),
            vacate=tuple(sorted(n for n in labels.get(VACATE_LABEL, "").split(",") if n)),
        )
    except (KeyError, ValueError) as exc:
        raise ReplicaRecordError(f"unreadable replica record: {exc}") from exc


def _operation(text: str) -> Operation:
    try:
        return Operation(text)
    except ValueError:
        raise ValueError(f"unknown operation {text!r}") from None
