"""Failover's trim and memory where the real Swarm differs from the easy case: a trim made
old by a Raft election or a long restart delay, a false-alarm trim the guards hold for
several cycles, and a failover surge standing through an election."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetReplicas
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, Node, NodeState, Service, Task, TaskState
from controller.core.outside_inputs import LivenessSignal
from controller.core.plan import Plan, plan
from controller.core.replicas import read_replica_record
from controller.core.rules.failover.failover_rule import TRIM_AFTER_SECONDS
from controller.core.rules.failover.speculation_memory import SPECULATION_MEMORY
from controller.core.rules.failover.speculative import (
    FALSE_ALARM_HOLD_SECONDS,
    FLAP_FALSE_ALARMS,
)
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot

U, D = NodeState.UNKNOWN, NodeState.DOWN


def run(snap: ClusterSnapshot, memory: Memory, now: float) -> Plan:
    return plan(snapshot=snap, policy=Policy.default(), memory=memory, now=now)


def four(states: dict[int, NodeState] | None = None) -> list[Node]:
    """node-1..3 managers (node-1 the old Raft leader), node-4 a worker."""
    return [
        node(i, manager=i <= 3, state=(states or {}).get(i, NodeState.READY)) for i in (1, 2, 3, 4)
    ]


def applied(svc: Service, action: SetReplicas) -> Service:
    labels = {k: v for k, v in svc.labels.items() if k not in action.remove_labels}
    return replace(
        svc,
        replicas=action.replicas,
        labels={**labels, **action.set_labels},
        version=svc.version + 1,
    )


def moved(tasks: list[Task], svc: Service) -> list[Task]:
    return [replace(t, service_id=svc.id) for t in tasks]


def delayed(svc: Service, node_n: int, slot: int) -> Task:
    """Swarm's replacement for a lost task, held back by the restart delay: assigned a
    node at once, desired state READY, not running."""
    return Task(
        id=f"t-{svc.name}-{slot}-again",
        service_id=svc.id,
        node_id=f"n{node_n}",
        slot=slot,
        desired_state=TaskState.READY,
        state=TaskState.ASSIGNED,
    )


def replicas_of(result: Plan, name: str) -> list[int]:
    return [
        a.replicas for a in result.actions if isinstance(a, SetReplicas) and a.service_name == name
    ]


def said(result: Plan, name: str, rule: str = "failover") -> str:
    return " | ".join(
        d.reason for d in result.decisions if d.rule == rule and d.subject == f"service {name}"
    )


# Finding 4: the aged trim. A trim past TRIM_AFTER_SECONDS went out even where Swarm's
# scale-down drops a running surged task (a node's second copy) and keeps a delayed
# replacement alone on its node that does not run yet.


def _gone(n: int) -> tuple[LivenessSignal, ...]:
    return (
        LivenessSignal(f"n{n}", "probe", False, 109.0, "refused"),
        LivenessSignal(f"n{n}", "indirect", False, 109.0, "unreachable from node-2"),
    )


def _alive(*ns: int) -> tuple[LivenessSignal, ...]:
    return tuple(
        s
        for n in ns
        for s in (
            LivenessSignal(f"n{n}", "probe", True, 90.0, "accepts"),
            LivenessSignal(f"n{n}", "indirect", True, 90.0, "reached by node-2"),
        )
    )


def test_the_trim_after_an_election_waits_for_the_delayed_replacement_to_run() -> None:
    """The old Raft leader's node (node-1) dies. The speculative surge goes out when the
    new leader takes writes (112), lands beside a replica on node-2, the first node to
    report, and Swarm marks node-1 down only twice its grace after the election (142).
    The hand-over keeps the surge's start, so the record is already 30 s old: the trim
    must still not drop the running surged task while Swarm's delayed replacement for
    node-1's task waits on node-4."""
    web = service("web", replicas=3, labels=MANAGED)
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]
    memory = Memory()
    for now in (100.0, 101.0):
        memory = run(snapshot(four(), [web], tasks), memory, now).memory

    election = replace(
        snapshot(four({i: U for i in (1, 2, 3, 4)}), [web], tasks),
        liveness=(*_gone(1), *_alive(2, 3, 4)),
    )
    surged = run(election, memory, 112.0)
    (surge,) = [a for a in surged.actions if isinstance(a, SetReplicas)]
    assert surge.replicas == 4, said(surged, "web", "speculative")
    web4 = applied(web, surge)
    # Swarm placed the surged task on node-2, the first node to report.
    tasks4 = [*moved(tasks, web4), running(web4, 2, 4)]
    reported = replace(
        snapshot(four({1: U}), [web4], tasks4), liveness=(*_gone(1), *_alive(2, 3, 4))
    )
    memory = run(reported, surged.memory, 115.0).memory

    # 142: node-1 down; its task given up, the replacement assigned to node-4 (no task
    # of web there), waiting out the restart delay.
    after_down = [t for t in tasks4 if t.node_id != "n1"]
    down = replace(
        snapshot(four({1: D}), [web4], after_down),
        liveness=(*_gone(1), *_alive(2, 3, 4)),
        delayed=(delayed(web4, 4, 1),),
    )
    handed = run(down, memory, 142.0)
    (handover,) = [a for a in handed.actions if isinstance(a, SetReplicas)]
    record = read_replica_record(handover.set_labels)
    assert record is not None and record.operation == "surge" and record.since == 112.0
    web_surge = applied(web4, handover)
    now = 142.5
    assert now - record.since >= TRIM_AFTER_SECONDS  # the claim: aged at once
    waiting = replace(down, services=(web_surge,), tasks=tuple(moved(after_down, web_surge)))
    waiting = replace(waiting, delayed=(delayed(web_surge, 4, 1),))
    held = run(waiting, handed.memory, now)
    assert replicas_of(held, "web") == [], said(held, "web")
    assert "waits" in said(held, "web")

    # The replacement runs: now the surged task is spare, and the trim goes.
    ran = replace(
        waiting,
        tasks=(*moved(after_down, web_surge), running(web_surge, 4, 1)),
        delayed=(),
    )
    trimmed = run(ran, held.memory, 147.5)
    assert replicas_of(trimmed, "web") == [3], said(trimmed, "web")


