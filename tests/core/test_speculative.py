"""Speculative failover: surge for a suspected node, trim on a false alarm, hand over to
failover on confirmation, and never a second surge or a surge without room."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetReplicas
from controller.core.decisions import Code
from controller.core.kernel.drop_order import scale_down_order
from controller.core.kernel.swarm_grace import DEFAULT_HEARTBEAT_SECONDS, SAYS_ALIVE_PERIODS
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, NodeState, Service, Task, TaskState
from controller.core.outside_inputs import LivenessSignal
from controller.core.plan import plan
from controller.core.replicas import REPLICA_RECORD_LABELS, read_replica_record
from controller.core.rules import rules_named
from controller.core.rules.failover.speculation_memory import SPECULATION_MEMORY, SpeculationMemory
from controller.core.rules.failover.speculative import (
    FALSE_ALARM_HOLD_SECONDS,
    FLAP_FALSE_ALARMS,
    LIVENESS_POLL_SECONDS,
    drops_only_surged,
    speculated_nodes,
)
from controller.policy import Budgets, Policy

from .builders import MANAGED, node, running, service, snapshot

SWARM_SAYS_ALIVE_SECONDS = SAYS_ALIVE_PERIODS * DEFAULT_HEARTBEAT_SECONDS  # heartbeat unseen

RULES = rules_named("failover", "speculative")
SPECULATIVE = {**MANAGED, "placement.failover-mode": "speculative"}


def run(snap: ClusterSnapshot, memory: Memory, now: float):  # type: ignore[no-untyped-def]
    return plan(snapshot=snap, policy=Policy.default(), memory=memory, now=now, rules=RULES)


def lost(n: int) -> tuple[LivenessSignal, ...]:
    return (
        LivenessSignal(f"n{n}", "gossip", False, 100.0, "left the gossip peers"),
        LivenessSignal(f"n{n}", "probe", False, 99.5, "refused"),
    )


def cluster(
    services: list[Service],
    tasks: list[Task],
    *,
    suspect: int | None = None,
    down: int | None = None,
    count: int = 4,
) -> ClusterSnapshot:
    nodes = [
        node(i, manager=i == 1, state=NodeState.DOWN if i == down else NodeState.READY)
        for i in range(1, count + 1)
    ]
    snap = snapshot(nodes, services, tasks)
    return replace(snap, liveness=lost(suspect) if suspect else ())


def web_on_123(labels: dict[str, str] = SPECULATIVE) -> tuple[Service, list[Task]]:
    web = service("web", replicas=3, labels=labels)
    return web, [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]


def applied(svc: Service, action: SetReplicas) -> Service:
    labels = {k: v for k, v in svc.labels.items() if k not in action.remove_labels}
    return replace(
        svc,
        replicas=action.replicas,
        labels={**labels, **action.set_labels},
        version=svc.version + 1,
    )


def test_a_suspected_node_s_tasks_are_surged_elsewhere_and_nothing_is_stopped() -> None:
    web, tasks = web_on_123()
    result = run(cluster([web], tasks, suspect=3), Memory(), now=102.0)
    (action,) = result.actions
    assert isinstance(action, SetReplicas) and action.replicas == 4
    assert action.evicts_from == ()
    record = read_replica_record(action.set_labels)
    assert record is not None
    assert (record.base, record.written, record.operation) == (3, 4, "speculate")
    assert speculated_nodes(record) == ("n3",)
    (note,) = [d for d in result.decisions if d.rule == "speculative"]
    assert note.outcome == "speculate" and "gossip+probe" in note.reason


def test_a_confirmed_service_waits_for_swarm() -> None:
    web, tasks = web_on_123({**MANAGED, "placement.failover-mode": "confirmed"})
    result = run(cluster([web], tasks, suspect=3), Memory(), now=102.0)
    assert result.actions == ()
    (note,) = [d for d in result.decisions if d.rule == "speculative"]
    assert note.outcome == "wait" and "failover-mode confirmed" in note.reason


def test_by_default_a_replicated_service_is_speculative() -> None:
    web, tasks = web_on_123(MANAGED)  # failover-mode auto
    result = run(cluster([web], tasks, suspect=3), Memory(), now=102.0)
    (action,) = result.actions
    assert isinstance(action, SetReplicas) and action.replicas == 4


def test_by_default_one_per_node_on_purpose_waits_for_swarm() -> None:
    web, tasks = web_on_123(MANAGED)
    web = replace(web, max_replicas_per_node=1)
    result = run(cluster([web], tasks, suspect=3, count=5), Memory(), now=102.0)
    assert result.actions == ()
    (note,) = [d for d in result.decisions if d.rule == "speculative"]
    assert note.outcome == "wait" and "max-replicas-per-node 1" in note.reason


def test_no_surge_whose_false_alarm_trim_could_stop_an_original() -> None:
    # Two originals on node-1: after a surge onto node-2, Swarm's scale-down back to 3
    # would drop slot 2 (the second copy on node-1), an original, not the surged slot 4.
    web = service("web", replicas=3, labels=SPECULATIVE)
    tasks = [running(web, 1, 1), running(web, 1, 2), running(web, 3, 3)]
    result = run(cluster([web], tasks, suspect=3), Memory(), now=102.0)
    assert result.actions == ()
    (note,) = [d for d in result.decisions if d.rule == "speculative"]
    assert note.outcome == "wait" and "could stop a running original" in note.reason


def test_every_surge_made_is_one_whose_false_alarm_trim_drops_only_surged_tasks() -> None:
    # Whatever the layout of 1 to 5 originals on 5 nodes (one suspected), a surge is
    # made only where going back drops exactly the surged tasks.
    import itertools  # noqa: PLC0415

    for replicas in range(1, 6):
        for layout in itertools.product(range(1, 6), repeat=replicas):
            if 5 not in layout:
                continue
            web = service("web", replicas=replicas, labels=SPECULATIVE)
            tasks = [running(web, n, slot) for slot, n in enumerate(layout, start=1)]
            result = run(cluster([web], tasks, suspect=5, count=5), Memory(), now=102.0)
            for action in result.actions:
                assert isinstance(action, SetReplicas)
                surged = action.replicas - replicas
                free = [n for n in range(1, 5) if n not in layout][:surged]
                after = [
                    *tasks,
                    *(running(web, n, replicas + i) for i, n in enumerate(free, start=1)),
                ]
                dropped = scale_down_order(after)[replicas:]
                assert all(t.slot > replicas for t in dropped), (layout, dropped)


def test_no_free_node_no_surge() -> None:
    # Three nodes, each with a task: a surged task could only stack or land back on node-3.
    web, tasks = web_on_123()
    result = run(cluster([web], tasks, suspect=3, count=3), Memory(), now=102.0)
    assert result.actions == ()
    (note,) = [d for d in result.decisions if d.rule == "speculative"]
    assert note.outcome == "wait" and "free node" in note.reason


def test_a_confirmed_failover_elsewhere_comes_first() -> None:
    web, tasks = web_on_123()
    db = service("db", replicas=1, labels=MANAGED)
    memory = Memory(lost={db.id: (1, 90.0)})
    result = run(cluster([web, db], tasks, suspect=3, count=5), memory, now=102.0)
    assert [a for a in result.actions if a.service_name == "web"] == []
    notes = [d for d in result.decisions if d.rule == "speculative"]
    assert any("confirmed failover comes first" in d.reason for d in notes)


def speculated(count: int = 4) -> tuple[Service, list[Task]]:
    web, tasks = web_on_123()
    (action,) = run(cluster([web], tasks, suspect=3, count=count), Memory(), now=102.0).actions
    assert isinstance(action, SetReplicas)
    web4 = applied(web, action)
    return web4, [*(replace(t, service_id=web4.id) for t in tasks), running(web4, 4, 4)]


def test_the_surge_stands_while_the_node_is_suspected() -> None:
    web4, tasks = speculated()
    result = run(cluster([web4], tasks, suspect=3), Memory(), now=104.0)
    assert result.actions == ()
    assert any(d.outcome == "wait" and "still suspected" in d.reason for d in result.decisions)


def test_a_false_alarm_trims_back_and_swarm_drops_exactly_the_surged_task() -> None:
    web4, tasks = speculated()
    back = with_signals(cluster([web4], tasks), *answers(3, since=103.0))
    result = run(back, watching(), now=106.0)
    (trim,) = result.actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3
    assert set(trim.remove_labels) == set(REPLICA_RECORD_LABELS)
    # One task on each of four nodes: swarmkit breaks the tie by the highest slot, the
    # surged one, so no original can be stopped and no budget is spent.
    assert trim.evicts_from == ()
    (note,) = [d for d in result.decisions if d.rule == "speculative"]
    assert note.outcome == "trim" and "exactly the surged" in note.reason
    # Surged at 102 by one replica, trimmed at 106.
    assert "false alarm cost 4 replica-seconds" in note.reason
    assert note.code is Code.FALSE_ALARM and note.extra_replica_seconds == 4.0  # the metric's


def test_a_false_alarm_trim_that_may_drop_an_original_names_it_for_the_budgets() -> None:
    # The surge was made one per node, then two originals came to share node-1 (Swarm
    # re-placed one meanwhile): its second copy goes before the surged task.
    web, tasks = web_on_123()
    (action,) = run(cluster([web], tasks, suspect=3, count=4), Memory(), now=102.0).actions
    assert isinstance(action, SetReplicas) and action.replicas == 4
    web4 = applied(web, action)
    tasks = [running(web4, 1, 1), running(web4, 1, 2), running(web4, 3, 3), running(web4, 4, 4)]
    back = with_signals(cluster([web4], tasks), *answers(3, since=103.0))
    result = run(back, watching(), now=106.0)
    (trim,) = result.actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3
    assert "n1" in trim.evicts_from
    assert any("may drop a running original" in d.reason for d in result.decisions)


def test_swarm_scale_down_order_running_first_then_copies_per_node_then_slots() -> None:
    web = service("web", replicas=5)
    starting = replace(running(web, 2, 5), state=TaskState.STARTING)
    unassigned = replace(running(web, 1, 6), node_id="", state=TaskState.PENDING)
    tasks = [running(web, 1, 1), running(web, 1, 2), running(web, 2, 3), starting, unassigned]
    order = [t.slot for t in scale_down_order(tasks)]
    # index 1: slots 1, 3; index 2: slot 2 (running) then 5 (not running); unassigned last.
    assert order == [1, 3, 2, 5, 6]
    assert drops_only_surged([*tasks[:3], running(web, 3, 4)], base=3, surged=1) is False
    spread = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3), running(web, 4, 4)]
    assert drops_only_surged(spread, base=3, surged=1) is True


def test_a_false_alarm_before_the_surged_task_runs_stops_nothing() -> None:
    web4, tasks = speculated()
    starting = [*tasks[:3], replace(tasks[3], state=TaskState.STARTING)]
    back = with_signals(cluster([web4], starting), *answers(3, since=103.0))
    (trim,) = run(back, watching(), now=106.0).actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3 and trim.evicts_from == ()


def test_confirmation_hands_over_to_failover_which_never_surges_again() -> None:
    web4, tasks = speculated()
    first = run(cluster([web4], tasks, suspect=3), Memory(), now=104.0)
    # Swarm marks node-3 down while still listing its task: wait, and no second surge.
    held = run(cluster([web4], tasks, down=3), first.memory, now=113.0)
    assert held.actions == ()
    assert any("hand-over to failover waits" in d.reason for d in held.decisions)
    # Swarm has given the task up (its replacement waits out the restart delay).
    gone = [t for t in tasks if t.node_id != "n3"]
    handed = run(cluster([web4], gone, down=3), held.memory, now=113.5)
    (handover,) = handed.actions
    assert isinstance(handover, SetReplicas) and handover.replicas == 4
    record = read_replica_record(handover.set_labels)
    assert record is not None and (record.base, record.operation) == (3, "surge")
    # Failover's trim: three running for three wanted, back to 3 at once.
    web_surge = applied(web4, handover)
    gone = [replace(t, service_id=web_surge.id) for t in gone]
    (trim,) = run(cluster([web_surge], gone, down=3), handed.memory, now=114.0).actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3 and trim.evicts_from == ()


def test_a_health_panic_holds_the_surge_as_it_is() -> None:
    web4, tasks = speculated(count=4)
    storm = replace(
        cluster([web4], tasks),
        liveness=(*lost(2), *lost(3), *lost(4)),
    )
    result = run(storm, Memory(), now=106.0)
    assert result.actions == ()
    assert any("health panic" in d.reason for d in result.decisions if d.rule == "speculative")


# Hysteresis: a false alarm is declared on evidence that the node lives, held for a while;
# a restarted controller waits for its signals; a flapping node stops being speculated on.


def answers(n: int, since: float) -> tuple[LivenessSignal, ...]:
    """The node's probe and other nodes' agents reach it, since `since`."""
    return (
        LivenessSignal(f"n{n}", "probe", True, since, "accepts"),
        LivenessSignal(f"n{n}", "indirect", True, since, "reached by node-1"),
    )


def watching(since: float = 0.0) -> Memory:
    """The memory of a controller that has gathered liveness signals since `since`."""
    return Memory().with_slice(SPECULATION_MEMORY, SpeculationMemory(watching_since=since))


def with_signals(snap: ClusterSnapshot, *signals: LivenessSignal) -> ClusterSnapshot:
    return replace(snap, liveness=signals)


def by_agents(n: int) -> tuple[LivenessSignal, ...]:
    """Suspected by its probe and other nodes' agents; the gossip still lists it."""
    return (
        LivenessSignal(f"n{n}", "gossip", True, 10.0, "in the ingress gossip peers"),
        LivenessSignal(f"n{n}", "probe", False, 100.0, "refused"),
        LivenessSignal(f"n{n}", "indirect", False, 100.0, "refused from node-1"),
    )


