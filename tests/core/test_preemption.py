"""Preemption: who is preempted, by how much, and when nothing is touched (and why)."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetReplicas
from controller.core.context import PlanContext, RuleOutput, RuleSpec
from controller.core.decisions import Decision, Outcome
from controller.core.memory import Memory
from controller.core.model import Resources
from controller.core.plan import plan
from controller.core.replicas import BASE_LABEL, read_replica_record
from controller.core.rules import rule_named, rules_named
from controller.policy import ControllerSettings, Policy

from .builders import snapshot
from .capacity_builders import ROOMY, on, pending, run, slot_nodes, svc


def _counts(result) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {a.service_name: a.replicas for a in result.actions if isinstance(a, SetReplicas)}


def _reasons(result, outcome: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.reason for d in result.decisions if d.outcome == outcome]


def test_a_pending_high_service_takes_exactly_the_room_it_needs() -> None:
    low = svc("low", 6, priority="low", labels={"placement.max-unavailable": "2"})
    high = svc("high", 2, priority="high")
    snap = snapshot(slot_nodes(2, 2, 2), [high, low], on(low, 1, 1, 2, 2, 3, 3) + pending(high, 2))
    result = run(snap)
    (action,) = result.actions
    assert isinstance(action, SetReplicas) and action.replicas == 4
    record = read_replica_record(action.set_labels)
    assert record is not None
    assert (record.base, record.written, record.operation) == (6, 4, "preempt")
    assert "2 task(s) for high" in record.detail
    assert any("stopping low -2" in r for r in _reasons(result, "preempt"))


def test_same_or_lower_priority_never_preempts() -> None:
    for victim_priority in ("high", "medium", 2500):
        other = svc("other", 6, priority=victim_priority)
        want = svc("want", 1, priority=2500)
        snap = snapshot(
            slot_nodes(2, 2, 2), [want, other], on(other, 1, 1, 2, 2, 3, 3) + pending(want, 1)
        )
        result = run(snap)
        assert result.actions == ()
        assert any("preemption gap 1000" in r for r in _reasons(result, "cannot-help"))


def test_the_gap_is_the_policys() -> None:
    other = svc("other", 6, priority=2000)
    want = svc("want", 1, priority=2500)
    snap = snapshot(
        slot_nodes(2, 2, 2), [want, other], on(other, 1, 1, 2, 2, 3, 3) + pending(want, 1)
    )
    policy = replace(Policy.default(), controller=ControllerSettings(preemption_gap=500))
    assert _counts(run(snap, policy=policy)) == {"other": 5}


def test_a_non_preemptible_service_is_never_touched() -> None:
    keep = svc("keep", 6, priority="none", preemptible=False)
    high = svc("high", 1, priority="high")
    snap = snapshot(
        slot_nodes(2, 2, 2), [high, keep], on(keep, 1, 1, 2, 2, 3, 3) + pending(high, 1)
    )
    result = run(snap)
    assert result.actions == ()
    assert _reasons(result, "cannot-help")


def test_an_unmanaged_service_is_never_a_victim() -> None:
    legacy = svc("legacy", 6, priority="low", managed=False)
    high = svc("high", 1, priority="high")
    snap = snapshot(
        slot_nodes(2, 2, 2), [high, legacy], on(legacy, 1, 1, 2, 2, 3, 3) + pending(high, 1)
    )
    assert run(snap).actions == ()


def test_a_task_larger_than_any_node_preempts_nothing_and_says_why() -> None:
    low = svc("low", 6, priority="low")
    big = svc("big", 1, priority="high", reserve=3)
    # Nodes also report CPUs and memory; the reason names only what the task reserves.
    cpus = Resources(nano_cpus=4_000_000_000, memory_bytes=1 << 30, generic={"slot": 2})
    nodes = [replace(n, capacity=cpus) for n in slot_nodes(2, 2, 2)]
    snap = snapshot(nodes, [big, low], on(low, 1, 1, 2, 2, 3, 3) + pending(big, 1))
    result = run(snap)
    assert result.actions == ()
    (reason,) = _reasons(result, "cannot-help")
    assert "reserves slot=3" in reason and "even when empty (largest: slot=2):" in reason


def test_room_needed_where_no_victim_runs_preempts_nothing() -> None:
    # Only node-1 may run it, and node-1 is full of a non-preemptible service.
    keep = svc("keep", 2, priority="low", preemptible=False)
    low = svc("low", 4, priority="low")
    pinned = svc("pinned", 1, priority="high", constraints=["node.hostname==node-1"])
    snap = snapshot(
        slot_nodes(2, 2, 2),
        [keep, low, pinned],
        on(keep, 1, 1) + on(low, 2, 2, 3, 3) + pending(pinned, 1),
    )
    result = run(snap)
    assert result.actions == ()
    (reason,) = _reasons(result, "cannot-help")
    assert "stopping every task of the preemptible services (low)" in reason


def test_room_already_free_waits_for_the_scheduler() -> None:
    # The victim's stopped tasks are gone from the snapshot: their room looks free.
    low = svc("low", 4, priority="low", labels={BASE_LABEL: "6"})
    high = svc("high", 2, priority="high")
    snap = snapshot(slot_nodes(2, 2, 2), [high, low], on(low, 1, 2, 3, 3) + pending(high, 2))
    result = run(snap)
    assert result.actions == ()
    assert _reasons(result, "wait")


def test_pending_for_other_reasons_is_no_trigger() -> None:
    low = svc("low", 6, priority="low")
    high = svc("high", 1, priority="high")
    tasks = on(low, 1, 1, 2, 2, 3, 3) + pending(high, 1, error="no suitable node (1 node ...)")
    assert run(snapshot(slot_nodes(2, 2, 2), [high, low], tasks)).actions == ()


def test_lowest_priority_first_and_higher_victims_are_spared() -> None:
    lowest = svc("lowest", 1, priority=500)
    low = svc("low", 5, priority="low", labels=ROOMY)
    high = svc("high", 3, priority="high")
    snap = snapshot(
        slot_nodes(2, 2, 2),
        [high, low, lowest],
        on(lowest, 1) + on(low, 1, 2, 2, 3, 3) + pending(high, 3),
    )
    result = run(snap)
    assert _counts(result) == {"lowest": 0, "low": 3}
    # Victims are written lowest priority first: a crash between them leaves the lowest done.
    assert [a.service_name for a in result.actions] == ["lowest", "low"]


def test_a_victim_whose_tasks_do_not_help_is_spared() -> None:
    lowest = svc("lowest", 2, priority=500, constraints=["node.hostname==node-3"])
    low = svc("low", 4, priority="low")
    pinned = svc("pinned", 1, priority="high", constraints=["node.hostname!=node-3"])
    snap = snapshot(
        slot_nodes(2, 2, 2),
        [lowest, low, pinned],
        on(lowest, 3, 3) + on(low, 1, 1, 2, 2) + pending(pinned, 1),
    )
    assert _counts(run(snap)) == {"low": 3}


def test_swarm_picks_the_node_so_the_plan_holds_for_every_pick() -> None:
    # node-1 is the only node allowed; low has 2 tasks on every node. Swarm takes the
    # 2nd copies first, from whichever nodes it likes: only all three are sure to free
    # node-1.
    low = svc("low", 6, priority="low", labels=ROOMY)
    pinned = svc("pinned", 1, priority="high", constraints=["node.hostname==node-1"])
    snap = snapshot(
        slot_nodes(2, 2, 2), [pinned, low], on(low, 1, 1, 2, 2, 3, 3) + pending(pinned, 1)
    )
    assert _counts(run(snap)) == {"low": 3}
    # With its copies piled on node-1, one fewer replica surely comes off node-1.
    piled = snapshot(
        slot_nodes(3, 2, 2), [pinned, low], on(low, 1, 1, 1, 2, 2, 3) + pending(pinned, 1)
    )
    assert _counts(run(piled)) == {"low": 5}


def test_unassigned_victim_tasks_go_first_and_count() -> None:
    # A scale-down removes the victim's own pending tasks before any running one.
    low = svc("low", 8, priority="low", labels=ROOMY)
    high = svc("high", 1, priority="high")
    tasks = on(low, 1, 1, 2, 2, 3, 3) + pending(low, 2) + pending(high, 1)
    assert _counts(run(snapshot(slot_nodes(2, 2, 2), [high, low], tasks))) == {"low": 5}


def test_a_surged_victim_keeps_its_base_and_becomes_preempted() -> None:
    # low lost a node's tasks and was surged 6 -> 7; 5 run, 2 have no node yet.
    surge = {
        BASE_LABEL: "6",
        "swarm-placement.replicas-set": "7",
        "swarm-placement.operation": "surge",
        "swarm-placement.operation-since": "990",
    }
    low = svc("low", 7, priority="low", labels={**surge, **ROOMY})
    keep = svc("keep", 1, priority="low", preemptible=False)
    high = svc("high", 1, priority="high")
    tasks = on(low, 1, 1, 2, 2, 3) + on(keep, 3, first_slot=10) + pending(low, 2) + pending(high, 1)
    result = run(snapshot(slot_nodes(2, 2, 2), [high, low, keep], tasks))
    (action,) = result.actions
    record = read_replica_record(action.set_labels)  # type: ignore[union-attr]
    # Its 2 unassigned tasks go first and free nothing: 3 fewer frees one slot.
    assert record is not None and (record.base, record.written) == (6, 4)
    assert record.operation == "preempt"


def test_a_held_victim_stays_held() -> None:
    hold = {
        BASE_LABEL: "6",
        "swarm-placement.replicas-set": "4",
        "swarm-placement.operation": "hold",
    }
    batch = svc("batch", 4, priority="none", labels=hold)
    high = svc("high", 3, priority="high")
    tasks = on(batch, 1, 1, 2, 3) + on(high, 2, 3, first_slot=10) + pending(high, 1)
    result = run(snapshot(slot_nodes(2, 2, 2), [high, batch], tasks))
    (action,) = result.actions
    record = read_replica_record(action.set_labels)  # type: ignore[union-attr]
    assert record is not None and (record.base, record.written, record.operation) == (6, 3, "hold")
    assert any("swarm-placement start batch" in r for r in _reasons(result, "preempt"))


def test_a_surge_asks_only_for_its_base() -> None:
    # high is surged to 4 for a base of 2, and 2 run: its extra pending tasks want no room.
    surge = {
        BASE_LABEL: "2",
        "swarm-placement.replicas-set": "4",
        "swarm-placement.operation": "surge",
        "swarm-placement.operation-since": "990",
    }
    high = svc("high", 4, priority="high", labels=surge)
    low = svc("low", 4, priority="low")
    tasks = on(high, 1, 2) + on(low, 1, 2, 3, 3, first_slot=10) + pending(high, 2)
    result = run(snapshot(slot_nodes(2, 2, 2), [high, low], tasks))
    assert not any(d.rule == "preemption" for d in result.decisions)
    (trim,) = result.actions  # the failover rule's trim, nothing more
    assert isinstance(trim, SetReplicas) and (trim.service_name, trim.replicas) == ("high", 2)


def test_one_pending_service_per_cycle_highest_priority_first() -> None:
    low = svc("low", 6, priority="low")
    high = svc("high", 1, priority="high")
    medium = svc("medium", 1, priority="medium")
    tasks = on(low, 1, 1, 2, 2, 3, 3) + pending(high, 1) + pending(medium, 1)
    result = run(snapshot(slot_nodes(2, 2, 2), [high, low, medium], tasks))
    assert _counts(result) == {"low": 5}
    assert "2 task(s)" not in result.actions[0].set_labels["swarm-placement.operation-detail"]  # type: ignore[union-attr]
    assert "for high" in result.actions[0].set_labels["swarm-placement.operation-detail"]  # type: ignore[union-attr]


def test_a_start_first_update_gets_room_for_its_new_task() -> None:
    # high's 2 tasks run; its update started a replacement beside one of them, and the
    # replacement finds no room: without it the update never ends.
    low = svc("low", 4, priority="low")
    high = replace(svc("high", 2, priority="high"), update_state="updating")
    tasks = on(high, 1, 2) + on(low, 1, 2, 3, 3, first_slot=10) + pending(high, 1, first_slot=1)
    assert _counts(run(snapshot(slot_nodes(2, 2, 2), [high, low], tasks))) == {"low": 3}


def test_a_victim_in_a_rollout_or_never_to_be_stopped_is_left_out() -> None:
    high = svc("high", 1, priority="high")
    for state, labels, why in (
        ("paused", {}, "Swarm is rolling an update (paused)"),
        ("rollback_paused", {}, "Swarm is rolling an update (rollback_paused)"),
        (None, {"placement.max-unavailable": "0"}, "max-unavailable 0"),
    ):
        low = replace(svc("low", 6, priority="low", labels=labels), update_state=state)
        snap = snapshot(
            slot_nodes(2, 2, 2), [high, low], on(low, 1, 1, 2, 2, 3, 3) + pending(high, 1)
        )
        result = run(snap)
        assert result.actions == (), state
        (reason,) = _reasons(result, "cannot-help")
        assert f"left out for now: low ({why}" in reason


def test_a_victim_an_earlier_rule_writes_this_cycle_is_left_out() -> None:
    """Its scale-down would be deferred alone, and the others would free room for nothing."""
    high = svc("high", 2, priority="high")
    low = svc("low", 6, priority="low")
    snap = snapshot(slot_nodes(2, 2, 2), [high, low], on(low, 1, 1, 2, 2, 3, 3) + pending(high, 2))
    earlier = SetReplicas(low.id, low.name, low.version, 6, set_labels={"x": "1"})

    def first(ctx: PlanContext) -> RuleOutput:
        return RuleOutput(
            actions=(earlier,), decisions=(Decision("first", "s", Outcome.WRITE, "r", earlier),)
        )

    result = plan(
        snapshot=snap,
        policy=Policy.default(),
        memory=Memory(),
        now=1000.0,
        rules=(RuleSpec("first", first), rule_named("preemption")),
    )
    assert result.actions == (earlier,)
    (reason,) = _reasons(result, "cannot-help")
    assert "left out for now: low (already changed this cycle)" in reason


def test_a_speculative_surge_never_preempts_nor_is_preempted() -> None:
    """A speculative surge's pending tasks are a guess that a suspected node is gone:
    they never take room by force, and the surge itself is left alone while in flight."""
    record = {
        BASE_LABEL: "2",
        "swarm-placement.replicas-set": "4",
        "swarm-placement.operation": "speculate",
    }
    low = svc("low", 6, priority="low")
    high = svc("high", 4, priority="high")
    high = replace(high, labels={**high.labels, **record})
    snap = snapshot(slot_nodes(2, 2, 2), [high, low], on(low, 1, 1, 2, 2, 3, 3) + pending(high, 2))
    assert run(snap).actions == ()
    # The other way round: a low service mid-surge is no victim while its surge runs.
    surged = {**record, BASE_LABEL: "4", "swarm-placement.replicas-set": "6"}
    spec = replace(low, labels={**low.labels, **surged})
    plain = svc("high", 2, priority="high")
    snap = snapshot(
        slot_nodes(2, 2, 2), [plain, spec], on(spec, 1, 1, 2, 2, 3, 3) + pending(plain, 2)
    )
    result = plan(
        snapshot=snap,
        policy=Policy.default(),
        memory=Memory(),
        now=1000.0,
        rules=rules_named("preemption"),
    )
    assert result.actions == ()
    assert any("speculative surge is in flight" in d.reason for d in result.decisions)
