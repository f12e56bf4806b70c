"""The replica record's labels: what one version writes, the other reads, byte for byte."""

from __future__ import annotations

import pytest

from controller.core.replica_record import (
    BASE_LABEL,
    DETAIL_LABEL,
    OPERATION_LABEL,
    SET_LABEL,
    SINCE_LABEL,
    VACATE_LABEL,
    Operation,
    ReplicaRecord,
    ReplicaRecordError,
    read_replica_record,
)
from controller.core.replicas import change_replicas
from tests.core.builders import service

# Labels as the version before the typed operations wrote them (its `change_replicas`,
# operation a plain string), one per operation it knew.
WRITTEN_BEFORE = {
    text: {
        BASE_LABEL: "3",
        SET_LABEL: "5",
        OPERATION_LABEL: text,
        SINCE_LABEL: "1700000000.250",
        DETAIL_LABEL: "2 replica(s) lost with a node",
    }
    for text in ("surge", "hold", "preempt", "rebalance", "speculate")
}


@pytest.mark.parametrize("text", sorted(WRITTEN_BEFORE))
def test_a_record_written_before_is_read_with_its_operation(text: str) -> None:
    record = read_replica_record(WRITTEN_BEFORE[text])
    assert record == ReplicaRecord(
        base=3,
        written=5,
        operation=Operation(text),
        since=1700000000.25,
        detail="2 replica(s) lost with a node",
    )
    assert isinstance(record.operation, Operation)


@pytest.mark.parametrize("text", sorted(WRITTEN_BEFORE))
def test_a_record_written_now_has_the_labels_written_before(text: str) -> None:
    web = service("web", replicas=3)
    action = change_replicas(
        web,
        replicas=5,
        operation=Operation(text),
        now=1700000000.25,
        detail="2 replica(s) lost with a node",
    )
    assert action.set_labels == WRITTEN_BEFORE[text]
    # The same text, not an enum's name or repr: the label is the member's value.
    assert str(action.set_labels[OPERATION_LABEL]) == text
    assert f"{action.set_labels[OPERATION_LABEL]}" == text


def test_the_operations_are_exactly_those_written_before() -> None:
    assert {str(o) for o in Operation} == set(WRITTEN_BEFORE)


def test_a_stop_first_move_keeps_its_nodes_label() -> None:
    web = service("web", replicas=2)
    action = change_replicas(
        web, replicas=3, operation=Operation.REBALANCE, now=5.0, vacate=("n2", "n1")
    )
    assert action.set_labels[VACATE_LABEL] == "n1,n2"
    record = read_replica_record(action.set_labels)
    assert record is not None
    assert record.vacate == ("n1", "n2")


def test_an_unknown_operation_is_an_unreadable_record_not_a_crash() -> None:
    labels = {**WRITTEN_BEFORE["surge"], OPERATION_LABEL: "evacuate"}
    with pytest.raises(ReplicaRecordError, match="unknown operation 'evacuate'"):
        read_replica_record(labels)
    web = service("web", replicas=5, labels=labels)
    assert web.replica_record is None
    assert web.replica_record_error == "unreadable replica record: unknown operation 'evacuate'"