def speculated_by_agents() -> tuple[Service, list[Task], Memory]:
    web, tasks = web_on_123()
    result = run(with_signals(cluster([web], tasks), *by_agents(3)), watching(), now=102.0)
    (action,) = result.actions
    assert isinstance(action, SetReplicas)
    web4 = applied(web, action)
    return (
        web4,
        [*(replace(t, service_id=web4.id) for t in tasks), running(web4, 4, 4)],
        result.memory,
    )


def test_one_poll_without_an_agent_s_answer_is_no_false_alarm() -> None:
    web4, tasks, memory = speculated_by_agents()
    # No agent answered this poll: the indirect word is missing, the probe still fails and
    # the gossip (slow to drop a peer) still lists the node. Nothing says the node lives.
    gossip, probe, _ = by_agents(3)
    result = run(with_signals(cluster([web4], tasks), gossip, probe), memory, now=103.0)
    assert result.actions == ()
    (note,) = [d for d in result.decisions if d.rule == "speculative"]
    assert note.outcome == "wait"


def test_a_false_alarm_needs_the_node_to_answer_for_the_hold_time() -> None:
    web4, tasks, memory = speculated_by_agents()
    back = with_signals(cluster([web4], tasks), *answers(3, since=104.0))
    early = run(back, memory, now=104.0 + FALSE_ALARM_HOLD_SECONDS / 2)
    assert early.actions == ()
    assert any(
        d.outcome == "wait" and "answers" in d.reason
        for d in early.decisions
        if d.rule == "speculative"
    )
    later = run(back, early.memory, now=104.0 + FALSE_ALARM_HOLD_SECONDS)
    (trim,) = later.actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3


