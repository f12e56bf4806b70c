"""Restore: preempted services come back as room returns, highest priority first."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetReplicas
from controller.core.memory import Memory
from controller.core.replicas import BASE_LABEL, REPLICA_RECORD_LABELS, read_replica_record

from .builders import snapshot
from .capacity_builders import on, pending, run, slot_nodes, svc


def preempted(base: int, written: int) -> dict[str, str]:
    return {
        BASE_LABEL: str(base),
        "swarm-placement.replicas-set": str(written),
        "swarm-placement.operation": "preempt",
        "swarm-placement.operation-since": "900",
        "swarm-placement.operation-detail": "2 task(s) for high",
    }


def test_room_back_restores_the_recorded_count_and_removes_the_record() -> None:
    low = svc("low", 4, priority="low", labels=preempted(6, 4))
    result = run(snapshot(slot_nodes(2, 2, 2), [low], on(low, 1, 1, 2, 3)))
    (action,) = result.actions
    assert isinstance(action, SetReplicas) and action.replicas == 6
    assert set(action.remove_labels) == set(REPLICA_RECORD_LABELS) and not action.set_labels


def test_part_of_the_room_back_restores_part_and_keeps_the_record() -> None:
    low = svc("low", 4, priority="low", labels=preempted(6, 4))
    other = svc("other", 1, priority="low", preemptible=False)
    result = run(snapshot(slot_nodes(2, 2, 2), [low, other], on(low, 1, 1, 2, 3) + on(other, 2)))
    (action,) = result.actions
    assert isinstance(action, SetReplicas) and action.replicas == 5
    record = read_replica_record(action.set_labels)
    assert record is not None and (record.base, record.written, record.operation) == (
        6,
        5,
        "preempt",
    )


def test_no_restore_into_room_a_higher_priority_service_is_waiting_for() -> None:
    low = svc("low", 4, priority="low", labels=preempted(6, 4))
    high = svc("high", 2, priority="high")
    result = run(snapshot(slot_nodes(2, 2, 2), [low, high], on(low, 1, 1, 2, 3) + pending(high, 2)))
    assert result.actions == ()
    assert any(d.rule == "restore" and d.outcome == "wait" for d in result.decisions)


def test_highest_priority_is_restored_first() -> None:
    medium = svc("medium", 2, priority="medium", labels=preempted(3, 2))
    low = svc("low", 2, priority="low", labels=preempted(3, 2))
    filler = svc("filler", 1, priority="high")
    tasks = on(medium, 1, 2) + on(low, 1, 3, first_slot=10) + on(filler, 2, first_slot=20)
    result = run(snapshot(slot_nodes(2, 2, 2), [medium, low, filler], tasks))
    assert [(a.service_name, a.replicas) for a in result.actions] == [("medium", 3)]  # type: ignore[union-attr]
    assert any(d.subject == "service low" and d.outcome == "wait" for d in result.decisions)


def test_a_count_the_operator_changed_is_not_restored_but_forgotten() -> None:
    low = svc("low", 3, priority="low", labels=preempted(6, 4))
    result = run(snapshot(slot_nodes(2, 2, 2), [low], on(low, 1, 2, 3)))
    (action,) = result.actions
    assert isinstance(action, SetReplicas) and action.replicas == 3  # the failover rule's forget
    assert not any(d.rule == "restore" for d in result.decisions)


def test_a_service_no_longer_managed_keeps_its_record_and_says_so() -> None:
    low = svc("low", 4, priority="low", labels=preempted(6, 4), managed=False)
    result = run(snapshot(slot_nodes(2, 2, 2), [low], on(low, 1, 1, 2, 3)))
    assert result.actions == ()
    assert any(d.rule == "restore" and d.outcome == "keep" for d in result.decisions)


def test_a_held_service_is_not_restored_by_capacity() -> None:
    hold = {**preempted(6, 4), "swarm-placement.operation": "hold"}
    batch = svc("batch", 4, priority="none", labels=hold)
    assert run(snapshot(slot_nodes(2, 2, 2), [batch], on(batch, 1, 1, 2, 3))).actions == ()


def test_constraints_limit_where_restored_tasks_fit() -> None:
    low = svc(
        "low", 1, priority="low", labels=preempted(3, 1), constraints=["node.hostname==node-3"]
    )
    filler = svc("filler", 4, priority="high")
    tasks = on(low, 3) + on(filler, 1, 1, 2, 2, first_slot=10)
    (action,) = run(snapshot(slot_nodes(2, 2, 2), [low, filler], tasks)).actions
    assert isinstance(action, SetReplicas) and action.replicas == 2


def test_no_restore_while_a_higher_priority_service_rolls_an_update() -> None:
    # Its new tasks show up one by one; room that looks free may be theirs.
    low = svc("low", 4, priority="low", labels=preempted(6, 4))
    high = replace(svc("high", 1, priority="high"), update_state="updating")
    result = run(
        snapshot(slot_nodes(2, 2, 2), [low, high], on(low, 1, 1, 2, 3) + on(high, 2, first_slot=9))
    )
    assert result.actions == ()
    assert any("is rolling an update" in d.reason for d in result.decisions)


def test_a_preempted_service_whose_rollout_swarm_paused_waits() -> None:
    low = replace(svc("low", 4, priority="low", labels=preempted(6, 4)), update_state="paused")
    result = run(snapshot(slot_nodes(2, 2, 2), [low], on(low, 1, 1, 2, 3)))
    assert result.actions == ()
    (wait,) = [d for d in result.decisions if d.rule == "restore"]
    assert wait.outcome == "wait"
    assert wait.reason == (
        "2 task(s) preempted: rollout paused by Swarm; the controller waits: "
        "a write would resume it"
    )


def test_a_count_the_operator_scaled_over_and_back_is_not_restored() -> None:
    """As failover's surge (test_failover): the operator scaled `low` while its record
    stood, then back to the count the preemption wrote, before the forget went out. The
    record no longer says the count is the controller's: restoring it would take the
    operator's 4 up to 6."""
    low = svc("low", 4, priority="low", labels=preempted(6, 4))
    seen_over = Memory(overridden={low.id: 900.0})  # remembered, or read from the mirror
    result = run(snapshot(slot_nodes(2, 2, 2), [low], on(low, 1, 1, 2, 3)), memory=seen_over)
    raised = [a for a in result.actions if isinstance(a, SetReplicas) and a.replicas > 4]
    assert not raised, "the operator's 4 stands"
    assert not any(d.rule == "restore" for d in result.decisions)
    (forget,) = result.actions
    assert isinstance(forget, SetReplicas) and forget.replicas == 4
    assert set(forget.remove_labels) == set(REPLICA_RECORD_LABELS)
