"""Stops no per-plan budget counted: each found by reading plan(), each reproduced here on
the real plan() across cycles, with Swarm's own reactions applied between them.

`enforced` is what Swarm's constraint enforcer does after a write: a task on a node that
its service's constraints (or the node's availability) now refuse stops, and its
replacement waits unassigned. A cycle may also observe the swarm before the enforcer
has acted, so both orders are tried.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.actions import SetNodeLabels, SetReplicas
from controller.core.apply import apply_actions
from controller.core.constraints import node_filter, parse_constraint
from controller.core.labels import possible_constraint, possible_label, steering_constraint
from controller.core.memory import Memory
from controller.core.model import (
    ClusterSnapshot,
    NodeState,
    Resources,
    Service,
    Task,
    TaskState,
)
from controller.core.outside_inputs import HealthReport, HealthState
from controller.core.plan import Plan, plan
from controller.policy import Policy

from .builders import MANAGED, node, running, service, snapshot

NOW = 10_000.0


def stop_first(svc: Service) -> Service:
    return replace(svc, update_order="stop-first")


def enforced(snap: ClusterSnapshot) -> ClusterSnapshot:
    """Swarm's constraint enforcer: refused tasks stop, replacements wait unassigned."""
    tasks: list[Task] = []
    for task in snap.tasks:
        svc = snap.service_by_id[task.service_id]
        host = snap.node_by_id.get(task.node_id)
        allows = node_filter(parse_constraint(c) for c in svc.constraints)
        if host is not None and host.is_ready and not allows(host):
            tasks.append(
                replace(task, id=f"{task.id}-r", node_id="", state=TaskState.PENDING, error="")
            )
        else:
            tasks.append(task)
    return replace(snap, tasks=tuple(tasks))


def stopped_and_unreplaced(snap: ClusterSnapshot, service_id: str) -> int:
    """Tasks of the service that are not running where their constraints allow them."""
    svc = snap.service_by_id[service_id]
    allows = node_filter(parse_constraint(c) for c in svc.constraints)
    up = sum(
        1
        for t in snap.tasks_of(service_id)
        if t.is_running
        and (n := snap.node_by_id.get(t.node_id)) is not None
        and n.state in (NodeState.READY, NodeState.UNKNOWN)
        and allows(n)
    )
    return max(0, (svc.replicas or 0) - up)


def cycle(snap: ClusterSnapshot, memory: Memory, now: float) -> Plan:
    return plan(snapshot=snap, policy=Policy.default(), memory=memory, now=now)


def warmed(snap: ClusterSnapshot) -> Memory:
    calm = replace(snap, health=())
    return cycle(calm, Memory(), NOW - 1000).memory


def degraded(node_id: str) -> HealthReport:
    return HealthReport(node_id, HealthState.DEGRADED, "webhook", NOW + 600, reason="disk")


# --- 1. max-unavailable holds across cycles ------------------------------------------


@pytest.mark.parametrize("staggered", [False, True], ids=["together", "half-a-second-apart"])
@pytest.mark.parametrize("swarm_first", [True, False], ids=["enforced", "not-yet-enforced"])
def test_two_degraded_nodes_never_take_two_replicas(swarm_first: bool, staggered: bool) -> None:
    """Six nodes, so that two degraded ones stay under the health panic threshold."""
    api = stop_first(
        service(
            "api",
            replicas=3,
            labels={**MANAGED, "placement.max-unavailable": "1"},
            constraints=[steering_constraint("api")],
        )
    )
    nodes = [node(1, manager=True), *(node(n) for n in range(2, 7))]
    snap = snapshot(nodes, [api], [running(api, 2, 1), running(api, 3, 2), running(api, 4, 3)])
    memory = warmed(snap)
    worst = 0
    for step in range(4):
        first = staggered and step == 0
        snap = replace(
            snap, health=(degraded("n2"),) if first else (degraded("n2"), degraded("n3"))
        )
        result = cycle(snap, memory, NOW + 0.5 * step)
        snap, memory = apply_actions(snap, result.actions), result.memory
        if swarm_first:
            snap = enforced(snap)
        worst = max(worst, stopped_and_unreplaced(snap, api.id))
        worst = max(worst, stopped_and_unreplaced(enforced(snap), api.id))
    assert worst <= 1, "max-unavailable 1, but the writes of successive cycles stopped more"


# --- 2. a node Swarm calls unknown still runs its tasks ------------------------------