def test_the_hold_counts_from_the_last_suspicion_not_from_an_old_answer() -> None:
    # The probe reached the node all along; the gossip and the agents called it gone.
    web, tasks = web_on_123()
    signals = (
        LivenessSignal("n3", "probe", True, 10.0, "accepts"),
        LivenessSignal("n3", "gossip", False, 100.0, "left the gossip peers"),
        LivenessSignal("n3", "indirect", False, 100.0, "refused from node-1"),
    )
    first = run(with_signals(cluster([web], tasks), *signals), watching(), now=102.0)
    (action,) = first.actions
    assert isinstance(action, SetReplicas)
    web4 = applied(web, action)
    tasks = [*(replace(t, service_id=web4.id) for t in tasks), running(web4, 4, 4)]
    stands = run(with_signals(cluster([web4], tasks), *signals), first.memory, now=103.0)
    assert stands.actions == ()
    # One poll later the agents' word is missing: no longer suspected, and the probe's
    # answer is old. The hold starts at the last suspicion.
    lapsed = with_signals(cluster([web4], tasks), *signals[:2])
    assert run(lapsed, stands.memory, now=103.5).actions == ()
    (trim,) = run(lapsed, stands.memory, now=103.0 + FALSE_ALARM_HOLD_SECONDS).actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3


