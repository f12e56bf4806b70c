"""A move's cooldown and "never straight back" survive a restart and a lease takeover:
the services' recent moves live in the mirror, as the nodes' recent downs do.

Each test runs the real plan(): the controller that moved (its memory as the reconciler
leaves it after the write), its next cycle's mirror rule writing the mirror, then a new
controller (empty memory) or a standby reading the mirror back.
"""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import SetMirror, SetServiceConstraints
from controller.core.apply import apply_actions
from controller.core.memory import Memory
from controller.core.mirror import MOVES_PREFIX, Mirror
from controller.core.model import ClusterSnapshot
from controller.core.plan import Plan, plan
from controller.core.rules import rules_named
from controller.policy import Policy, RebalanceMode

from .builders import running, snapshot
from .rebalance_builders import layout, nodes, policy, rebalancing
from .rebalance_builders import run as rebalance_run
from .test_owners import STABLE, four_nodes, managed, owners_only

NOW = 1_000_000.0


def mirrored(snap: ClusterSnapshot, memory: Memory, now: float, pol: Policy) -> ClusterSnapshot:
    """`snap` after the mirror rule's cycle at `now` wrote the mirror (if it did)."""
    result = plan(snapshot=snap, policy=pol, memory=memory, now=now, rules=rules_named("mirror"))
    writes = tuple(a for a in result.actions if isinstance(a, SetMirror))
    return apply_actions(snap, writes)


def mirror_write(
    snap: ClusterSnapshot, memory: Memory, now: float, pol: Policy
) -> SetMirror | None:
    result = plan(snapshot=snap, policy=pol, memory=memory, now=now, rules=rules_named("mirror"))
    writes = [a for a in result.actions if isinstance(a, SetMirror)]
    assert all(any(d.action is w for d in result.decisions) for w in writes), "a write, a decision"
    return writes[0] if writes else None


def evicting(result: Plan) -> list[SetServiceConstraints]:
    return [a for a in result.actions if isinstance(a, SetServiceConstraints) and a.evicts_from]


def spread_wants_a_move() -> tuple[ClusterSnapshot, list[str]]:
    """web and api share anti-affinity `front` and both run on node-2: a move is wanted."""
    web = managed("web", 2, anti_affinity="front")
    api = managed("api", 1, anti_affinity="front")
    snap = snapshot(
        four_nodes(), [web, api], [running(web, 2, 1), running(web, 3, 2), running(api, 2, 1)]
    )
    return replace(snap, mirror=Mirror(config_id="cfg", version=5)), [web.id, api.id]


def test_a_restarted_controller_keeps_the_cooldown_of_a_move_made_just_before() -> None:
    snap, ids = spread_wants_a_move()
    pol = Policy.default()  # move-cooldown 300 s
    moved = STABLE
    for service_id in ids:  # as the reconciler notes the move it has just written
        moved = moved.note_move(service_id, NOW - 10, ("n1",))
    assert evicting(owners_only(snap, moved, NOW)) == [], "the running controller waits"
    after = mirrored(snap, moved, NOW - 9, pol)
    # The controller restarts: a new one watches the swarm a while (at most the settle
    # time, 15 s), then would move at once without the mirror.
    fresh = owners_only(after, Memory(watches=True), NOW).memory
    for now in (NOW + 1, NOW + 30, NOW + 280):
        later = owners_only(after, fresh, now)
        assert evicting(later) == [], f"moved {now - NOW + 10:.0f} s after the last move"
    assert any("cooldown 300 s" in d.reason for d in later.decisions), later.decisions
    # Past the cooldown the move goes, as it would have without a restart.
    assert evicting(owners_only(after, fresh, NOW + 291))


