"""The simulated swarm is no kinder than Swarm: what runs is counted from the ground
truth (engine alive, link up), a silent cut leaves the node `ready`, and a new leader
holds a dead node `unknown` for twice the grace from the election."""

from __future__ import annotations

from controller.core.actions import SetReplicas
from controller.core.model import NodeState
from controller.core.simulate import SimSwarm, SwarmTimings

from .builders import node, running, service, snapshot

T0 = 1_000_000.0
FAST = SwarmTimings(heartbeat_seconds=1.0)
NODES = [node(1, manager=True), node(2), node(3)]


def _swarm() -> SimSwarm:
    web = service("web", replicas=3)
    tasks = [running(web, 1, 1), running(web, 2, 2), running(web, 3, 3)]
    return SimSwarm(snapshot(NODES, [web], tasks), FAST, T0)


def _states(swarm: SimSwarm, node_id: str, until: float) -> list[tuple[float, str]]:
    """The node's states as Swarm's API shows them, with when each began (from T0)."""
    seen = [(0.0, swarm.nodes[node_id].state.value)]
    start = swarm.now
    for i in range(1, round((until - start) / 0.5) + 1):
        t = start + i * 0.5
        swarm.step(t)
        state = swarm.nodes[node_id].state.value
        if state != seen[-1][1]:
            seen.append((round(t - T0, 1), state))
    return seen


def test_a_crashed_engine_s_task_does_not_run_though_the_api_says_so() -> None:
    swarm = _swarm()
    swarm.fail("n3")
    swarm.step(T0 + 1.0)
    listed = [t for t in swarm.snapshot().tasks if t.node_id == "n3"]
    assert [t.state.value for t in listed] == ["running"]  # the API's word
    assert swarm.nodes["n3"].state is NodeState.READY
    assert swarm.running("s-web") == 2  # what serves


def test_a_write_that_stops_a_task_on_a_dead_engine_costs_nothing() -> None:
    swarm = _swarm()
    swarm.cut_link("n3")
    swarm.apply((SetReplicas("s-web", "web", 1, 2),))
    swarm.step(T0 + 0.5)
    # One task on each node: the highest slot goes, node-3's.
    assert {t.node_id for t in swarm.tasks.values()} == {"n1", "n2"}
    assert swarm.stopped_by_writes["s-web"] == 0


def test_a_silent_cut_stays_ready_until_the_heartbeat_grace_ends() -> None:
    swarm = _swarm()
    swarm.cut_link("n2")
    assert _states(swarm, "n2", T0 + 4.0) == [(0.0, "ready"), (2.5, "down")]


def test_a_dead_node_stays_unknown_for_twice_the_grace_from_the_election() -> None:
    swarm = _swarm()
    swarm.fail("n2")
    swarm.step(T0 + 1.0)
    for node_id in ("n1", "n2", "n3"):
        swarm.leader_change(node_id, 0.5)
    # Down 6 heartbeats after the election at 1 s, not 2.5 after the crash; the live
    # nodes report back at once. Its task is listed all that time, and serves no one.
    assert _states(swarm, "n2", T0 + 8.0) == [(0.0, "unknown"), (7.0, "down")]
    assert swarm.nodes["n3"].state is NodeState.READY


def test_a_node_that_dies_while_unknown_is_down_when_the_election_s_grace_ends() -> None:
    swarm = _swarm()
    swarm.leader_change("n2", 4.0)
    swarm.step(T0 + 1.0)
    swarm.fail("n2")  # before it reported to the new leader: it never will
    assert _states(swarm, "n2", T0 + 7.0) == [(0.0, "unknown"), (6.0, "down")]
    assert swarm.running("s-web") == 2
