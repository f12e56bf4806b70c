"""The conservative ledger, on the real plan(): what counts as up, what is wanted, and
what the controller may not move (issue 46, findings 1, 2, 3 and 6, and two lows).

A task counts as up only on a node Swarm calls ready that no liveness signal or health
report says is gone; a global service's task on each node is one replica; the wanted
count is the operator's whatever a replica record says. Each test replays a layout in
which the controller, on the code before, left a service below what Swarm alone keeps.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.actions import SetNodeAvailability, SetNodeLabels, SetReplicas
from controller.core.apply import apply_actions
from controller.core.constraints import node_filter, parse_constraint
from controller.core.health.node_marks import PAUSE_HEALTH, PAUSED, format_paused
from controller.core.labels import deny_label, steering_constraint
from controller.core.memory import Memory
from controller.core.model import (
    Availability,
    ClusterSnapshot,
    NodeState,
    Service,
    ServiceMode,
    Task,
    TaskState,
)
from controller.core.outside_inputs import (
    HealthReport,
    HealthState,
    LivenessSignal,
    PluginAdvice,
    PluginVeto,
)
from controller.core.plan import Plan, plan
from controller.core.replicas import BASE_LABEL, OPERATION_LABEL, SET_LABEL, SINCE_LABEL, Operation
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot
from .capacity_builders import on, pending, run, slot_nodes, svc

NOW = 10_000.0


def cycle(snap: ClusterSnapshot, memory: Memory, now: float) -> Plan:
    return plan(snapshot=snap, policy=Policy.default(), memory=memory, now=now)


def warmed(snap: ClusterSnapshot) -> Memory:
    calm = replace(snap, health=(), liveness=())
    return cycle(calm, Memory(), NOW - 1000).memory


def degraded(node_id: str) -> HealthReport:
    return HealthReport(node_id, HealthState.DEGRADED, "webhook", NOW + 600, reason="disk")


def gone(node_id: str) -> tuple[LivenessSignal, ...]:
    """node's engine died: the gossip and the probe agree, long enough to suspect it."""
    return (
        LivenessSignal(node_id, "gossip", False, NOW - 30, "left the peers"),
        LivenessSignal(node_id, "probe", False, NOW - 30, "connect refused"),
    )


def enforced(snap: ClusterSnapshot) -> ClusterSnapshot:
    """Swarm's constraint enforcer after a write: a refused task stops; a replicated
    service's replacement waits unassigned, a global service's is not made."""
    tasks: list[Task] = []
    for task in snap.tasks:
        svc = snap.service_by_id[task.service_id]
        host = snap.node_by_id.get(task.node_id)
        allows = node_filter(parse_constraint(c) for c in svc.constraints)
        if host is None or not host.is_ready or allows(host):
            tasks.append(task)
        elif svc.mode is ServiceMode.REPLICATED:
            tasks.append(replace(task, id=f"{task.id}-r", node_id="", state=TaskState.PENDING))
    return replace(snap, tasks=tuple(tasks))


def really_running(snap: ClusterSnapshot, service_id: str, dead: set[str]) -> int:
    """Tasks of the service that really run: on a node whose engine lives, where its
    constraints still allow it (once enforced)."""
    after = enforced(snap)
    return sum(1 for t in after.tasks_of(service_id) if t.is_running and t.node_id not in dead)


def denies(result: Plan, node_id: str, name: str) -> bool:
    return any(
        isinstance(a, SetNodeLabels | SetNodeAvailability)
        and a.node_id == node_id
        and deny_label(name) in a.set_labels
        for a in result.actions
    )


def stop_first(svc: Service, **fields: object) -> Service:
    return replace(svc, update_order="stop-first", **fields)  # type: ignore[arg-type]


# --- finding 1: a task on a node in doubt is not up ----------------------------------


def _web_on_three() -> tuple[Service, ClusterSnapshot]:
    web = stop_first(
        service(
            "web",
            replicas=3,
            labels={**MANAGED, "placement.max-unavailable": "1"},
            constraints=[steering_constraint("web")],
        ),
        max_replicas_per_node=1,
    )
    nodes = [node(1, manager=True), *(node(n) for n in range(2, 7))]
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]
    return web, snapshot(nodes, [web], tasks)