def straight_back_wanted() -> tuple[ClusterSnapshot, Policy, str]:
    """Rebalancing's load move took web's tasks off node-3 30 s ago; the count is now
    skewed towards node-3, and a periodic round would take them straight back."""
    web = rebalancing("web", 6)
    ns = nodes()
    snap = snapshot(ns, [web], layout(web, [3, 3, 0]))
    snap = replace(snap, mirror=Mirror(config_id="cfg", version=5))
    return snap, policy(mode=RebalanceMode.PERIODIC, cooldown=30.0, interval=10.0), web.id


def test_a_restarted_controller_does_not_move_tasks_straight_back() -> None:
    snap, pol, web = straight_back_wanted()
    moved = Memory(node_ready_since={f"n{i}": 0.0 for i in (1, 2, 3)}, started=True)
    moved = moved.note_move(web, NOW - 30, ("n3",))
    after = mirrored(snap, moved, NOW - 29, pol)
    memory = Memory(watches=True)
    # Within twice the cooldown (until NOW + 30), once node-3 has settled for the new
    # controller (NOW + 15), a periodic round must not take the tasks back to node-3.
    for now in range(int(NOW), int(NOW) + 30):
        result = rebalance_run(after, memory, now=float(now), pol=pol)
        assert result.actions == (), f"moved {now - NOW + 30:.0f} s after leaving node-3"
        memory = result.memory
    assert any("straight back to node-3" in d.reason for d in result.decisions)
    # Once that has passed, the round moves them, as it would have without a restart.
    assert rebalance_run(after, memory, now=NOW + 30, pol=pol).actions


def test_a_standby_that_takes_over_knows_the_leader_s_last_move() -> None:
    """A standby plans every cycle but never writes, so its memory never notes a move:
    it learns the leader's moves from the mirror at every observation."""
    snap, ids = spread_wants_a_move()
    pol = Policy.default()
    leader = STABLE
    for service_id in ids:
        leader = leader.note_move(service_id, NOW - 10, ("n1",))
    after = mirrored(snap, leader, NOW - 9, pol)
    took_over = owners_only(after, STABLE, NOW)  # STABLE: observing for long, never wrote
    assert evicting(took_over) == []
    assert any("cooldown 300 s" in d.reason for d in took_over.decisions)


def test_a_move_is_mirrored_once_and_dropped_past_its_window() -> None:
    """An idle cluster writes nothing: a move is written once, and dropped in one write
    once both its cooldown and its "never straight back" window have passed."""
    snap, ids = spread_wants_a_move()
    pol = Policy.default()
    web = ids[0]
    memory = STABLE.note_move(web, NOW, ("n1",))
    write = mirror_write(snap, memory, NOW + 0.5, pol)
    assert write is not None and set(write.saved(MOVES_PREFIX)) == {web}
    snap = apply_actions(snap, (write,))
    assert snap.mirror is not None and web in snap.mirror.moves
    for now in (NOW + 1, NOW + 300, NOW + 599):
        assert mirror_write(snap, memory, now, pol) is None, now
    gone = mirror_write(snap, memory, NOW + 601, pol)
    assert (
        gone is not None and gone.dropped(MOVES_PREFIX) == (web,) and not gone.saved(MOVES_PREFIX)
    )
    assert mirror_write(apply_actions(snap, (gone,)), memory, NOW + 602, pol) is None
    # A new move of the same service is written again.
    again = mirror_write(snap, memory.note_move(web, NOW + 700), NOW + 701, pol)
    assert again is not None and set(again.saved(MOVES_PREFIX)) == {web}


def test_unreadable_moves_are_dropped_and_a_future_one_counts_from_now() -> None:
    mirror = Mirror(
        moves={
            "s-a": "nope",
            "s-b": '{"at": "x"}',
            "s-c": '{"at": 900.5, "left": ["n1"], "left-at": 900.5}',
            "s-d": '{"at": 5000000000.0}',
        }
    )
    snap = replace(snapshot(four_nodes(), []), mirror=mirror)
    memory = Memory().observe(snap, NOW)
    assert memory.last_move == {"s-c": 900.5, "s-d": NOW}
    assert memory.left == {"s-c": (("n1",), 900.5)}