def test_a_restart_delay_past_the_trim_age_does_not_stop_the_surged_task() -> None:
    """A confirmed loss with a restart delay of 60 s: Swarm assigns the replacement to
    the free node-4 at once, the controller's surged task lands beside a replica. At
    30 s the replacement still waits: the trim must not stop the running surged task."""
    web = service("web", replicas=3, labels={**MANAGED, "placement.failover-mode": "confirmed"})
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]
    memory = run(snapshot(four(), [web], tasks), Memory(), 100.0).memory
    left = tasks[:2]
    lost = replace(snapshot(four({3: D}), [web], left), delayed=(delayed(web, 4, 3),))
    surged = run(lost, memory, 101.0)
    (surge,) = [a for a in surged.actions if isinstance(a, SetReplicas)]
    assert surge.replicas == 4
    web4 = applied(web, surge)
    beside = [*moved(left, web4), running(web4, 1, 4)]
    layout = replace(snapshot(four({3: D}), [web4], beside), delayed=(delayed(web4, 4, 3),))
    early = run(layout, surged.memory, 102.0)
    assert replicas_of(early, "web") == [], said(early, "web")
    late = run(layout, early.memory, 101.0 + TRIM_AFTER_SECONDS + 1.0)
    assert replicas_of(late, "web") == [], said(late, "web")
    # 161: the replacement runs; the trim drops the surged task, a spare one.
    ran = replace(layout, tasks=(*beside, running(web4, 4, 3)), delayed=())
    assert replicas_of(run(ran, late.memory, 161.0), "web") == [3]


def _surged_for_node_2(replicas: int) -> tuple[Service, list[Task], list[Task], Memory]:
    """web's tasks alternate on node-1 and node-2; node-2 dies and failover surges. The
    service as surged, its tasks left, the tasks lost, and the memory."""
    web = service("web", replicas=replicas, labels=MANAGED)
    tasks = [running(web, 1 + (i % 2), i) for i in range(1, replicas + 1)]
    memory = run(snapshot(four(), [web], tasks), Memory(), 100.0).memory
    left = [t for t in tasks if t.node_id != "n2"]
    surged = run(snapshot(four({2: D}), [web], left), memory, 101.0)
    (surge,) = [a for a in surged.actions if isinstance(a, SetReplicas)]
    websurge = applied(web, surge)
    gone = [t for t in tasks if t.node_id == "n2"]
    return websurge, moved(left, websurge), moved(gone, websurge), surged.memory


