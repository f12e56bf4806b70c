"""Count rebalancing: surge-and-trim after a node returns, modes, hysteresis, budgets."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetReplicas
from controller.core.counts import active_counts
from controller.core.kernel.ledger import disrupted_nodes, moved_from
from controller.core.memory import Memory
from controller.core.model import NodeState
from controller.core.replicas import REPLICA_RECORD_LABELS, read_replica_record
from controller.core.rules.rebalance.rebalance_memory import REBALANCE_MEMORY
from controller.policy import Budgets, RebalanceMode

from .builders import running, snapshot
from .rebalance_builders import (
    NOW,
    layout,
    memory,
    nodes,
    outcomes,
    policy,
    reasons,
    rebalancing,
    run,
)

WEB = rebalancing("web", 6)
SKEWED = layout(WEB, [3, 3, 0])
COUNT_KEY = f"count:{WEB.id}"


def _surge(result) -> SetReplicas:  # type: ignore[no-untyped-def]
    (action,) = result.actions
    assert isinstance(action, SetReplicas)
    return action


def test_a_returned_node_gets_exactly_the_missing_tasks_then_the_surge_is_trimmed() -> None:
    ns = nodes()
    mem = memory(ns, returned={"n3": 20.0}, persisted=[COUNT_KEY])
    surged = run(snapshot(ns, [WEB], SKEWED), mem)
    action = _surge(surged)
    record = read_replica_record(action.set_labels)
    assert action.replicas == 8 and action.evicts_from == ("n1", "n2")
    assert record is not None and (record.base, record.written, record.operation) == (
        6,
        8,
        "rebalance",
    )
    assert outcomes(surged) == ["rebalance"]

    # Swarm placed both new tasks on the empty node; once they run the failover rule trims.
    web8 = replace(WEB, replicas=8, version=101, labels={**WEB.labels, **action.set_labels})
    eight = [*SKEWED, running(web8, 3, 7), running(web8, 3, 8)]
    trimmed = run(snapshot(ns, [web8], eight), surged.memory, now=NOW + 3)
    (trim,) = trimmed.actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 6
    assert set(trim.remove_labels) == set(REPLICA_RECORD_LABELS)
    assert "rebalance" not in outcomes(trimmed)

    # Swarm removed one task from each of the busiest nodes: balanced, nothing more to do.
    web6 = replace(WEB, version=102)
    balanced = [t for t in eight if t.slot not in (3, 6)]
    assert active_counts(snapshot(ns, [web6], balanced), WEB.id) == {"n1": 2, "n2": 2, "n3": 2}
    after = run(snapshot(ns, [web6], balanced), trimmed.memory, now=NOW + 10)
    assert after.actions == ()
    assert outcomes(after) == []


def test_nothing_moves_before_the_returned_node_has_stayed_ready_for_the_settle_time() -> None:
    ns = nodes()
    mem = memory(ns, returned={"n3": 5.0}, persisted=[COUNT_KEY])
    result = run(snapshot(ns, [WEB], SKEWED), mem)
    assert result.actions == ()
    assert "node-3 joined or returned recently and must stay ready 15 s" in reasons(result)


def test_the_imbalance_must_persist_for_the_levels_cycles() -> None:
    ns = nodes()
    mem = memory(ns, returned={"n3": 30.0})
    snap = snapshot(ns, [WEB], SKEWED)
    for cycle in range(2):  # level 3: three consecutive cycles
        result = run(snap, mem, now=NOW + cycle)
        assert result.actions == (), cycle
        assert "waiting for it to persist 3 cycles" in reasons(result)
        mem = result.memory
    assert _surge(run(snap, mem, now=NOW + 2)).replicas == 8


def test_a_balanced_cycle_resets_the_streak() -> None:
    ns = nodes()
    mem = memory(ns, returned={"n3": 30.0})
    skewed, balanced = snapshot(ns, [WEB], SKEWED), snapshot(ns, [WEB], layout(WEB, [2, 2, 2]))
    for now, snap in enumerate([skewed, skewed, balanced, skewed, skewed]):
        result = run(snap, mem, now=NOW + now)
        assert result.actions == ()
        mem = result.memory
    assert _surge(run(skewed, mem, now=NOW + 5)).replicas == 8


def test_mode_off_moves_nothing_and_says_so() -> None:
    ns = nodes()
    mem = memory(ns, returned={"n3": 20.0}, persisted=[COUNT_KEY])
    result = run(snapshot(ns, [WEB], SKEWED), mem, pol=policy(mode=RebalanceMode.OFF))
    assert result.actions == ()
    assert "rebalance-mode is off" in reasons(result)


def test_on_join_leaves_an_old_skew_alone_and_a_periodic_round_fixes_it() -> None:
    ns = nodes()
    snap = snapshot(ns, [WEB], SKEWED)
    on_join = run(snap, memory(ns, persisted=[COUNT_KEY]))
    assert on_join.actions == ()
    assert "no node joined or returned recently" in reasons(on_join)

    periodic = policy(mode=RebalanceMode.PERIODIC, interval=60.0)
    first = run(snap, memory(ns, persisted=[COUNT_KEY]), pol=periodic)
    assert first.actions == (), "the first cycle only starts the round clock"
    assert first.memory.slice(REBALANCE_MEMORY).last_round == NOW
    early = run(snap, first.memory, now=NOW + 30, pol=periodic)
    assert early.actions == ()
    assert "waiting for the next periodic round" in reasons(early)
    due = run(snap, early.memory, now=NOW + 61, pol=periodic)
    assert _surge(due).replicas == 8
    assert due.memory.slice(REBALANCE_MEMORY).last_round == NOW + 61


def test_a_service_moved_within_the_cooldown_waits() -> None:
    ns = nodes()
    mem = memory(ns, returned={"n3": 20.0}, persisted=[COUNT_KEY], last_move={WEB.id: NOW - 100})
    result = run(snapshot(ns, [WEB], SKEWED), mem)
    assert result.actions == ()
    assert "cooldown 300 s" in reasons(result)
    later = replace(mem, last_move={WEB.id: NOW - 301})
    assert _surge(run(snapshot(ns, [WEB], SKEWED), later)).replicas == 8


def test_tasks_never_go_straight_back_to_the_node_they_left() -> None:
    ns = nodes()
    left = {WEB.id: (("n3",), NOW - 45)}  # within twice the 30 s cooldown
    mem = memory(ns, persisted=[COUNT_KEY], left=left, last_round=0.0)
    periodic = policy(mode=RebalanceMode.PERIODIC, cooldown=30.0)
    result = run(snapshot(ns, [WEB], SKEWED), mem, pol=periodic)
    assert result.actions == ()
    assert "would go straight back to node-3" in reasons(result)
    # Once node-3 has gone down and come back since, it is a new return, not a way back.
    back_since = replace(
        mem,
        node_ready_since={**mem.node_ready_since, "n3": NOW - 40},
        node_downs={"n3": (NOW - 42,)},
    )
    assert _surge(run(snapshot(ns, [WEB], SKEWED), back_since, pol=periodic)).replicas == 8


def test_a_flapping_node_waits_longer_and_triggers_at_most_one_rebalance() -> None:
    ns = nodes()
    downs = {"n3": (NOW - 300, NOW - 200, NOW - 100)}
    # Three downs in ten minutes: 15 s doubled twice, so ready 40 s is not enough.
    mem = memory(ns, returned={"n3": 40.0}, persisted=[COUNT_KEY], node_downs=downs)
    waiting = run(snapshot(ns, [WEB], SKEWED), mem)
    assert waiting.actions == ()
    assert "must stay ready 60 s" in reasons(waiting)
    settled = replace(mem, node_ready_since={**mem.node_ready_since, "n3": NOW - 61})
    first = run(snapshot(ns, [WEB], SKEWED), settled)
    assert _surge(first).replicas == 8
    assert first.memory.slice(REBALANCE_MEMORY).join_used["n3"] == (NOW - 61, NOW)
    # It flaps again and comes back: its return triggers nothing more.
    again = replace(
        first.memory,
        node_ready_since={**first.memory.node_ready_since, "n3": NOW + 60},
        node_downs={"n3": (*downs["n3"], NOW + 50)},
    )
    later = run(snapshot(ns, [WEB], SKEWED), again, now=NOW + 400)
    assert later.actions == ()
    assert "node-3 is flapping (2 downs in 10 min) and already caused a rebalance" in reasons(later)


def test_a_node_going_down_is_remembered_for_flap_damping() -> None:
    ns = nodes()
    mem = Memory(node_ready_since={n.id: 0.0 for n in ns}, started=True)
    down = [ns[0], ns[1], replace(ns[2], state=NodeState.DOWN)]
    after = run(snapshot(down, [WEB], layout(WEB, [3, 3, 0])), mem).memory
    assert after.node_downs == {"n3": (NOW,)}
    back = run(snapshot(ns, [WEB], SKEWED), after, now=NOW + 5).memory
    assert back.node_ready_since["n3"] == NOW + 5
    assert back.node_downs == {"n3": (NOW,)}


def test_aggressiveness_one_tolerates_a_skew_of_two_and_three_moves_one_task() -> None:
    ns = nodes()
    snap = snapshot(ns, [WEB], layout(WEB, [3, 2, 1]))
    mem = memory(ns, returned={"n3": 100.0}, persisted=[COUNT_KEY])
    gentle = run(snap, mem, pol=policy(aggressiveness=1))
    assert gentle.actions == () and outcomes(gentle) == []
    action = _surge(run(snap, mem))
    assert action.replicas == 7 and action.evicts_from == ("n1",)


def test_services_the_owners_rule_places_are_left_to_it() -> None:
    ns = nodes()
    spread = rebalancing("db", 6, spread="rack")
    mem = memory(ns, returned={"n3": 20.0}, persisted=[f"count:{spread.id}"])
    result = run(snapshot(ns, [spread], layout(spread, [3, 3, 0])), mem)
    assert result.actions == ()
    assert outcomes(result) == ["skip"]
    assert "owners rule" in reasons(result)


def test_max_unavailable_zero_means_never_moved() -> None:
    ns = nodes()
    pinned = rebalancing("pinned", 6, max_unavailable="0")
    mem = memory(ns, returned={"n3": 20.0}, persisted=[f"count:{pinned.id}"])
    result = run(snapshot(ns, [pinned], layout(pinned, [3, 3, 0])), mem)
    assert result.actions == ()
    assert "max-unavailable is 0" in reasons(result)


def test_rebalance_on_alone_opts_in_and_managed_false_opts_out() -> None:
    ns = nodes()
    opted_out = rebalancing("quiet", 6, managed="false")
    mem = memory(ns, returned={"n3": 20.0}, persisted=[COUNT_KEY, f"count:{opted_out.id}"])
    result = run(snapshot(ns, [WEB, opted_out], [*SKEWED, *layout(opted_out, [3, 3, 0])]), mem)
    assert [a.service_name for a in result.actions] == ["web"]  # type: ignore[union-attr]
    assert result.resolved[WEB.id].settings.managed
    assert not result.resolved[opted_out.id].settings.managed


def test_nodes_the_constraints_exclude_do_not_count() -> None:
    ns = nodes(labels={1: {"zone": "a"}, 2: {"zone": "a"}})
    zoned = rebalancing("zoned", 6, constraints=["node.labels.zone==a"])
    mem = memory(ns, returned={"n3": 20.0}, persisted=[f"count:{zoned.id}"])
    result = run(snapshot(ns, [zoned], layout(zoned, [3, 3, 0])), mem)
    assert result.actions == () and outcomes(result) == []


def test_the_budgets_cap_what_one_cycle_starts() -> None:
    ns = nodes()
    api = rebalancing("api", 6)
    both = snapshot(ns, [api, WEB], [*layout(api, [3, 3, 0]), *SKEWED])
    mem = memory(ns, returned={"n3": 20.0}, persisted=[COUNT_KEY, f"count:{api.id}"])
    assert len(run(both, mem).actions) == 2
    for budgets, text in [
        (Budgets(actions_per_cycle=1), "1 disruptive actions per cycle"),
        (Budgets(actions_per_node=1), "1 disruptive actions per node"),
    ]:
        capped = run(both, mem, pol=policy(budgets=budgets))
        assert [a.service_name for a in capped.actions] == ["api"]  # type: ignore[union-attr]
        assert text in reasons(capped)
    none = run(both, mem, pol=policy(budgets=Budgets(actions_per_service=0)))
    assert none.actions == ()


def test_with_room_to_spare_every_service_moves_in_the_same_cycle() -> None:
    """Each surge is planned with the room the ones before it may take: on a returned
    node with room for all of them, none has to wait for the others to land."""
    ns = nodes(cpus=4)
    services = [rebalancing(name, 4, cpu=0.25) for name in ("api", "db", "web")]
    snap = snapshot(ns, services, [t for s in services for t in layout(s, [2, 2, 0])])
    mem = memory(ns, returned={"n3": 20.0}, persisted=[f"count:{s.id}" for s in services])
    result = run(snap, mem, pol=policy(budgets=Budgets(actions_per_node=3)))
    assert [a.service_name for a in result.actions] == ["api", "db", "web"]  # type: ignore[union-attr]
    assert "moved before it" not in reasons(result)


def test_a_service_that_is_not_at_rest_is_not_moved() -> None:
    ns = nodes()
    mem = memory(ns, returned={"n3": 20.0}, persisted=[COUNT_KEY])
    missing = run(snapshot(ns, [WEB], SKEWED[:5]), mem)
    assert missing.actions == ()
    updating = run(snapshot(ns, [replace(WEB, update_state="updating")], SKEWED), mem)
    assert updating.actions == ()
    assert "rolling an update" in reasons(updating)


def test_the_plan_is_deterministic() -> None:
    ns = nodes()
    api = rebalancing("api", 5)
    snap = snapshot(ns, [api, WEB], [*layout(api, [4, 1, 0]), *SKEWED])
    mem = memory(ns, returned={"n3": 20.0}, persisted=[COUNT_KEY, f"count:{api.id}"])
    first, second = run(snap, mem), run(snap, mem)
    assert first.actions == second.actions and first.decisions == second.decisions
    assert first.memory == second.memory


def test_nothing_moves_while_a_new_raft_leader_has_not_heard_from_every_node() -> None:
    # node-3 returned and settled, node-4 (holding none of web's tasks) has not reported
    # to the new leader yet: a move waits for the whole view, then goes as before.
    ns = nodes(4)
    ns[3] = replace(ns[3], state=NodeState.UNKNOWN)
    mem = memory(ns, returned={"n3": 20.0}, persisted=[COUNT_KEY])
    waiting = run(snapshot(ns, [WEB], SKEWED), mem)
    assert waiting.actions == ()
    assert outcomes(waiting) == ["wait"]
    assert "Swarm calls node-4 unknown" in reasons(waiting)

    ns[3] = replace(ns[3], state=NodeState.READY)
    reported = run(snapshot(ns, [WEB], SKEWED), mem)
    assert _surge(reported).evicts_from == ("n1", "n2")


def test_a_failover_trim_of_spare_copies_starts_no_cooldown() -> None:
    """node-3 is lost: failover surges 6 -> 8 and, once every task runs (4/4 on node-1 and
    node-2), trims back, stopping two spare copies there. That is no move: when node-3
    returns, rebalance moves two tasks onto it at once, not after a cooldown. Memory is
    kept as the reconciler keeps it after each write."""
    ns = nodes()
    lost = (ns[0], ns[1], replace(ns[2], state=NodeState.DOWN))
    web = replace(WEB, labels={**WEB.labels, "placement.managed": "true"})
    calm = layout(web, [2, 2, 2])
    two_each = [t for t in calm if t.node_id != "n3"]
    mem = run(snapshot(ns, [web], calm), memory(ns), now=NOW - 5).memory
    surge = run(snapshot(lost, [web], two_each), mem, now=NOW)
    (raise_,) = [a for a in surge.actions if isinstance(a, SetReplicas)]
    web8 = replace(web, replicas=8, version=101, labels={**web.labels, **raise_.set_labels})
    four_each = [*two_each, *(running(web8, n, slot) for n, slot in ((1, 7), (1, 8)))]
    four_each += [running(web8, 2, 9), running(web8, 2, 10)]
    trimmed = run(snapshot(lost, [web8], four_each), surge.memory, now=NOW + 10)
    (trim,) = [a for a in trimmed.actions if isinstance(a, SetReplicas)]
    assert trim.replicas == 6 and disrupted_nodes(trim), "the ledger is charged for the stops"
    after_write = trimmed.memory
    if left := moved_from(trim):
        after_write = after_write.note_move(trim.service_id, NOW + 10, left)

    # Swarm stopped one spare copy on each node; node-3 is back and has settled.
    web6 = replace(web, version=102)
    back = [t for t in four_each if t.slot not in (8, 10)]
    ready = replace(after_write, node_ready_since={**after_write.node_ready_since, "n3": NOW + 20})
    later = run(snapshot(ns, [web6], back), ready, now=NOW + 80, pol=policy(aggressiveness=3))
    assert "wait" not in outcomes(later) or "cooldown" not in reasons(later), reasons(later)