@pytest.mark.parametrize("doubt", ["suspected", "one-signal", "unknown", "disconnected"])
def test_a_degraded_report_does_not_stop_a_task_while_another_node_is_in_doubt(
    doubt: str,
) -> None:
    """node-3's engine died (its signals say gone while Swarm says ready, or a new leader
    calls it unknown, or it is disconnected); node-2 is reported degraded. Swarm alone
    keeps 2 of web's 3 running; stopping node-2's task leaves 1."""
    web, calm = _web_on_three()
    memory = warmed(calm)
    snap = replace(calm, health=(degraded("n2"),))
    if doubt == "suspected":
        snap = replace(snap, liveness=gone("n3"))
    elif doubt == "one-signal":
        snap = replace(snap, liveness=gone("n3")[:1])
    else:
        state = NodeState.UNKNOWN if doubt == "unknown" else NodeState.DISCONNECTED
        nodes = tuple(replace(n, state=state) if n.id == "n3" else n for n in snap.nodes)
        snap = replace(snap, nodes=nodes)
    result = cycle(snap, memory, NOW)
    after = apply_actions(snap, result.actions)
    assert really_running(after, web.id, dead={"n3"}) >= 2, (
        "web's task on node-2 was refused while node-3's could not be counted on: "
        + "; ".join(d.reason for d in result.decisions if d.subject == "node node-2")
    )


def test_a_task_on_a_falsely_suspected_node_is_charged_when_stopped() -> None:
    """node-3's engine died and a new leader calls it unknown; node-2 is reported degraded
    and its signals say gone too, but that is a false alarm: its task runs. Neither task
    counts as up, yet stopping node-2's takes web from the 2 Swarm alone keeps to 1: the
    stop is charged, and with 1 of 3 up it waits."""
    web, calm = _web_on_three()
    memory = warmed(calm)
    nodes = tuple(replace(n, state=NodeState.UNKNOWN) if n.id == "n3" else n for n in calm.nodes)
    snap = replace(calm, nodes=nodes, health=(degraded("n2"),), liveness=gone("n2"))
    result = cycle(snap, memory, NOW)
    after = apply_actions(snap, result.actions)
    assert really_running(after, web.id, dead={"n3"}) >= 2, (
        "web's task on node-2, whose engine runs, was refused while node-3 is gone: "
        + "; ".join(d.reason for d in result.decisions if d.subject == "node node-2")
    )


def test_a_plugin_veto_does_not_stop_a_task_while_another_node_is_suspected() -> None:
    """The same with a placement plugin's veto of node-2 in place of the report."""
    web, calm = _web_on_three()
    memory = warmed(calm)
    veto = PluginVeto("pick", web.id, "n2", "too hot")
    snap = replace(
        calm,
        liveness=gone("n3"),
        plugins=PluginAdvice(vetoes=(veto,), answered=("pick",)),
    )
    result = cycle(snap, memory, NOW)
    assert really_running(apply_actions(snap, result.actions), web.id, dead={"n3"}) >= 2


def test_a_dead_nodes_task_is_no_spare_beside_a_speculative_surge() -> None:
    """web runs 2 tasks on node-2 and 1 on node-3; node-3 is suspected and a speculative
    surge (base 3, written 4) runs its task on node-4. node-2 is reported degraded: counted
    up, node-3's task made one spare, and a deny label stopping both of node-2's tasks at
    once fit max-unavailable 1, leaving 1 running where Swarm alone keeps node-2's 2."""
    web = stop_first(
        service(
            "web",
            replicas=3,
            labels={**MANAGED, "placement.max-unavailable": "1"},
            constraints=[steering_constraint("web")],
        )
    )
    nodes = [node(1, manager=True), *(node(n) for n in range(2, 7))]
    calm = snapshot(nodes, [web], [running(web, 2, 1), running(web, 2, 2), running(web, 3, 3)])
    record = {
        BASE_LABEL: "3",
        SET_LABEL: "4",
        OPERATION_LABEL: Operation.SPECULATE,
        SINCE_LABEL: f"{NOW - 10:.3f}",
    }
    memory = warmed(calm)
    surged = replace(web, replicas=4, labels={**web.labels, **record})
    snap = replace(
        calm,
        services=(surged,),
        tasks=(*calm.tasks, running(surged, 4, 4)),
        health=(degraded("n2"),),
        liveness=gone("n3"),
    )
    result = cycle(snap, memory, NOW)
    after = apply_actions(snap, result.actions)
    assert really_running(after, web.id, dead={"n3"}) >= 2, (
        "node-2's two tasks went at once while node-3's was counted as a spare"
    )


