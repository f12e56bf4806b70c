"""Flap damping survives a restart: the nodes' recent downs live in the mirror."""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetMirror, SetServiceConstraints
from controller.core.apply import apply_actions
from controller.core.memory import FLAP_MEMORY_SECONDS, Memory
from controller.core.mirror import DOWNS_PREFIX, Mirror, decode_downs, encode_downs
from controller.core.model import ClusterSnapshot, NodeState
from controller.core.plan import Plan, plan
from controller.core.rules import rules_named
from controller.policy import Policy

from .builders import node, running, service, snapshot
from .test_owners import owners_only

NOW = 1_000_000.0
FAILED_OVER = {
    "placement.managed": "true",
    "placement.preferred-nodes": "node-2",
    "placement.failback": "immediate",
    "placement.failback-delay": "10s",
}


def nodes(*, n2: NodeState = NodeState.READY, n2_changed: float = 0.0) -> list:  # type: ignore[type-arg]
    return [
        node(1, manager=True),
        replace(node(2, state=n2), updated_at=n2_changed),
        node(3),
        node(4),
    ]


def with_store(snap: ClusterSnapshot, **downs: tuple[float, ...]) -> ClusterSnapshot:
    store = Mirror(config_id="cfg", version=5, downs={k: encode_downs(v) for k, v in downs.items()})
    return replace(snap, mirror=store)


def test_downs_encode_and_refuse_what_is_not_a_time() -> None:
    assert decode_downs(encode_downs((NOW - 40, NOW - 200))) == (NOW - 200, NOW - 40)
    store = Mirror(downs={"n2": "12.5,nope", "n3": "-4", "n4": "inf", "n5": "7.250"})
    assert store.node_downs == {"n5": (7.25,)}


def test_a_restarted_controller_reads_back_the_recent_downs() -> None:
    snap = with_store(
        snapshot(nodes(), []),
        n2=(NOW - FLAP_MEMORY_SECONDS - 1, NOW - 200, NOW - 40),
        n3=(NOW - FLAP_MEMORY_SECONDS - 5,),
    )
    memory = Memory().observe(snap, NOW)
    assert memory.node_downs == {"n2": (NOW - 200, NOW - 40)}
    # Only the first observation reads them: a running controller's memory is its own.
    later = replace(memory, node_downs={}).observe(snap, NOW + 1)
    assert later.node_downs == {}


def test_a_node_down_at_the_first_look_is_a_down_unless_one_was_recorded() -> None:
    # The node whose death restarted the controller: nobody recorded its down.
    snap = snapshot(nodes(n2=NodeState.DOWN, n2_changed=NOW - 30), [])
    assert Memory().observe(with_store(snap), NOW).node_downs == {"n2": (NOW - 30,)}
    # The earlier controller saw it go (its cycle came a little after Swarm's change).
    recorded = with_store(snap, n2=(NOW - 29,))
    assert Memory().observe(recorded, NOW).node_downs == {"n2": (NOW - 29,)}
    # An old down is a different one: both count.
    older = with_store(snap, n2=(NOW - 300,))
    assert Memory().observe(older, NOW).node_downs == {"n2": (NOW - 300, NOW - 30)}
    # A node Swarm only calls unknown (a new Raft leader) has not gone down.
    unknown = snapshot(nodes(n2=NodeState.UNKNOWN, n2_changed=NOW - 30), [])
    assert Memory().observe(with_store(unknown), NOW).node_downs == {}


def mirror(snap: ClusterSnapshot, memory: Memory, now: float) -> tuple[SetMirror | None, Plan]:
    result = plan(
        snapshot=snap,
        policy=Policy.default(),
        memory=memory,
        now=now,
        rules=rules_named("mirror"),
    )
    writes = [a for a in result.actions if isinstance(a, SetMirror)]
    return (writes[0] if writes else None), result


def test_a_down_is_mirrored_once_and_dropped_when_forgotten() -> None:
    ready = {f"n{i}": 0.0 for i in range(1, 5)}
    memory = Memory(node_ready_since=ready, started=True)
    down = snapshot(nodes(n2=NodeState.DOWN), [])
    down = replace(down, mirror=Mirror(config_id="cfg", version=5))
    write, result = mirror(down, memory, NOW)
    assert write is not None and write.saved(DOWNS_PREFIX) == {"n2": encode_downs((NOW,))}
    assert any(d.action is write for d in result.decisions), "every write has a decision"
    # Written: later cycles, the down ageing inside the horizon, write nothing.
    down = apply_actions(down, (write,))
    assert down.mirror is not None and down.mirror.node_downs == {"n2": (NOW,)}
    again, result = mirror(down, result.memory, NOW + 1)
    assert again is None
    aged, result = mirror(down, result.memory, NOW + FLAP_MEMORY_SECONDS - 1)
    assert aged is None
    # Past the horizon memory lets go, and so does the mirror, in one write.
    gone, _ = mirror(down, result.memory, NOW + FLAP_MEMORY_SECONDS + 1)
    assert (
        gone is not None and gone.dropped(DOWNS_PREFIX) == ("n2",) and not gone.saved(DOWNS_PREFIX)
    )


def moves_back(result: Plan) -> bool:
    return any(
        isinstance(a, SetServiceConstraints) and "n3" in a.evicts_from for a in result.actions
    )


def test_a_restart_does_not_make_a_flapping_preferred_owner_trusted_again() -> None:
    """db failed over off node-2, which has gone down four times in ten minutes and has
    been back 25 s. Its flap damping (failback-delay 10 s doubled per down after the
    first: 80 s) holds the failback; a controller that has just restarted must too."""
    db = service("db", replicas=1, labels=FAILED_OVER)
    snap = snapshot(nodes(n2_changed=NOW - 25), [db], [running(db, 3, 1)])
    downs = (NOW - 500, NOW - 300, NOW - 150, NOW - 60)
    fresh = Memory(watches=True)
    # Without the mirror the restarted controller watches a while, then moves db.
    forgetful = owners_only(with_store(snap), fresh, NOW)
    assert not moves_back(forgetful)
    assert moves_back(owners_only(with_store(snap), forgetful.memory, NOW + 16))
    # With it, the move waits for node-2 to have been back 80 s.
    remembering = owners_only(with_store(snap, n2=downs), fresh, NOW)
    held = owners_only(with_store(snap, n2=downs), remembering.memory, NOW + 16)
    assert not moves_back(held)
    assert any("once ready 80 s" in d.reason for d in held.decisions), held.decisions
    assert moves_back(owners_only(with_store(snap, n2=downs), remembering.memory, NOW + 56))
