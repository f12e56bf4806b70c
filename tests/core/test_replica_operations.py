"""The replica record's state machine: the table of which rule may start, keep or end
which operation, and the one function that makes a transition's write and decision."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.actions import SetReplicas
from controller.core.decisions import Code, Outcome
from controller.core.memory import Memory
from controller.core.plan import plan
from controller.core.replica_operations import (
    TRANSITIONS,
    End,
    TransitionError,
    allowed,
    edges_of,
    transition,
)
from controller.core.replicas import (
    BASE_LABEL,
    OPERATION_LABEL,
    REPLICA_RECORD_LABELS,
    SET_LABEL,
    Operation,
    change_replicas,
    read_replica_record,
)
from controller.core.rules import rules_named
from controller.policy import Policy

from .builders import service, snapshot
from .capacity_builders import on, pending, slot_nodes, svc


def _recorded(operation: Operation, *, base: int = 3, written: int = 5) -> dict[str, str]:
    return {BASE_LABEL: str(base), SET_LABEL: str(written), OPERATION_LABEL: operation}


def test_a_start_writes_the_record_and_its_decision_names_the_write() -> None:
    web = service("web", replicas=3)
    action, decision = transition(
        web, "failover", Operation.SURGE, replicas=5, now=10.0, detail="lost"
    ).decide(Outcome.SURGE, "2 replica(s) lost with a node", code=Code.FALSE_ALARM)
    assert action == change_replicas(
        web, replicas=5, operation=Operation.SURGE, now=10.0, detail="lost"
    )
    assert (decision.rule, decision.subject, decision.outcome) == (
        "failover",
        "service web",
        Outcome.SURGE,
    )
    assert decision.action is action
    assert decision.code is Code.FALSE_ALARM


def test_an_end_takes_the_count_back_and_removes_the_record() -> None:
    web = service("web", replicas=5, labels=_recorded(Operation.PREEMPT))
    action = transition(web, "restore", End.RESTORE, evicts_from=("n1",)).action
    assert (action.replicas, action.evicts_from) == (3, ("n1",))
    assert set(action.remove_labels) == set(REPLICA_RECORD_LABELS)


def test_forget_keeps_the_operators_count() -> None:
    web = service("web", replicas=7, labels=_recorded(Operation.SPECULATE))
    action = transition(web, "failover", End.FORGET).action
    assert action.replicas == 7
    assert set(action.remove_labels) == set(REPLICA_RECORD_LABELS)


@pytest.mark.parametrize(
    ("rule", "before", "after"),
    [
        ("rebalance", Operation.SURGE, Operation.REBALANCE),  # only a service at rest moves
        ("restore", Operation.HOLD, End.RESTORE),  # a hold ends by `start` only
        ("start", Operation.PREEMPT, End.RESTORE),
        ("preemption", Operation.SPECULATE, Operation.PREEMPT),
        ("speculative", Operation.SURGE, End.RESTORE),
        ("owners", None, End.RESTORE),
        ("mirror", None, Operation.SURGE),  # no such rule writes counts
    ],
)
def test_a_transition_the_table_lacks_is_refused(
    rule: str, before: Operation | None, after: Operation | End
) -> None:
    assert not allowed(rule, before, after)
    labels = {} if before is None else _recorded(before)
    web = service("web", replicas=5, labels=labels)
    with pytest.raises(TransitionError, match=f"rule {rule} may not take service web"):
        transition(web, rule, after, replicas=6, now=1.0)


def test_no_edge_starts_at_an_end_or_ends_where_there_is_no_record() -> None:
    for rule, edges in TRANSITIONS.items():
        for before, after in edges:
            assert not (before is None and isinstance(after, End)), rule


def test_a_transition_to_an_operation_needs_its_count() -> None:
    with pytest.raises(TypeError):
        transition(service("web"), "failover", Operation.SURGE, now=1.0)


def test_a_failover_surge_is_no_bar_to_preemption_and_becomes_its_record() -> None:
    """The table's less obvious edge (surge -> preempt), as the preemption rule makes it:
    only a move or a speculative surge keeps a service from being a victim."""
    low = svc("low", 6, priority="low", labels={"placement.max-unavailable": "2"})
    low = replace(low, labels={**low.labels, **_recorded(Operation.SURGE, base=4, written=6)})
    high = svc("high", 2, priority="high")
    snap = snapshot(slot_nodes(2, 2, 2), [high, low], on(low, 1, 1, 2, 2, 3, 3) + pending(high, 2))
    result = plan(
        snapshot=snap,
        policy=Policy.default(),
        memory=Memory(),
        now=1000.0,
        rules=rules_named("preemption"),
    )
    (action,) = (a for a in result.actions if isinstance(a, SetReplicas))
    record = read_replica_record(action.set_labels)
    assert record is not None
    assert (record.base, record.written, record.operation) == (4, 4, Operation.PREEMPT)


def test_a_write_is_read_back_as_its_edge() -> None:
    bare = service("web", replicas=3)
    surge = transition(bare, "failover", Operation.SURGE, replicas=5, now=1.0).action
    assert edges_of(bare, surge) == {(None, Operation.SURGE)}
    surged = service("web", replicas=5, labels=_recorded(Operation.SURGE))
    trim = transition(surged, "failover", End.RESTORE).action
    assert edges_of(surged, trim) == {(Operation.SURGE, End.RESTORE)}
    scaled = service("web", replicas=8, labels=_recorded(Operation.SURGE))
    forget = transition(scaled, "failover", End.FORGET).action
    assert edges_of(scaled, forget) == {(Operation.SURGE, End.FORGET)}
    # Scaled to the record's base: the write cannot tell a restore from a forget.
    at_base = service("web", replicas=3, labels=_recorded(Operation.SURGE))
    assert edges_of(at_base, transition(at_base, "failover", End.FORGET).action) == {
        (Operation.SURGE, End.RESTORE),
        (Operation.SURGE, End.FORGET),
    }