# --- finding 2: a global service's task on each node is one replica ------------------


def _global_on_six(name: str = "agent") -> tuple[Service, ClusterSnapshot]:
    svc = stop_first(
        service(
            name,
            replicas=None,
            mode=ServiceMode.GLOBAL,
            labels={**MANAGED, "placement.max-unavailable": "1"},
            constraints=[steering_constraint(name)],
        )
    )
    nodes = [node(1, manager=True), *(node(n) for n in range(2, 7))]
    return svc, snapshot(nodes, [svc], [running(svc, n, 0) for n in range(1, 7)])


def _run_cycles(snap: ClusterSnapshot, memory: Memory, inputs: list[ClusterSnapshot]) -> int:
    """Each cycle's plan applied, and Swarm's enforcer after it; the fewest tasks of the
    one service running at any point."""
    service_id = snap.services[0].id
    fewest = really_running(snap, service_id, set())
    for step, observed in enumerate(inputs):
        result = cycle(observed, memory, NOW + 0.5 * step)
        snap, memory = enforced(apply_actions(observed, result.actions)), result.memory
        if step + 1 < len(inputs):
            inputs[step + 1] = replace(inputs[step + 1], nodes=snap.nodes, tasks=snap.tasks)
        fewest = min(fewest, really_running(snap, service_id, set()))
    return fewest


def test_two_degraded_reports_take_no_task_of_a_global_service() -> None:
    """Two nodes reported degraded half a second apart: a global service's task there
    cannot run elsewhere, so refusing it is a loss. Swarm alone keeps 6 of 6."""
    _, calm = _global_on_six()
    memory = warmed(calm)
    first = replace(calm, health=(degraded("n2"),))
    both = replace(calm, health=(degraded("n2"), degraded("n3")))
    fewest = _run_cycles(calm, memory, [first, both, both, both])
    assert fewest == 6, f"the global service fell to {fewest} of 6"


def test_plugin_vetoes_of_a_global_service_are_held_to_max_unavailable() -> None:
    """A plugin vetoes node-2, then node-2 and node-3, for a global service: each node's
    task is one replica, so with max-unavailable 1 the second veto waits while the first
    node's task is gone (it never comes back while the veto stands)."""
    agent, calm = _global_on_six()
    memory = warmed(calm)

    def vetoed(*nodes: str) -> ClusterSnapshot:
        vetoes = tuple(PluginVeto("pick", agent.id, n, "hot") for n in nodes)
        return replace(calm, plugins=PluginAdvice(vetoes=vetoes, answered=("pick",)))

    fewest = _run_cycles(calm, memory, [vetoed("n2"), vetoed("n2", "n3"), vetoed("n2", "n3")])
    assert fewest >= 5, f"max-unavailable 1, but the global service fell to {fewest} of 6"


def test_a_veto_of_a_global_service_counts_a_node_reported_failed_as_wanted() -> None:
    """node-5 is reported failed (its task is written off, but Swarm alone still runs
    one there); a plugin then vetoes node-2. Counting node-5 out of what the global
    service wants, the veto fit max-unavailable 1 and left 4 of 6 serving where Swarm
    alone keeps 5."""
    agent, calm = _global_on_six()
    memory = warmed(calm)
    failed = HealthReport("n5", HealthState.FAILED, "webhook", NOW + 600, reason="disk")
    reported = replace(calm, health=(failed,))
    veto = PluginVeto("pick", agent.id, "n2", "too hot")
    vetoed = replace(reported, plugins=PluginAdvice(vetoes=(veto,), answered=("pick",)))
    snap, fewest = calm, 6
    for step, given in enumerate([reported, reported, vetoed, vetoed]):
        observed = replace(given, nodes=snap.nodes, tasks=snap.tasks)
        result = cycle(observed, memory, NOW + 0.5 * step)
        snap, memory = enforced(apply_actions(observed, result.actions)), result.memory
        fewest = min(fewest, really_running(snap, agent.id, dead={"n5"}))
    assert fewest >= 5, f"max-unavailable 1, but {fewest} of the 5 Swarm alone keeps serve"


