"""Suspicion: two agreeing signals for long enough, never one alone, and a storm is a panic."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.health.assess import assess_nodes
from controller.core.health.suspicion import suspect_nodes
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, NodeState
from controller.core.outside_inputs import LivenessSignal
from controller.policy import ControllerSettings, Policy

from .builders import node, snapshot


def gone(n: int, source: str, since: float = 100.0) -> LivenessSignal:
    return LivenessSignal(f"n{n}", source, False, since, f"{source} lost node-{n}")


def alive(n: int, source: str, since: float = 50.0) -> LivenessSignal:
    return LivenessSignal(f"n{n}", source, True, since)


def four(
    *signals: LivenessSignal, down: int | None = None, unknown: int | None = None
) -> ClusterSnapshot:
    def state(i: int) -> NodeState:
        if i == down:
            return NodeState.DOWN
        return NodeState.UNKNOWN if i == unknown else NodeState.READY

    nodes = [node(i, manager=i == 1, state=state(i)) for i in (1, 2, 3, 4)]
    return replace(snapshot(nodes, []), liveness=signals)


def test_two_agreeing_signals_make_a_suspicion_once_they_agreed_long_enough() -> None:
    snap = four(gone(3, "gossip", since=100.0), gone(3, "probe", since=99.0))
    early, notes = suspect_nodes(snap, suspect_after=1.0, now=100.5)
    assert early == {}
    assert [d.outcome for d in notes] == ["watch"]
    later, notes = suspect_nodes(snap, suspect_after=1.0, now=101.0)
    assert set(later) == {"n3"}
    assert later["n3"].sources == ("gossip", "probe")
    (note,) = notes
    assert note.outcome == "suspect" and "gossip" in note.reason and "probe" in note.reason


def test_one_lost_signal_never_makes_a_suspicion() -> None:
    for lone in (gone(3, "probe"), gone(3, "gossip"), gone(3, "agent")):
        snap = four(lone, alive(3, "gossip" if lone.source != "gossip" else "probe"))
        suspected, notes = suspect_nodes(snap, suspect_after=0.0, now=1000.0)
        assert suspected == {}
        assert [d.outcome for d in notes] == ["watch"]
        assert "one lost signal" in notes[0].reason


def test_more_signals_alive_than_gone_is_no_suspicion() -> None:
    snap = four(gone(3, "gossip"), gone(3, "agent"), alive(3, "probe"), alive(3, "other"))
    assert suspect_nodes(snap, suspect_after=0.0, now=1000.0)[0] == {}
    two_of_three = four(gone(3, "gossip"), gone(3, "agent"), alive(3, "probe"))
    assert set(suspect_nodes(two_of_three, suspect_after=0.0, now=1000.0)[0]) == {"n3"}


def test_a_node_swarm_marks_down_is_confirmed_not_suspected() -> None:
    snap = four(gone(3, "gossip"), gone(3, "probe"), down=3)
    assert suspect_nodes(snap, suspect_after=0.0, now=1000.0) == ({}, [])


def policy(suspect_after: float = 1.0, share: float = 0.34) -> Policy:
    return replace(
        Policy.default(),
        controller=ControllerSettings(
            suspect_after_seconds=suspect_after, health_panic_threshold=share
        ),
    )


def test_the_assessment_carries_suspicions_within_the_panic_share() -> None:
    snap = four(gone(3, "gossip"), gone(3, "probe"))
    health = assess_nodes(snapshot=snap, policy=policy(), memory=Memory(), now=200.0)
    assert set(health.suspected) == {"n3"}
    assert health.panic is None


def test_a_storm_of_suspicions_is_a_panic_and_none_is_acted_on() -> None:
    # The controller's own network cut: every other node looks gone at once.
    signals = [s for n in (2, 3, 4) for s in (gone(n, "gossip"), gone(n, "probe"))]
    health = assess_nodes(snapshot=four(*signals), policy=policy(), memory=Memory(), now=200.0)
    assert health.suspected == {}
    assert health.panic is not None
    ignored = [d for d in health.decisions if (d.rule, d.outcome) == ("suspicion", "ignore")]
    assert {d.subject for d in ignored} == {"node node-2", "node node-3", "node node-4"}


def test_suspicions_and_health_reports_share_one_panic_budget() -> None:
    # One suspicion is within 0.34 of 4 ready nodes (1 node); a second is a storm.
    signals = [s for n in (3, 4) for s in (gone(n, "gossip"), gone(n, "probe"))]
    health = assess_nodes(snapshot=four(*signals), policy=policy(), memory=Memory(), now=200.0)
    assert health.panic is not None and health.suspected == {}
    wide = assess_nodes(
        snapshot=four(*signals), policy=policy(share=0.5), memory=Memory(), now=200.0
    )
    assert set(wide.suspected) == {"n3", "n4"}


SOURCES = ("gossip", "probe", "agent")


@st.composite
def signal_sets(draw: st.DrawFn) -> tuple[ClusterSnapshot, float]:
    signals = []
    for n in (1, 2, 3, 4):
        for source in draw(st.lists(st.sampled_from(SOURCES), unique=True)):
            since = draw(st.floats(min_value=0, max_value=100))
            signals.append(LivenessSignal(f"n{n}", source, draw(st.booleans()), since))
    down = draw(st.sampled_from([None, 2, 3]))
    unknown = draw(st.sampled_from([None, 3, 4]))  # after a Raft leadership change
    return four(*signals, down=down, unknown=unknown), draw(st.floats(min_value=0, max_value=10))


@settings(max_examples=200, deadline=None)
@given(signal_sets())
def test_every_suspicion_is_a_node_swarm_has_not_given_up_with_two_agreeing_signals(
    case: tuple[ClusterSnapshot, float],
) -> None:
    snap, suspect_after = case
    suspected, _ = suspect_nodes(snap, suspect_after=suspect_after, now=110.0)
    nodes = snap.node_by_id
    for node_id, suspicion in suspected.items():
        assert nodes[node_id].state in (NodeState.READY, NodeState.UNKNOWN)
        gone = [s for s in snap.liveness if s.node_id == node_id and not s.alive]
        alive = [s for s in snap.liveness if s.node_id == node_id and s.alive]
        assert len(gone) >= 2 and len(gone) > len(alive)
        assert 110.0 - max(s.since for s in gone) >= suspect_after
        assert set(suspicion.sources) == {s.source for s in gone}
    # One lost signal, whatever the others say, never makes a suspicion.
    lone = [n for n in nodes if sum(1 for s in snap.liveness if s.node_id == n and not s.alive) < 2]
    assert not set(lone) & set(suspected)