def test_gossip_listing_the_node_again_is_evidence_it_lives_where_nothing_else_can_say() -> None:
    # No probe word at all (this controller reaches no node's address): the gossip is the
    # only source, and its listing the node again says it lives.
    web4, tasks, memory = speculated_by_agents()
    relisted = (LivenessSignal("n3", "gossip", True, 104.0, "in the ingress gossip peers"),)
    snap = with_signals(cluster([web4], tasks), *relisted)
    (trim,) = run(snap, memory, now=104.0 + FALSE_ALARM_HOLD_SECONDS).actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3


def test_gossip_listing_the_node_again_is_no_evidence_while_its_probe_fails() -> None:
    # Seen on a real swarm: a killed dockerd's node came back into the ingress gossip
    # peers 8 s after the kill (another node's stale view of the network, synced back),
    # while its gossip port refused every connect. The surge stands until Swarm decides.
    web4, tasks, memory = speculated_by_agents()
    relisted = (
        LivenessSignal("n3", "gossip", True, 104.0, "in the ingress gossip peers"),
        LivenessSignal("n3", "probe", False, 100.0, "refused or timed out"),
    )
    snap = with_signals(cluster([web4], tasks), *relisted)
    result = run(snap, memory, now=104.0 + 10 * FALSE_ALARM_HOLD_SECONDS)
    assert result.actions == ()
    (note,) = [d for d in result.decisions if d.rule == "speculative"]
    assert note.outcome == "wait", note.reason