def _unplaced(svc: Service, slots: range) -> list[Task]:
    return [replace(running(svc, 1, s), node_id="", state=TaskState.PENDING) for s in slots]


def test_surged_tasks_that_find_no_room_are_trimmed_once_the_replacements_run() -> None:
    """What the age rule was for: surged tasks with no room stay pending, with no node.
    Swarm drops slots it has not placed before any placed one whatever the number of
    slots (swarmkit sorts them last), so once Swarm's own replacements run the trim
    stops nothing, in a service of more slots than swarmkit sorts predictably too."""
    for replicas in (3, 8):
        web, left, gone, memory = _surged_for_node_2(replicas)
        again = [replace(t, node_id=f"n{3 + (i % 2)}") for i, t in enumerate(gone)]
        pending = _unplaced(web, range(replicas + 1, replicas + len(gone) + 1))
        snap = snapshot(four({2: D}), [web], [*left, *again, *pending])
        result = run(snap, memory, 110.0)
        (trim,) = [a for a in result.actions if isinstance(a, SetReplicas)]
        assert trim.replicas == replicas and trim.evicts_from == (), said(result, "web")


def test_an_old_surge_with_nothing_running_in_its_place_is_trimmed_and_stops_nothing() -> None:
    """No room at all: Swarm's replacements and the surged tasks all pending. After
    TRIM_AFTER_SECONDS the count goes back (only unplaced slots go)."""
    web, left, _, memory = _surged_for_node_2(3)
    pending = _unplaced(web, range(1, (web.replicas or 0) + 1))
    waiting = [t for t in pending if t.slot not in {t.slot for t in left}]
    snap = snapshot(four({2: D}), [web], [*left, *waiting])
    young = run(snap, memory, 110.0)
    assert replicas_of(young, "web") == [], said(young, "web")
    old = run(snap, young.memory, 101.0 + TRIM_AFTER_SECONDS)
    (trim,) = [a for a in old.actions if isinstance(a, SetReplicas)]
    assert trim.replicas == 3 and trim.evicts_from == (), said(old, "web")


# Finding 5: a false-alarm trim the guards hold (an operator's rollout) was counted as a
# new false alarm every cycle.


SPECULATIVE = {**MANAGED, "placement.failover-mode": "speculative"}


def _suspected(n: int, since: float) -> tuple[LivenessSignal, ...]:
    return (
        LivenessSignal(f"n{n}", "gossip", False, since, "left the gossip peers"),
        LivenessSignal(f"n{n}", "probe", False, since, "refused"),
    )


def _answers(n: int, since: float) -> tuple[LivenessSignal, ...]:
    return (
        LivenessSignal(f"n{n}", "probe", True, since, "accepts"),
        LivenessSignal(f"n{n}", "indirect", True, since, "reached by node-1"),
    )


def test_a_held_false_alarm_trim_is_one_false_alarm() -> None:
    web = service("web", replicas=3, labels=SPECULATIVE)
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]
    memory = run(snapshot(four(), [web], tasks), Memory(), 100.0).memory
    suspected = replace(snapshot(four(), [web], tasks), liveness=_suspected(3, 100.0))
    first = run(suspected, memory, 102.0)
    (surge,) = [a for a in first.actions if isinstance(a, SetReplicas)]
    web4 = applied(web, surge)
    tasks4 = [*moved(tasks, web4), running(web4, 4, 4)]
    # node-3 answers again, while an operator rolls out an update of web: the guards
    # hold the trim, cycle after cycle (every 0.5 s).
    rolling = replace(web4, update_state="updating")
    back = replace(snapshot(four(), [rolling], moved(tasks4, rolling)), liveness=_answers(3, 103.0))
    memory = first.memory
    now = 103.0 + FALSE_ALARM_HOLD_SECONDS
    for _ in range(FLAP_FALSE_ALARMS + 1):
        held = run(back, memory, now)
        assert replicas_of(held, "web") == [], "held for the rollout"
        assert "false alarm" in said(held, "web", "speculative")
        memory, now = held.memory, now + 0.5
    assert len(memory.slice(SPECULATION_MEMORY).false_alarms.get("n3", ())) == 1
    assert "n3" not in memory.slice(SPECULATION_MEMORY).confirmed_until
    # The rollout completes: the trim goes out.
    done = replace(back, services=(replace(web4, update_state="completed"),))
    done = replace(done, tasks=tuple(moved(tasks4, done.services[0])))
    ended = run(done, memory, now)
    assert replicas_of(ended, "web") == [3]
    # A minute later node-3 really dies: speculative failover as before (charged to the
    # budget for its one recent false alarm), not a wait for Swarm.
    dies = replace(snapshot(four(), [web], tasks), liveness=_suspected(3, now + 58.0))
    again = run(dies, ended.memory, now + 60.0)
    assert replicas_of(again, "web") == [4], said(again, "web", "speculative")


