"""The leader lease's pure logic: labels, takeover rules, and one writer at a time."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.lease import (
    HOLDER_LABEL,
    LIFETIME_LABEL,
    TERM_LABEL,
    Lease,
    LeaseLabelError,
    LeaseView,
    Step,
    decide,
    labels_of,
    lease_from_labels,
    new_lease,
    released_lease,
)

L = 10.0


def rec(holder: str, term: int = 1, at: float = 0.0, lifetime: float = L) -> Lease:
    return new_lease(me=holder, term=term, lifetime=lifetime, wall_now=at)


def test_labels_round_trip_and_absent_labels_are_no_lease() -> None:
    lease = rec("a", term=3, at=1_700_000_000.25)
    assert lease_from_labels(labels_of(lease)) == lease
    assert lease_from_labels({"com.example": "x"}) is None
    assert labels_of(lease)[LIFETIME_LABEL] == "10"


@pytest.mark.parametrize(
    "change",
    [
        {TERM_LABEL: "x"},
        {LIFETIME_LABEL: "-1"},
        {LIFETIME_LABEL: "ten"},
    ],
)
def test_unreadable_labels_are_an_error_naming_the_problem(change: dict[str, str]) -> None:
    labels = {**labels_of(rec("a")), **change}
    with pytest.raises(LeaseLabelError):
        lease_from_labels(labels)
    partial = {HOLDER_LABEL: "a"}
    with pytest.raises(LeaseLabelError, match="missing"):
        lease_from_labels(partial)


def test_no_labels_are_taken_only_after_a_whole_lifetime_unchanged() -> None:
    view = LeaseView().sight(None, unreadable=False, now=100.0)
    verdict = decide(view, me="a", lifetime=L, now=100.0)
    assert verdict.step is Step.WAIT and verdict.retry_at == 110.0
    view = view.sight(None, unreadable=False, now=109.9)
    assert decide(view, me="a", lifetime=L, now=109.9).step is Step.WAIT
    verdict = decide(view.sight(None, unreadable=False, now=110.0), me="a", lifetime=L, now=110)
    assert verdict.step is Step.TAKE and verdict.term == 1


def test_a_renewal_restarts_the_standbys_wait() -> None:
    view = LeaseView().sight(rec("b", at=1), unreadable=False, now=0.0)
    view = view.sight(rec("b", at=2), unreadable=False, now=8.0)  # renewed: a new lease
    assert decide(view, me="a", lifetime=L, now=15.0).step is Step.WAIT
    verdict = decide(view, me="a", lifetime=L, now=18.0)
    assert verdict.step is Step.TAKE and verdict.term == 2
    assert "held by b" in verdict.reason


def test_the_records_lifetime_counts_not_the_readers() -> None:
    view = LeaseView().sight(rec("b", lifetime=30.0), unreadable=False, now=0.0)
    assert decide(view, me="a", lifetime=5.0, now=29.0).step is Step.WAIT
    assert decide(view, me="a", lifetime=5.0, now=30.0).step is Step.TAKE


def test_a_released_lease_is_taken_at_once() -> None:
    released = released_lease(rec("b", term=4), wall_now=5.0)
    view = LeaseView().sight(released, unreadable=False, now=0.0)
    verdict = decide(view, me="a", lifetime=L, now=0.0)
    assert verdict.step is Step.TAKE and verdict.term == 5


def test_the_holder_renews_and_its_lease_runs_from_the_send() -> None:
    mine = rec("a", term=2)
    view = LeaseView().attempt(mine, now=50.0).landed()
    assert view.held_until == 60.0
    assert view.holds(57.9, margin=2.0) and not view.holds(58.0, margin=2.0)
    verdict = decide(view.sight(mine, unreadable=False, now=51), me="a", lifetime=L, now=51)
    assert verdict.step is Step.RENEW and verdict.term == 2


def test_a_paused_holder_stops_by_its_own_clock_before_learning_anything() -> None:
    view = LeaseView().attempt(rec("a"), now=0.0).landed()
    assert view.holds(1.0, margin=2.0)
    # Paused for longer than the lifetime: no read, no write, and yet no permission.
    assert not view.holds(9.0, margin=2.0)


def test_a_write_of_unknown_outcome_is_confirmed_by_reading_it_back() -> None:
    old, new = rec("a", at=1), rec("a", at=2)
    view = LeaseView().attempt(old, now=0.0).landed().attempt(new, now=5.0)
    assert view.held_until == 10.0  # not extended until the write is known to have landed
    view = view.sight(new, unreadable=False, now=6.0)
    assert view.held_until == 15.0 and view.mine == new and view.pending is None
    # Read back unchanged instead: the old lease is still ours.
    view = LeaseView().attempt(old, now=0.0).landed().attempt(new, now=5.0)
    view = view.sight(old, unreadable=False, now=6.0)
    assert view.held_until == 10.0


def test_a_holder_that_sees_another_holder_never_writes_again() -> None:
    view = LeaseView().attempt(rec("a"), now=0.0).landed()
    view = view.sight(rec("b", term=2), unreadable=False, now=1.0)
    assert not view.holds(1.0)
    assert decide(view, me="a", lifetime=L, now=1.0).step is Step.WAIT


def test_wiped_labels_are_written_back_only_while_the_lease_runs() -> None:
    view = LeaseView().attempt(rec("a", term=3), now=0.0).landed()
    verdict = decide(view.sight(None, unreadable=False, now=1), me="a", lifetime=L, now=1)
    assert verdict.step is Step.RENEW and verdict.term == 3
    later = view.sight(None, unreadable=False, now=11.0)
    assert decide(later, me="a", lifetime=L, now=11.0).step is Step.WAIT


def test_another_replica_with_the_same_name_does_not_renew_what_it_never_wrote() -> None:
    view = LeaseView().sight(rec("a"), unreadable=False, now=0.0)
    assert decide(view, me="a", lifetime=L, now=1.0).step is Step.WAIT


# --- one writer at a time, over random schedules --------------------------------------


@dataclass
class Store:
    lease: Lease | None = None
    version: int = 0


@dataclass
class Replica:
    name: str
    ops: list[tuple[float, float, float, float, bool]]
    view: LeaseView = field(default_factory=LeaseView)
    open_since: float | None = None
    spans: list[tuple[float, float]] = field(default_factory=list)

    def change(self, view: LeaseView, t: float) -> None:
        """Switch to `view` at time t, keeping the spans in which writes were allowed."""
        if self.open_since is not None:
            assert self.view.held_until is not None
            self.spans.append((self.open_since, min(t, self.view.held_until - MARGIN)))
            self.open_since = None
        self.view = view
        if view.holds(t, MARGIN):
            self.open_since = t


MARGIN = 2.0


def _simulate(ops: list[tuple[int, float, float, float, float, bool]]) -> list[Replica]:
    """Three replicas read, decide and write through a compare-and-swap store, one
    operation at a time each. Every step can be late by a random amount (a pause, a slow
    network, a lost reply). Returns the replicas with their spans of write permission."""
    store = Store()
    replicas = [Replica(f"r{i}", [o[1:] for o in ops if o[0] == i]) for i in range(3)]
    events: list[tuple[float, int, str, int, object]] = []
    counter = iter(range(10**9))

    def push(t: float, kind: str, idx: int, data: object = None) -> None:
        heapq.heappush(events, (t, next(counter), kind, idx, data))

    def next_op(idx: int, t: float) -> None:
        r = replicas[idx]
        if r.ops:
            push(t + r.ops[0][3], "read", idx)

    for idx in range(3):
        next_op(idx, 0.0)
    end = 0.0
    while events:
        t, _, kind, idx, data = heapq.heappop(events)
        r, end = replicas[idx], max(end, t)
        if kind == "read":  # the store answers now; the replica sees it later
            push(t + r.ops[0][0], "decide", idx, (store.lease, store.version))
        elif kind == "decide":
            lease, version = data  # type: ignore[misc]
            r.change(r.view.sight(lease, unreadable=False, now=t), t)
            verdict = decide(r.view, me=r.name, lifetime=L, now=t)
            if verdict.step is Step.WAIT:
                r.ops.pop(0)
                next_op(idx, t)
                continue
            mine = new_lease(me=r.name, term=verdict.term, lifetime=L, wall_now=t)
            r.change(r.view.attempt(mine, now=t), t)
            push(t + r.ops[0][1], "land", idx, (mine, version))
        elif kind == "land":
            mine, version = data  # type: ignore[misc]
            ok = store.version == version
            if ok:
                store.lease, store.version = mine, store.version + 1
            push(t + r.ops[0][2], "reply", idx, ok)
        else:  # reply
            lost = r.ops[0][4]
            if data and not lost:
                r.change(r.view.landed(), t)
            elif not data:
                r.change(r.view.refused(), t)
            r.ops.pop(0)
            next_op(idx, t)
    for r in replicas:
        r.change(r.view, end + 100.0)
    return replicas


# Mostly quick steps, sometimes a pause longer than the lifetime; few lost replies.
quick = st.floats(0, 0.5)
delay = st.one_of(quick, quick, quick, quick, quick, st.floats(0, 2 * L))
gap = st.one_of(st.floats(0, L / 5), st.floats(0, L / 5), st.floats(0, 2 * L))
lost = st.sampled_from([False, False, False, False, True])
op = st.tuples(st.integers(0, 2), delay, delay, delay, gap, lost)


@settings(max_examples=200, deadline=None)
@given(st.lists(op, min_size=30, max_size=80))
def test_no_two_replicas_may_write_at_the_same_time(ops) -> None:  # type: ignore[no-untyped-def]
    replicas = _simulate(ops)
    for one, other in itertools.combinations(replicas, 2):
        for a1, b1 in one.spans:
            for a2, b2 in other.spans:
                overlap = max(a1, a2) < min(b1, b2)
                assert not overlap, f"{one.name} [{a1}, {b1}) and {other.name} [{a2}, {b2})"


def test_the_simulation_does_elect_a_writer_and_hand_over() -> None:
    # r0 takes the free lease after a lifetime, then pauses 15 s mid-read; r1 takes over.
    ops = [(0, 0.1, 0.1, 0.1, 0.0, False), (0, 0.1, 0.1, 0.1, 11.0, False)]
    ops += [(1, 0.1, 0.1, 0.1, 0.5, False)] * 6
    ops += [(0, 15.0, 0.1, 0.1, 0.0, False)] + [(1, 0.1, 0.1, 0.1, 3.0, False)] * 8
    replicas = _simulate(ops)
    assert replicas[0].spans and replicas[1].spans
    assert max(b for _, b in replicas[0].spans) <= min(a for a, _ in replicas[1].spans)
