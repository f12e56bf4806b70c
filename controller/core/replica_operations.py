"""The replica record's operations as a state machine: which rule may start, keep or
end which operation (one table), and the one function that makes a transition's write
and its decision.

An edge is (the record's operation before, or None when there is none; after). After
is an `Operation` (the record written again, with its new count) or an `End`: the
record removed, the count back to the operator's (`RESTORE`), or the operator's count
kept because they scaled meanwhile (`FORGET`). The table is what the rules do today,
read from their code, not a wish: a few edges are less obvious than the rest and say
why they are there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from controller.core.actions import SetReplicas
from controller.core.decisions import Code, Decision, Outcome
from controller.core.model import Service
from controller.core.replicas import (
    BASE_LABEL,
    OPERATION_LABEL,
    Operation,
    change_replicas,
    forget_replica_record,
    restore_replicas,
)


class End(StrEnum):
    RESTORE = "restore"  # back to the operator's count, the record removed
    FORGET = "forget"  # the operator scaled meanwhile: their count stays, the record goes


Edge = tuple[Operation | None, Operation | End]

_SURGE, _HOLD, _PREEMPT = Operation.SURGE, Operation.HOLD, Operation.PREEMPT
_REBALANCE, _SPECULATE = Operation.REBALANCE, Operation.SPECULATE

TRANSITIONS: Mapping[str, frozenset[Edge]] = {
    "failover": frozenset(
        {
            (None, _HOLD),  # priority none: the lost replicas are not failed over
            (None, _SURGE),
            # The slots no node takes go first; the record keeps its start and detail.
            (_SURGE, _SURGE),
            (_SURGE, End.RESTORE),  # the trim
            (_REBALANCE, End.RESTORE),  # a move's trim, or its withdrawal
            # Whoever's record it is, an operator's count stands.
            *((operation, End.FORGET) for operation in Operation),
        }
    ),
    "speculative": frozenset(
        {
            (None, _SPECULATE),
            (_SPECULATE, _SPECULATE),  # raised for a loss Swarm confirmed meanwhile
            (_SPECULATE, _SURGE),  # confirmed down: handed over to failover's trim
            (_SPECULATE, End.RESTORE),  # a false alarm
        }
    ),
    "preemption": frozenset(
        {
            (None, _PREEMPT),
            (_PREEMPT, _PREEMPT),
            (_HOLD, _HOLD),  # a held service stays held: only `start` ends it
            # A failover surge is no bar to preemption (only a move or a speculative
            # surge is): the record becomes a preemption's, its base kept.
            (_SURGE, _PREEMPT),
        }
    ),
    "restore": frozenset(
        {
            (_PREEMPT, _PREEMPT),  # part of the tasks back, the rest wait
            (_PREEMPT, End.RESTORE),
        }
    ),
    "rebalance": frozenset({(None, _REBALANCE)}),  # only a service at rest moves
    "owners": frozenset(
        {
            (None, _REBALANCE),
            # Only a surge, a move or a speculative surge in flight holds placement
            # steering back: the surge that moves a held or preempted service's extra
            # tasks takes over its record, base kept (failover's trim restores it).
            (_HOLD, _REBALANCE),
            (_PREEMPT, _REBALANCE),
            # Nor does one while a task waits for a node the scheduler could not place,
            # or while the move under way is stalled (owner_waits `move_in_flight`).
            (_SURGE, _REBALANCE),
            (_SPECULATE, _REBALANCE),
            (_REBALANCE, _REBALANCE),  # a stop-first surge raised so enough tasks run
            (_REBALANCE, End.RESTORE),  # a stop-first surge withdrawn
        }
    ),
    "start": frozenset({(_HOLD, End.RESTORE)}),  # the operator's command
    # Releasing a service gives back the operator's count, whoever's record it is (its
    # own write, rules/release, which takes back the rest of what the controller wrote).
    "release": frozenset((operation, End.RESTORE) for operation in Operation),
}


class TransitionError(RuntimeError):
    """A rule made a write the table does not allow: a bug in the rule, not in the
    service (a garbled record is `ReplicaRecordError`)."""


@dataclass(frozen=True, slots=True)
class Transition:
    """A transition's write, before the rule explains it: what the rule may still
    check (a budget) before `decide` pairs it with its decision."""

    rule: str
    service: Service
    action: SetReplicas

    def decide(
        self,
        outcome: Outcome,
        reason: str,
        *,
        code: Code | None = None,
        extra_replica_seconds: float = 0.0,
    ) -> tuple[SetReplicas, Decision]:
        return self.action, Decision(
            self.rule,
            f"service {self.service.name}",
            outcome,
            reason,
            action=self.action,
            code=code,
            extra_replica_seconds=extra_replica_seconds,
        )


def allowed(rule: str, before: Operation | None, after: Operation | End) -> bool:
    return (before, after) in TRANSITIONS.get(rule, frozenset())


def edges_of(service: Service, action: SetReplicas) -> frozenset[Edge]:
    """The edge a count write takes the service's record along, read back from the write
    (what a check of every write against the table needs). Two when it cannot tell: a
    write that removes the record at the operator's count, which is also the base."""
    record = service.replica_record
    before = None if record is None else record.operation
    written = action.set_labels.get(OPERATION_LABEL)
    if written is not None:
        return frozenset({(before, Operation(written))})
    if record is None or BASE_LABEL not in action.remove_labels:
        return frozenset()  # no record written or removed (it is read by its base label)
    ends: set[Edge] = set()
    if action.replicas == record.base:
        ends.add((before, End.RESTORE))
    if action.replicas == (service.replicas or 0):
        ends.add((before, End.FORGET))
    return frozenset(ends)


def transition(
    service: Service,
    rule: str,
    to: Operation | End,
    *,
    replicas: int | None = None,
    now: float | None = None,
    detail: str = "",
    base: int | None = None,
    evicts_from: tuple[str, ...] = (),
    vacate: tuple[str, ...] = (),
    ends_surge: bool = False,
) -> Transition:
    """The write that takes the service's record to `to`, checked against the table.

    To an operation: the count `replicas` recorded at `now` (core/replicas
    `change_replicas`); to `End.RESTORE`: back to the record's base; to `End.FORGET`:
    the operator's count kept."""
    record = service.replica_record
    before = None if record is None else record.operation
    if not allowed(rule, before, to):
        raise TransitionError(
            f"rule {rule} may not take service {service.name} from {before or 'no record'} to {to}"
        )
    action: SetReplicas
    if to is End.FORGET:
        action = forget_replica_record(service)
    elif to is End.RESTORE:
        assert record is not None  # the table has no edge from None to an end
        action = restore_replicas(service, record, evicts_from=evicts_from, ends_surge=ends_surge)
    else:
        if replicas is None or now is None:
            raise TypeError("a transition to an operation needs replicas and now")
        action = change_replicas(
            service,
            replicas=replicas,
            operation=to,
            now=now,
            detail=detail,
            base=base,
            evicts_from=evicts_from,
            vacate=vacate,
        )
    return Transition(rule, service, action)