def test_no_trim_until_suspect_after_and_a_poll_have_passed_since_the_start() -> None:
    # A controller restarted while a speculative surge stood: its first cycles may have
    # no liveness signal at all, or a first poll's.
    web4, tasks = speculated()
    bare = cluster([web4], tasks)
    first = run(bare, Memory(), now=110.0)
    assert first.actions == ()
    alive = with_signals(bare, *answers(3, since=50.0))  # even an answer that looks old
    polled = run(alive, first.memory, now=110.5)
    assert polled.actions == ()
    warm = polled.memory
    assert run(alive, warm, now=110.5 + 1.0 + LIVENESS_POLL_SECONDS - 0.1).actions == ()
    (trim,) = run(alive, warm, now=110.5 + 1.0 + LIVENESS_POLL_SECONDS).actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3


def test_a_lease_takeover_restarts_the_wait() -> None:
    web4, tasks = speculated()
    alive = with_signals(cluster([web4], tasks), *answers(3, since=50.0))
    standby = run(alive, Memory(), now=110.0).memory
    standby = run(alive, standby, now=114.0).memory  # warm: it would trim now
    took_over = standby.taking_over()
    assert run(alive, took_over, now=114.5).actions == ()
    (trim,) = run(alive, run(alive, took_over, now=114.5).memory, now=116.0).actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3


def test_a_flapping_node_is_treated_as_confirmed_after_a_few_false_alarms() -> None:
    web, tasks = web_on_123()
    memory, now, surges = watching(), 102.0, []
    for _ in range(FLAP_FALSE_ALARMS + 3):
        lost_at = with_signals(cluster([web], tasks), *lost(3))
        lost_at = replace(
            lost_at,
            liveness=tuple(replace(s, since=now - 2.0) for s in lost_at.liveness),
        )
        surged = run(lost_at, memory, now=now)
        surges.append(len(surged.actions))
        if not surged.actions:
            memory = surged.memory
            now += 5.0
            continue
        (action,) = surged.actions
        assert isinstance(action, SetReplicas)
        web4 = applied(web, action)
        more = [*(replace(t, service_id=web4.id) for t in tasks), running(web4, 4, 4)]
        back = with_signals(cluster([web4], more), *answers(3, since=now + 1.0))
        trimmed = run(back, surged.memory, now=now + 1.0 + FALSE_ALARM_HOLD_SECONDS)
        (trim,) = trimmed.actions
        assert isinstance(trim, SetReplicas) and trim.replicas == 3
        memory, now = trimmed.memory, now + 5.0
    assert surges == [1] * FLAP_FALSE_ALARMS + [0, 0, 0]
    flapping = run(with_signals(cluster([web], tasks), *lost(3)), memory, now=now)
    (note,) = [d for d in flapping.decisions if d.rule == "speculative"]
    assert note.outcome == "wait" and "false alarm" in note.reason