def test_a_possible_owner_mark_stays_while_a_task_runs_on_a_node_swarm_calls_unknown() -> None:
    """A new Raft leader calls node-2 unknown; db still runs there. Its policy no longer
    lists node-2, so the mark would go: Swarm's constraint enforcer would then stop db's
    stop-first task there once node-2 reports, with no replacement running."""
    db = stop_first(
        service(
            "db",
            replicas=1,
            labels={**MANAGED, "placement.possible-nodes": "node-3,node-4"},
            constraints=[steering_constraint("db"), possible_constraint("db")],
        )
    )
    mark = {possible_label("db"): "true"}
    nodes = [
        node(1, manager=True),
        node(2, state=NodeState.UNKNOWN, labels=mark),
        node(3, labels=mark),
        node(4, labels=mark),
    ]
    snap = snapshot(nodes, [db], [running(db, 2, 1)])
    memory = warmed(replace(snap, nodes=tuple(replace(n, state=NodeState.READY) for n in nodes)))
    result = cycle(snap, memory, NOW)
    after = apply_actions(snap, result.actions)
    assert possible_label("db") in after.node_by_id["n2"].labels, (
        "the mark that keeps db's running task went while its node was unknown"
    )


# --- 3. a write the guards hold does not claim its object ----------------------------


def test_a_held_failover_surge_does_not_block_the_owners_write_that_unblocks_swarm() -> None:
    """An operator's rollout (failure action rollback) runs; node-2 died with one of web's
    tasks and Swarm's replacement waits for a node its constraints allow. Failover's surge
    is held by the rollout guard; the owners rule's widening write, which the guard
    allows, must not be deferred behind it."""
    web = service(
        "web",
        replicas=2,
        labels={**MANAGED, "placement.preferred-nodes": "node-2"},
        constraints=[steering_constraint("web")],
        update_state="updating",
    )
    web = replace(web, update_failure_action="rollback")
    nodes = [node(1, manager=True), node(2), node(3)]
    calm = snapshot(nodes, [web], [running(web, 2, 1), running(web, 3, 2)])
    memory = warmed(calm)
    down = replace(
        calm,
        nodes=(nodes[0], replace(nodes[1], state=NodeState.DOWN), nodes[2]),
        tasks=(
            Task("t-web-1-r", web.id, "", 1, TaskState.RUNNING, TaskState.PENDING, error="no node"),
            running(web, 3, 2),
        ),
    )
    first = cycle(down, memory, NOW)
    deferred = [d for d in first.decisions if d.outcome == "defer" and d.subject == "service web"]
    held = [d for d in first.decisions if d.rule == "guard" and d.outcome == "wait"]
    assert not (deferred and held), "a write the guards held still claimed web: " + "; ".join(
        f"{d.rule}: {d.reason}" for d in (*held, *deferred)
    )


# --- 4. failover's trim stops a running original -------------------------------------


@pytest.mark.parametrize("cap", ["0", "1"])
def test_failover_trim_on_a_two_one_layout_names_the_node_it_may_empty(cap: str) -> None:
    """node-1 x2, node-2 x1, two empty nodes; node-2 dies. Swarm's delayed replacement is
    assigned a node at once (desired READY, not listed), and its scale-down drops each
    node's second copy first: trimmed back to 3, the running original on node-1 goes.
    The trim cannot prove it drops only surplus, so it must say so and be charged; it
    waits until every task runs, so that what it stops is spare, whatever the cap."""
    api = service("api", replicas=3, labels={**MANAGED, "placement.max-unavailable": cap})
    nodes = [node(1, manager=True), node(2), node(3), node(4)]
    calm = snapshot(nodes, [api], [running(api, 1, 1), running(api, 1, 2), running(api, 2, 3)])
    memory = warmed(calm)
    lost = replace(
        calm,
        nodes=(nodes[0], replace(nodes[1], state=NodeState.DOWN), nodes[2], nodes[3]),
        tasks=(running(api, 1, 1), running(api, 1, 2)),
    )
    surge = cycle(lost, memory, NOW)
    (raise_,) = [a for a in surge.actions if isinstance(a, SetReplicas)]
    surged = apply_actions(lost, (raise_,))
    # The surged task runs on node-3; Swarm's delayed replacement of slot 3 waits on
    # node-4 (listed as the adapter lists it: desired READY).
    delayed = replace(running(api, 4, 3), id="t-api-3-r", desired_state=TaskState.READY)
    delayed = replace(delayed, state=TaskState.READY)
    surged = replace(surged, tasks=(*surged.tasks, running(api, 3, 4)), delayed=(delayed,))
    trim = cycle(surged, surge.memory, NOW + 1)
    trims = [a for a in trim.actions if isinstance(a, SetReplicas) and a.replicas == 3]
    assert not trims or trims[0].evicts_from == ("n1",), (
        "the trim may stop the running original on node-1 and names no node"
    )
    assert not trims, "a trim that would stop a running original waits"
    (why,) = [d for d in trim.decisions if d.rule == "failover" and d.subject == "service api"]
    assert why.outcome == "wait" and "node-1" in why.reason
    # Once the delayed replacement runs too, the trim stops only a spare task.
    settled = replace(
        surged,
        tasks=(
            *surged.tasks,
            replace(delayed, desired_state=TaskState.RUNNING, state=TaskState.RUNNING),
        ),
        delayed=(),
    )
    later = cycle(settled, trim.memory, NOW + 6)
    (done,) = [a for a in later.actions if isinstance(a, SetReplicas)]
    assert done.replicas == 3 and done.evicts_from == ("n1",)


