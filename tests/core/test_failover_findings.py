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
    assert len(memory.speculation.false_alarms.get("n3", ())) == 1
    assert "n3" not in memory.speculation.confirmed_until
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
    assert len(trimmed.memory.speculation.false_alarms.get("n3", ())) == 1


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
