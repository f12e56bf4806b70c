"""The simulated swarm follows Swarm's scheduler and orchestrators, and the simulation
runs the real planner on it deterministically."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetNodeLabels, SetReplicas, SetServiceConstraints
from controller.core.model import Availability, NodeState, Resources, TaskState
from controller.core.simulate import (
    Scheduler,
    SimSwarm,
    SwarmTimings,
    parse_scenario,
    simulate,
)
from controller.core.simulate.slots import SlotTask, new_slots, slots_to_remove
from controller.policy import Policy, policy_from_data

from .builders import node, running, service, snapshot

T0 = 1_000_000.0
FAST = SwarmTimings(heartbeat_seconds=1.0)
NODES = [node(1, manager=True), node(2), node(3)]


def _run(swarm: SimSwarm, until: float) -> None:
    t = swarm.now
    while t < until:
        t += 0.5
        swarm.step(t)


def _placed(swarm: SimSwarm) -> dict[str, dict[str, int]]:
    return {k: v for k, v in swarm.placement().items() if v}


def test_a_lost_node_s_tasks_come_back_after_the_restart_delay_and_never_move_back() -> None:
    web = service("web", replicas=3)
    swarm = SimSwarm(
        snapshot(NODES, [web], [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]),
        FAST,
        T0,
    )
    swarm.fail("n2")
    _run(swarm, T0 + 2.5)
    assert not swarm.nodes["n2"].is_ready
    _run(swarm, T0 + 7.0)  # down at 2.5 s; the 5 s restart delay is not over
    assert _placed(swarm) == {"web": {"node-1": 1, "node-3": 1}}
    _run(swarm, T0 + 9.0)
    # Fewest tasks of the service tie (1 and 1), fewest in all too: the hostname decides.
    assert _placed(swarm) == {"web": {"node-1": 2, "node-3": 1}}
    swarm.restore("n2")
    _run(swarm, T0 + 30.0)
    assert swarm.nodes["n2"].state is NodeState.READY
    assert _placed(swarm) == {"web": {"node-1": 2, "node-3": 1}}, "nothing moves back"


def test_restart_condition_none_is_not_replaced_and_drain_replaces_at_once() -> None:
    once = replace(service("once", replicas=1), restart_condition="none")
    web = service("web", replicas=1)
    swarm = SimSwarm(
        snapshot(NODES, [once, web], [running(once, 2, 1), running(web, 3, 1)]), FAST, T0
    )
    swarm.fail("n2")
    _run(swarm, T0 + 20)
    assert _placed(swarm) == {"web": {"node-3": 1}}
    swarm.set_availability("n3", Availability.DRAIN)
    _run(swarm, T0 + 21)
    assert _placed(swarm) == {"web": {"node-1": 1}}, "drain skips the restart delay"


def test_scale_down_removes_unassigned_slots_first_then_the_busiest_node() -> None:
    tasks = [
        SlotTask("a", 1, "n1", TaskState.RUNNING),
        SlotTask("b", 2, "n1", TaskState.RUNNING),
        SlotTask("c", 3, "n2", TaskState.RUNNING),
        SlotTask("d", 4, "", TaskState.PENDING),
    ]
    assert slots_to_remove(tasks, 3) == [4]
    assert sorted(slots_to_remove(tasks, 2)) == [2, 4]
    assert new_slots([1, 2, 4], 3) == [3, 5, 6]


def test_a_constraint_change_replaces_only_the_tasks_it_rules_out() -> None:
    web = service("web", replicas=3)
    swarm = SimSwarm(
        snapshot(NODES, [web], [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]),
        FAST,
        T0,
    )
    swarm.apply((SetServiceConstraints("s-web", "web", web.version, constraints=("node.id!=n1",)),))
    assert swarm.services["s-web"].update_state == "updating"
    _run(swarm, T0 + 2)
    untouched = {t.id for t in swarm.tasks.values() if t.node_id in {"n2", "n3"}}
    assert {"t-web-2", "t-web-3"} <= untouched
    assert _placed(swarm) == {"web": {"node-2": 2, "node-3": 1}}
    _run(swarm, T0 + 8)
    assert swarm.services["s-web"].update_state == "completed"


def test_a_queued_task_whose_node_meets_the_constraints_again_is_left_alone() -> None:
    """swarmkit's updater asks whether a task is dirty when its turn comes, with the node
    as it is then: a label written back in between saves the task still queued."""
    web = replace(service("web", replicas=2), update_order="stop-first")
    marked = replace(NODES[1], labels={"deny": "true"})
    swarm = SimSwarm(
        snapshot([NODES[0], marked, NODES[2]], [web], [running(web, 2, 1), running(web, 2, 2)]),
        FAST,
        T0,
    )
    refused = ("node.labels.deny!=true",)
    swarm.apply((SetServiceConstraints("s-web", "web", web.version, constraints=refused),))
    _run(swarm, T0 + 0.5)
    assert "t-web-1" not in swarm.tasks and "t-web-2" in swarm.tasks, "one at a time"
    back = SetNodeLabels("n2", "node-2", swarm.nodes["n2"].version, remove_labels=("deny",))
    swarm.apply((back,))
    _run(swarm, T0 + 20)
    assert "t-web-2" in swarm.tasks, "its node meets the constraints again: it stays"


def test_a_delayed_replacement_is_assigned_at_once_and_starts_after_the_delay() -> None:
    """swarmkit's restart supervisor: desired READY, a node at once, started later; the
    controller sees it in `delayed`, not among the tasks Swarm wants running."""
    web = service("web", replicas=2)
    swarm = SimSwarm(snapshot(NODES, [web], [running(web, 1, 1), running(web, 2, 2)]), FAST, T0)
    swarm.fail("n2")
    _run(swarm, T0 + 3)  # down at 2.5 s: slot 2 waits out its 5 s restart delay on node-3
    seen = swarm.snapshot()
    assert [(t.slot, t.node_id, t.desired_state) for t in seen.delayed] == [
        (2, "n3", TaskState.READY)
    ]
    assert [t.slot for t in seen.tasks] == [1]
    _run(swarm, T0 + 7)
    assert _placed(swarm) == {"web": {"node-1": 1}}
    _run(swarm, T0 + 7.5)
    assert _placed(swarm) == {"web": {"node-1": 1, "node-3": 1}}


def test_a_trim_keeps_a_delayed_replacement_alone_on_its_node_over_a_running_second_copy() -> None:
    """node-1 x2, node-2 x1; node-2 dies; the delayed replacement goes to node-3 and a
    surge to 4 to node-4. Trimmed back to 3, swarmkit drops node-1's second copy (a
    running original): the replacement, a first copy on its node, outlasts it."""
    nodes = [*NODES, node(4)]
    web = service("web", replicas=3)
    tasks = [running(web, 1, 1), running(web, 1, 2), running(web, 2, 3)]
    swarm = SimSwarm(snapshot(nodes, [web], tasks), FAST, T0)
    swarm.fail("n2")
    _run(swarm, T0 + 3)
    swarm.apply((SetReplicas("s-web", "web", web.version, replicas=4),))
    _run(swarm, T0 + 4)
    assert _placed(swarm) == {"web": {"node-1": 2, "node-4": 1}}
    assert [t.node_id for t in swarm.snapshot().delayed] == ["n3"]
    swarm.apply((SetReplicas("s-web", "web", web.version + 1, replicas=3),))
    assert _placed(swarm) == {"web": {"node-1": 1, "node-4": 1}}
    assert swarm.stopped_by_writes["s-web"] == 1
    _run(swarm, T0 + 20)
    assert _placed(swarm) == {"web": {"node-1": 1, "node-3": 1, "node-4": 1}}


def test_the_scheduler_filters_and_explains_as_swarm_does() -> None:
    slot = {"slot": 2}
    nodes = [replace(n, capacity=Resources(generic=slot)) for n in NODES]
    nodes[1] = replace(nodes[1], state=NodeState.DOWN)
    big = replace(service("big", replicas=1), reservations=Resources(generic={"slot": 3}))
    pinned = service("pinned", constraints=["node.hostname==node-9"])
    scheduler = Scheduler(nodes, {s.id: s for s in (big, pinned)}, [])
    assert scheduler.place(big) == (
        None,
        # The filter that failed most nodes first, as swarmkit's Pipeline.Explain.
        "no suitable node (insufficient resources on 2 nodes; 1 node not available for new tasks)",
    )
    assert scheduler.place(pinned)[1] == (
        "no suitable node (scheduling constraints not satisfied on 2 nodes; "
        "1 node not available for new tasks)"
    )
    reasons = [r.reason for r in scheduler.refusals(nodes[0], big)]
    assert reasons == ["insufficient resources: needs slot=3, slot=2 free"]


POLICY = policy_from_data(
    {"apiVersion": "placement/v1", "controller": {"resync-interval": "1s", "move-cooldown": "2s"}}
)
OWNED = {
    "placement.managed": "true",
    "placement.preferred-nodes": "node-2,node-3",
    "placement.failback": "immediate",
    "placement.failback-delay": "2s",
}


def _failover_failback(policy: Policy = POLICY):  # type: ignore[no-untyped-def]
    db = service(
        "db", replicas=2, labels=OWNED, constraints=["node.labels.swarm-placement.deny.db!=true"]
    )
    plain = service("plain", replicas=1, constraints=["node.hostname!=node-1"])
    snap = snapshot(
        NODES, [db, plain], [running(db, 2, 1), running(db, 3, 2), running(plain, 2, 1)]
    )
    steps = parse_scenario("fail node-2; wait 20s; restore node-2; wait 40s", nodes=["node-2"])
    return simulate(snap, policy, steps, timings=FAST, start=T0)


def test_the_planner_fails_over_and_back_on_the_simulated_swarm() -> None:
    result = _failover_failback()
    assert result.initial == {"db": {"node-2": 1, "node-3": 1}, "plain": {"node-2": 1}}
    assert result.final == {"db": {"node-2": 1, "node-3": 1}, "plain": {"node-3": 1}}
    decisions = [e.text for e in result.timeline if e.source == "decision"]
    assert any("[failover] service db: surge" in d for d in decisions)
    assert any("failback to preferred owner #1 node-2" in d for d in decisions)
    # Swarm's own failover for the unmanaged service, after its restart delay.
    swarm_says = [(e.at, e.text) for e in result.timeline if e.source == "swarm"]
    assert (2.5, "plain.1 assigned to node-3") in swarm_says
    assert (7.5, "plain.1 running on node-3") in swarm_says


def test_a_simulation_is_deterministic() -> None:
    assert _failover_failback().timeline == _failover_failback().timeline


def test_a_global_service_s_rollout_and_constraint_change_keep_one_task_per_node() -> None:
    """The global orchestrator replaces a task on its own node, and stops the task on a
    node the new constraints refuse without starting one elsewhere."""
    agent = replace(service("agent", replicas=None), update_order="stop-first")
    tasks = [replace(running(agent, n, 0), id=f"t-agent-{n}") for n in (1, 2, 3)]
    swarm = SimSwarm(snapshot(NODES, [agent], tasks), FAST, T0)
    swarm.rollout("s-agent", fails=False)
    _run(swarm, T0 + 10.0)
    assert _placed(swarm) == {"agent": {"node-1": 1, "node-2": 1, "node-3": 1}}
    swarm.operator_update("s-agent", constraints=("node.hostname!=node-2",))
    _run(swarm, T0 + 20.0)
    assert _placed(swarm) == {"agent": {"node-1": 1, "node-3": 1}}