def test_one_false_alarm_for_two_services_trimmed_for_the_same_suspicion() -> None:
    web = service("web", replicas=3, labels=SPECULATIVE)
    api = service("api", replicas=2, labels=SPECULATIVE)
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]
    tasks += [running(api, 2, 1), running(api, 3, 2)]
    nodes = [node(i, manager=i == 1) for i in range(1, 6)]
    memory = run(snapshot(nodes, [web, api], tasks), Memory(), 100.0).memory
    first = run(
        replace(snapshot(nodes, [web, api], tasks), liveness=_suspected(3, 100.0)), memory, 102.0
    )
    surges = {a.service_name: a for a in first.actions if isinstance(a, SetReplicas)}
    assert set(surges) == {"web", "api"}, first.decisions
    web4, api3 = applied(web, surges["web"]), applied(api, surges["api"])
    later = [
        *moved(tasks[:3], web4),
        running(web4, 4, 4),
        *moved(tasks[3:], api3),
        running(api3, 5, 3),
    ]
    back = replace(snapshot(nodes, [web4, api3], later), liveness=_answers(3, 103.0))
    trimmed = run(back, first.memory, 103.0 + FALSE_ALARM_HOLD_SECONDS)
    assert sorted(a.service_name for a in trimmed.actions if isinstance(a, SetReplicas)) == [
        "api",
        "web",
    ]
    assert len(trimmed.memory.slice(SPECULATION_MEMORY).false_alarms.get("n3", ())) == 1


# Finding 7: after a Raft election every node is `unknown`, and failover read that as no
# node allowing the service any more: it withdrew a standing surge before its task ran.


def test_an_election_does_not_withdraw_a_standing_failover_surge() -> None:
    web = service("web", replicas=3, labels={**MANAGED, "placement.failover-mode": "confirmed"})
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]
    memory = run(snapshot(four(), [web], tasks), Memory(), 100.0).memory
    left = tasks[:2]
    surged = run(snapshot(four({3: D}), [web], left), memory, 101.0)
    (surge,) = [a for a in surged.actions if isinstance(a, SetReplicas)]
    web4 = applied(web, surge)
    starting = replace(running(web4, 4, 4), state=TaskState.STARTING)
    now_tasks = [*moved(left, web4), starting]
    # A Raft election before the surged task runs: every node but the dead one unknown.
    election = snapshot(four({1: U, 2: U, 3: D, 4: U}), [web4], now_tasks)
    result = run(election, surged.memory, 102.0)
    assert replicas_of(result, "web") == [], said(result, "web")
    # The nodes report, the surged task runs: the trim as usual.
    ran = snapshot(four({3: D}), [web4], [*moved(left, web4), running(web4, 4, 4)])
    assert replicas_of(run(ran, result.memory, 110.0), "web") == [3]


def test_a_loss_seen_first_after_an_election_waits_for_a_node_to_report() -> None:
    """A node died and Swarm marked it down just before an election: every other node is
    `unknown`. The replicas are not pending for want of an allowed node: the surge waits
    for one to report, and says so."""
    web = service("web", replicas=3, labels={**MANAGED, "placement.failover-mode": "confirmed"})
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]
    memory = run(snapshot(four(), [web], tasks), Memory(), 100.0).memory
    election = snapshot(four({1: U, 2: U, 3: D, 4: U}), [web], tasks[:2])
    result = run(election, memory, 101.0)
    assert replicas_of(result, "web") == []
    assert "reported to a new Raft leader" in said(result, "web")
    assert "stay pending" not in said(result, "web")
    reported = run(snapshot(four({3: D}), [web], tasks[:2]), result.memory, 105.0)
    assert replicas_of(reported, "web") == [4], said(reported, "web")