# --- finding 3: the wanted count is the operator's -----------------------------------


@pytest.mark.parametrize("scaled", ["to-5", "back-to-the-written-4"])
def test_an_operators_scale_over_a_surge_record_is_what_the_ledger_wants(scaled: str) -> None:
    """A failover surge stands (base 3, written 4); during a rollout the operator scales
    to 5 (or scales away and back to 4, which memory remembers). The rollout completes;
    node-2 holds 2 tasks and is reported degraded. The nodes rule runs before failover
    forgets the record: reading wanted 3 it would stop both of node-2's tasks at once."""
    replicas = 5 if scaled == "to-5" else 4
    since = NOW - 20
    record = {
        BASE_LABEL: "3",
        SET_LABEL: "4",
        OPERATION_LABEL: Operation.SURGE,
        SINCE_LABEL: f"{since:.3f}",
    }
    web = stop_first(
        service(
            "web",
            replicas=replicas,
            labels={**MANAGED, "placement.max-unavailable": "1", **record},
            constraints=[steering_constraint("web")],
        ),
        update_state="completed",
    )
    nodes = [node(1, manager=True), *(node(n) for n in range(2, 7))]
    placed = [2, 2, 3, 4, 5][:replicas]
    tasks = [running(web, n, slot) for slot, n in enumerate(placed, start=1)]
    calm = snapshot(nodes, [web], tasks)
    memory = replace(warmed(calm), overridden={web.id: since})
    snap = replace(calm, health=(degraded("n2"),))
    result = cycle(snap, memory, NOW)
    after = apply_actions(snap, result.actions)
    left = really_running(after, web.id, set())
    assert left >= replicas - 1, (
        f"max-unavailable 1, but {left} of the operator's {replicas} run: "
        + "; ".join(d.reason for d in result.decisions if "node-2" in d.subject)
    )


# --- finding 6: local data is not moved by a degraded report or by preemption --------


def test_a_degraded_report_does_not_move_a_service_whose_data_is_local() -> None:
    db = stop_first(
        service("db", replicas=1, labels=MANAGED, constraints=[steering_constraint("db")]),
        local_data=("volume db-data",),
    )
    nodes = [node(1, manager=True), node(2), node(3)]
    calm = snapshot(nodes, [db], [running(db, 2, 1)])
    memory = warmed(calm)
    result = cycle(replace(calm, health=(degraded("n2"),)), memory, NOW)
    assert not denies(result, "n2", "db"), "db's task, whose data lives on node-2, was moved"
    kept = [d for d in result.decisions if d.subject == "service db" and d.outcome == "keep"]
    assert kept and "local to its node" in kept[0].reason


def test_preemption_does_not_stop_a_service_whose_data_is_local() -> None:
    low = replace(svc("low", 6, priority="low"), local_data=("volume low-data",))
    high = svc("high", 2, priority="high")
    snap = snapshot(slot_nodes(2, 2, 2), [high, low], on(low, 1, 1, 2, 2, 3, 3) + pending(high, 2))
    result = run(snap)
    assert not [a for a in result.actions if isinstance(a, SetReplicas)], (
        "a service whose data is local to its nodes was scaled down for another"
    )
    assert any("local to its node" in d.reason for d in result.decisions)


# --- lows: no pause in Swarm; Swarm's verdict timed by its own heartbeat -------------