def test_a_surge_for_a_node_that_raised_a_false_alarm_is_charged_to_the_budget() -> None:
    web, tasks = web_on_123()
    first = run(cluster([web], tasks, suspect=3), watching(), now=102.0)
    (action,) = first.actions
    assert isinstance(action, SetReplicas) and action.evicts_from == ()  # first: free
    web4 = applied(web, action)
    more = [*(replace(t, service_id=web4.id) for t in tasks), running(web4, 4, 4)]
    back = with_signals(cluster([web4], more), *answers(3, since=103.0))
    trimmed = run(back, first.memory, now=103.0 + FALSE_ALARM_HOLD_SECONDS)
    (trim,) = trimmed.actions
    assert isinstance(trim, SetReplicas)
    web3 = replace(applied(web4, trim), id=web.id)
    again = cluster([web3], tasks, suspect=3)
    again = replace(again, liveness=tuple(replace(s, since=108.0) for s in again.liveness))
    second = run(again, trimmed.memory, now=110.0)
    (surge,) = second.actions
    assert isinstance(surge, SetReplicas) and surge.evicts_from == ("n3",)
    # With no disruptive write left in the cycle's budget, it waits.
    spent = replace(
        Policy.default(),
        controller=replace(Policy.default().controller, budgets=Budgets(actions_per_cycle=0)),
    )
    held = plan(snapshot=again, policy=spent, memory=trimmed.memory, now=110.0, rules=RULES)
    assert held.actions == ()
    (note,) = [d for d in held.decisions if d.rule == "speculative"]
    assert note.outcome == "wait" and "budget" in note.reason


def test_the_handover_keeps_the_surge_s_start_and_fails_over_a_loss_elsewhere() -> None:
    # node-3 suspected and surged for at 102; node-2 dies and Swarm confirms it at 105
    # while node-3 is still only suspected; node-3 is confirmed at 113.
    web, tasks = web_on_123()
    (action,) = run(cluster([web], tasks, suspect=3, count=5), watching(), now=102.0).actions
    assert isinstance(action, SetReplicas)
    web4 = applied(web, action)
    tasks = [*(replace(t, service_id=web4.id) for t in tasks), running(web4, 4, 4)]
    calm = run(cluster([web4], tasks, suspect=3, count=5), watching(), now=103.0)
    two_down = [
        node(i, manager=i == 1, state=NodeState.DOWN if i == 2 else NodeState.READY)
        for i in range(1, 6)
    ]
    n2_down = replace(snapshot(two_down, [web4], tasks), liveness=lost(3))
    stands = run(n2_down, calm.memory, now=105.0)
    # The loss elsewhere is failed over at once, within the speculative record (failover
    # leaves that record alone): one more replica, the record's start kept.
    (more,) = [a for a in stands.actions if isinstance(a, SetReplicas)]
    assert more.replicas == 5
    record = read_replica_record(more.set_labels)
    assert record is not None and record.operation == "speculate" and record.since == 102.0
    assert speculated_nodes(record) == ("n3",)
    assert web4.id not in stands.memory.lost  # answered: failover never surges for it again
    web5 = applied(web4, more)
    tasks = [*(replace(t, service_id=web5.id) for t in tasks), running(web5, 5, 5)]
    both = [
        node(i, manager=i == 1, state=NodeState.DOWN if i in (2, 3) else NodeState.READY)
        for i in range(1, 6)
    ]
    gone = [t for t in tasks if t.node_id not in ("n2", "n3")]
    handed = run(snapshot(both, [web5], gone), stands.memory, now=113.0)
    (handover,) = handed.actions
    assert isinstance(handover, SetReplicas)
    record = read_replica_record(handover.set_labels)
    assert record is not None and record.operation == "surge" and record.base == 3
    assert record.since == 102.0  # the surge began with the speculation
    assert handover.replicas == 5  # node-3's replica and node-2's, both running already
    assert web5.id not in handed.memory.lost  # both losses answered: no second surge


