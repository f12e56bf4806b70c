"""A failed cycle's retry: at once through a Raft election, backing off for a bug."""

from __future__ import annotations

from controller.runtime.cycle_retry import FAST_FOR_SECONDS, FAST_SECONDS, MAX_SECONDS, CycleRetry


def _next_cycle_after(retry: CycleRetry, cause: str, outage: float) -> float:
    """Fail cycles from 0 until `outage` ends; when the first cycle after it starts."""
    now = 0.0
    while now < outage:
        now += retry.failed(cause, now)
    return now


def test_the_first_cycle_after_an_election_comes_within_half_a_second() -> None:
    # 13 s without a leader (bench/failover.py --fault leader): a backoff doubling from
    # 0.5 s would next try at 15.5 s, 2.5 s after Swarm takes writes again.
    for cause in ("swarm-error", "engine-unreachable"):
        assert _next_cycle_after(CycleRetry(), cause, 13.0) - 13.0 <= 0.5


def test_a_long_outage_and_a_bug_back_off() -> None:
    retry = CycleRetry()
    now, waits = 0.0, []
    while now < FAST_FOR_SECONDS + 60:
        waits.append(retry.failed("engine-unreachable", now))
        now += waits[-1]
    assert set(waits[:100]) == {FAST_SECONDS}
    assert waits[-3:] == [MAX_SECONDS] * 3, "past the fast minute it backs off"
    bug = CycleRetry()
    assert [bug.failed("unexpected", t) for t in (0, 1, 2, 3, 4, 5)] == [0.5, 1, 2, 4, 8, 10]


def test_an_outage_is_said_once_while_it_says_the_same() -> None:
    retry = CycleRetry()
    said = [retry.should_say("no leader", t / 2) for t in range(30)]  # 15 s every 0.5 s
    assert said.count(True) == 2, "the first, and again after 10 s"
    assert retry.should_say("engine gone", 15.0), "a changed failure is said"
    retry.succeeded()
    assert retry.should_say("engine gone", 15.5), "a new outage is said again"
    assert retry.failed("unexpected", 16.0) == 0.5, "and backs off from the start"