# --- 5. preemption is charged like every other stop ----------------------------------


def test_preemption_takes_no_more_at_once_than_max_unavailable() -> None:
    slot = {"slot": 1}
    batch = stop_first(
        service("batch", replicas=6, labels={**MANAGED, "placement.priority": "low"})
    )
    batch = replace(batch, reservations=Resources(generic=slot))
    urgent = service("urgent", replicas=2, labels={**MANAGED, "placement.priority": "high"})
    urgent = replace(urgent, reservations=Resources(generic=slot))
    nodes = [
        replace(node(n, manager=n == 1), capacity=Resources(generic={"slot": 2})) for n in (1, 2, 3)
    ]
    pending = [
        Task(
            f"t-urgent-{i}",
            urgent.id,
            "",
            i,
            TaskState.RUNNING,
            TaskState.PENDING,
            error="no suitable node (insufficient resources on 3 nodes)",
        )
        for i in (1, 2)
    ]
    snap = snapshot(
        nodes,
        [batch, urgent],
        [running(batch, 1 + i % 3, i + 1) for i in range(6)] + pending,
    )
    result = cycle(snap, warmed(snap), NOW)
    scaled = [a for a in result.actions if isinstance(a, SetReplicas) and a.service_id == batch.id]
    assert scaled, "preemption should make room at all"
    assert scaled[0].replicas >= 5, f"6 -> {scaled[0].replicas} at once, max-unavailable 1"


# --- found by the model check (tests/core/test_safety_machine.py) ----------------------


def test_a_failed_report_is_marked_on_its_node_while_a_service_there_rolls_out() -> None:
    """node-6 is reported failed while web, which runs there, is in an operator's
    rollout. web's eviction waits for the rollout, but the rest of the node's write (the
    report's mark, the other services' evictions) goes: without the mark the report is
    not in force, so a second report could push it out of the blast-radius cap, and
    failover would then trim the surge it made for node-6 as if web's task there ran
    (the model check's sequence: a healthy surged copy stopped, max-unavailable 0)."""
    web = service("web", replicas=3, labels=MANAGED, update_state="updating")
    api = service("api", replicas=2, labels=MANAGED)
    nodes = [node(1, manager=True), *(node(n) for n in range(2, 7))]
    calm = snapshot(
        nodes,
        [web, api],
        [running(web, 5, 1), running(web, 5, 2), running(web, 6, 3), running(api, 6, 1),
         running(api, 4, 2)],
    )  # fmt: skip
    memory = warmed(calm)
    failed = HealthReport("n6", HealthState.FAILED, "webhook", NOW + 600, reason="disk")
    result = cycle(replace(calm, health=(failed,)), memory, NOW)
    marks = [a for a in result.actions if isinstance(a, SetNodeLabels) and a.node_id == "n6"]
    assert marks, [d.reason for d in result.decisions if "node-6" in d.subject]
    (mark,) = marks
    assert any(key.startswith("swarm-placement.health.") for key in mark.set_labels)
    assert "swarm-placement.deny.web" not in mark.set_labels, "web waits for its rollout"
    assert mark.evicts_services == ("s-api",)
    held = [d for d in result.decisions if d.subject == "node node-6"]
    assert any("rollout" in d.reason for d in held), [d.reason for d in held]