def test_the_handover_fails_over_a_loss_elsewhere_not_answered_yet() -> None:
    # node-2's loss is first seen in the cycle that also confirms node-3: the hand-over
    # surges for it in the same write.
    web, tasks = web_on_123()
    (action,) = run(cluster([web], tasks, suspect=3, count=5), watching(), now=102.0).actions
    assert isinstance(action, SetReplicas)
    web4 = applied(web, action)
    tasks = [*(replace(t, service_id=web4.id) for t in tasks), running(web4, 4, 4)]
    calm = run(cluster([web4], tasks, suspect=3, count=5), watching(), now=103.0)
    both = [
        node(i, manager=i == 1, state=NodeState.DOWN if i in (2, 3) else NodeState.READY)
        for i in range(1, 6)
    ]
    gone = [t for t in tasks if t.node_id not in ("n2", "n3")]
    handed = run(snapshot(both, [web4], gone), calm.memory, now=113.0)
    (handover,) = handed.actions
    assert isinstance(handover, SetReplicas) and handover.replicas == 5
    record = read_replica_record(handover.set_labels)
    assert record is not None and record.operation == "surge" and record.since == 102.0
    assert web4.id not in handed.memory.lost


def test_swarm_calling_the_node_ready_long_after_the_surge_is_evidence_enough() -> None:
    # No liveness signal at all (liveness turned off after a restart), or only a failing
    # probe (this manager's route): Swarm's own heartbeat still says ready long after any
    # grace, so the surge is a false alarm after all.
    web4, tasks = speculated()
    bare = cluster([web4], tasks)
    first = run(bare, Memory(), now=110.0)
    assert first.actions == ()
    (trim,) = run(bare, first.memory, now=102.0 + SWARM_SAYS_ALIVE_SECONDS).actions
    assert isinstance(trim, SetReplicas) and trim.replicas == 3
    # Unknown (a new Raft leader has not heard from it) is not ready: the surge stands.
    unknown = replace(
        bare,
        nodes=tuple(replace(n, state=NodeState.UNKNOWN) if n.id == "n3" else n for n in bare.nodes),
    )
    assert run(unknown, first.memory, now=102.0 + SWARM_SAYS_ALIVE_SECONDS).actions == ()


def _after_an_election(free_signals: tuple[LivenessSignal, ...]) -> ClusterSnapshot:
    """A new Raft leader has heard from no node yet: all `unknown`; web runs on node-1..3,
    node-3 is gone (its signals agree), node-4 holds nothing."""
    web, tasks = web_on_123()
    nodes = [node(i, manager=i == 1, state=NodeState.UNKNOWN) for i in range(1, 5)]
    alive = tuple(LivenessSignal(f"n{i}", "probe", True, 90.0) for i in (1, 2))
    return replace(snapshot(nodes, [web], tasks), liveness=(*lost(3), *alive, *free_signals))


def test_after_an_election_the_surge_goes_out_before_the_free_node_reports() -> None:
    """Measured on a real swarm (bench/failover.py --fault leader): the new leader
    placed nothing on the free worker for up to 12 s after it took its first write, and
    a surge written at that first write ran 0.9 s after it (median of 5), on the first
    node to report. Waiting for the free node to be ready threw those seconds away."""
    alive = (LivenessSignal("n4", "probe", True, 90.0), LivenessSignal("n4", "agent", True, 90.0))
    result = run(_after_an_election(alive), Memory(), now=112.0)
    (action,) = result.actions
    assert isinstance(action, SetReplicas) and action.replicas == 4
    # Swarm may place it beside a replica on a node that reports first: charged.
    assert action.evicts_from == ("n1", "n2")
    (said,) = [d for d in result.decisions if d.subject == "service web" and d.action]
    assert "node-4" in said.reason and "has not reported" in said.reason
    assert "node-1, node-2" in said.reason


def test_after_an_election_a_free_node_not_known_to_live_is_no_room() -> None:
    for signals in ((), (LivenessSignal("n4", "probe", False, 101.0, "refused"),)):
        result = run(_after_an_election(signals), Memory(), now=112.0)
        assert result.actions == (), result.decisions
        assert any("0 free node(s)" in d.reason for d in result.decisions)