@pytest.mark.parametrize("health", [HealthState.DEGRADED, HealthState.FAILED])
def test_a_reported_node_is_not_paused_in_swarm(health: HealthState) -> None:
    """A pause keeps every service's new tasks off the node, those the controller does
    not manage too (here an unmanaged global service whose task there restarts)."""
    web = service("web", replicas=2, labels=MANAGED, constraints=[steering_constraint("web")])
    mon = service("mon", replicas=None, mode=ServiceMode.GLOBAL)
    nodes = [node(1, manager=True), node(2), node(3), node(4)]
    tasks = [running(web, 2, 1), running(web, 3, 2), *(running(mon, n, 0) for n in range(1, 5))]
    calm = snapshot(nodes, [web, mon], tasks)
    memory = warmed(calm)
    report = HealthReport("n2", health, "webhook", NOW + 600, reason="disk")
    snap = replace(calm, health=(report,))
    for step in range(3):
        result = cycle(snap, memory, NOW + step)
        snap, memory = enforced(apply_actions(snap, result.actions)), result.memory
        assert snap.node_by_id["n2"].availability is Availability.ACTIVE, (
            f"node-2 was paused in Swarm ({health}): unmanaged services lose it too"
        )


def test_a_node_paused_by_an_earlier_version_is_set_active_again() -> None:
    web = service("web", replicas=1, labels=MANAGED, constraints=[steering_constraint("web")])
    ours = {PAUSED: format_paused(frozenset({PAUSE_HEALTH}))}
    nodes = [
        node(1, manager=True),
        node(2, availability=Availability.PAUSE, labels=ours),
        node(3),
        node(4),
    ]
    snap = snapshot(nodes, [web], [running(web, 1, 1)])
    snap = replace(snap, health=(degraded("n2"),))
    result = cycle(snap, warmed(snap), NOW)
    after = apply_actions(snap, result.actions)
    assert after.node_by_id["n2"].availability is Availability.ACTIVE, "still degraded"
    assert PAUSED not in after.node_by_id["n2"].labels


@pytest.mark.parametrize(
    ("heartbeat", "after", "trimmed"),
    [(30.0, 61.0, False), (1.0, 13.0, True)],
    ids=["slow-heartbeat-not-yet", "fast-heartbeat-already"],
)
def test_swarm_still_calling_a_node_ready_is_timed_by_its_heartbeat(
    heartbeat: float, after: float, trimmed: bool
) -> None:
    """A speculative surge stands for node-3; the signals have gone quiet (no word either
    way) and Swarm still calls node-3 ready. That alone says node-3 lives only once Swarm's
    grace (3 heartbeats, 6 after an election) has long passed: with a 30 s heartbeat, 61 s
    is within the grace (a dead node may not be down yet), with a 1 s one 13 s is long past."""
    web = service(
        "web",
        replicas=4,
        labels={
            **MANAGED,
            "placement.failover-mode": "speculative",
            BASE_LABEL: "3",
            SET_LABEL: "4",
            OPERATION_LABEL: Operation.SPECULATE,
            SINCE_LABEL: f"{NOW:.3f}",
        },
        constraints=[steering_constraint("web")],
    )
    nodes = [node(1, manager=True), node(2), node(3), node(4)]
    tasks = [running(web, n, slot) for slot, n in enumerate([1, 2, 3, 4], start=1)]
    snap = replace(snapshot(nodes, [web], tasks), heartbeat_seconds=heartbeat)
    memory = warmed(snap)
    result = cycle(snap, memory, NOW + after)
    trims = [a for a in result.actions if isinstance(a, SetReplicas) and a.replicas == 3]
    assert bool(trims) is trimmed, "; ".join(
        d.reason for d in result.decisions if d.subject == "service web"
    )


def test_tasks_on_a_node_in_doubt_still_hold_their_room() -> None:
    """Down for the ledger, but never counted as free room: a node Swarm calls unknown
    keeps its tasks' place (the preemption and placement rules read held_placement)."""
    web = service("web", replicas=1, labels=MANAGED)
    nodes = [node(1, manager=True), node(2, state=NodeState.UNKNOWN)]
    snap = snapshot(nodes, [web], [running(web, 2, 1)])
    assert snap.held_placement[web.id] == {"n2": 1}
    assert "n2" not in snap.live_node_ids
    assert replace(snap, nodes=(nodes[0], node(2))).live_node_ids == {"n1", "n2"}
    running_task = Task("t", web.id, "n2", 1, TaskState.RUNNING, TaskState.RUNNING)
    assert running_task.is_running
