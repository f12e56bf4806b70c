"""Differential chaos on real swarms: the controller does no gross harm.

One fixed-seed fault schedule (bench/chaos_schedule.py) runs on two fresh 4-node
sandboxes at once, each in a process of its own, both warmed up to the placement the
seed draws: once with Swarm alone, once with the controller as a real process
(bench/chaos_ci.py). Side by side, the machine's load weighs on both alike.

One such pair cannot show the controller never worse than Swarm alone (the protocol of
bench/chaos-protocol.md does, over many longer pairs); it can fail for gross harm, and
it does, whatever the reason: a write to the unmanaged service, a budget overrun after
a controller write that could have caused it, or a service that lost more than two runs
of Swarm alone ever differ by, as measured by the A/A pairs kept in
bench/results/chaos-ci/ (their 99th percentile). Nothing is excused: a pair whose
managers were silent for a while is judged like any other.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import chaos_protocol as protocol
from chaos_app import SERVICES, UNMANAGED
from chaos_ci import MINUTES, SEED, calibration, gross_harm, limit, side_by_side
from chaos_report import CONVERGE_LIMIT, comparable, losses, table, timeline
from chaos_schedule import NODE_FAULTS, PAIRED, SINGLE, make_schedule

# The limit is a 99th percentile: fewer A/A pairs than this would make it the largest
# of a handful, and the check fail on noise alone.
ENOUGH_CALIBRATION = 20


def test_the_schedule_is_one_per_seed_and_has_every_fault() -> None:
    events = make_schedule(SEED, MINUTES)
    assert events == make_schedule(SEED, MINUTES)
    assert events != make_schedule(SEED + 1, MINUTES)
    kinds = {e.kind for e in events}
    assert set(PAIRED) | set(PAIRED.values()) | set(SINGLE) <= kinds
    assert set(NODE_FAULTS) <= kinds
    assert all(e.at < MINUTES * 60 - 9 for e in events)


def test_the_gross_harm_limit_is_calibrated_from_enough_a_a_pairs() -> None:
    pairs = calibration()
    assert len(pairs) >= ENOUGH_CALIBRATION
    # This check's own pairs, and the protocol's registered triples (their A/A pair).
    own = [p for p in pairs if "left" in p["arms"]]
    triples = [p for p in pairs if "first" in p["arms"]]
    assert own and all(p["seed"] == SEED and p["minutes"] == MINUTES for p in own)
    assert all(p["protocol"] == protocol.NAME and p["minutes"] == protocol.MINUTES
               for p in triples)  # fmt: skip
    assert 0 < limit(pairs) < 5


@pytest.mark.swarm
@pytest.mark.slow
@pytest.mark.alone
def test_with_the_controller_no_service_comes_to_gross_harm(
    new_sandbox_name: Callable[[str], str], tmp_path: Path
) -> None:
    assert UNMANAGED, "the application must have an unmanaged service to check"
    most = limit(calibration())
    events = make_schedule(SEED, MINUTES)
    swarm, ctl = side_by_side(
        ["alone", "controller"], [new_sandbox_name("cs"), new_sandbox_name("cc")], tmp_path
    )
    harm = gross_harm(swarm, ctl, most)
    report = (
        "\n".join(e.describe() for e in events)
        + "\n\n"
        + table(swarm, ctl)
        + "\n\n"
        + losses(swarm, ctl)
        + "\n\nshort (from, to, replicas) and why tasks waited:\n"
        + "\n".join(
            f"{name} {label}: {run['services'][name]['short']} {run['services'][name]['waiting']}"
            for name in (s.name for s in SERVICES)
            for label, run in (("swarm", swarm), ("controller", ctl))
        )
        + "\n\ncontroller actions:\n"
        + "\n".join(str(d) for d in ctl["decisions"])
        + "\n\nas it happened, Swarm alone:\n"
        + timeline(swarm)
        + "\n\nas it happened, with the controller:\n"
        + timeline(ctl)
        + f"\n\ngross harm (A/A limit {most:.2f}): {harm or 'none'}"
        + f"\nnot comparable: {comparable(swarm, ctl) or 'nothing'}"
    )
    print(report)

    # The measurement itself: Swarm alone writes nothing, so a write seen there would be
    # the observer's error; every scheduled event was done in both runs; both started
    # from the placement the seed draws.
    assert sum(s["writes"] for s in swarm["services"].values()) == 0, report
    assert swarm["node_writes"] == 0, report
    assert [why for why in comparable(swarm, ctl) if "was not done" in why] == [], report
    for run in (swarm, ctl):
        assert run["observer_errors"] == [], report
        assert run["warm_up"]["as_planned"], report
        assert run["converged_after"] is not None, report
        assert run["converged_after"] <= CONVERGE_LIMIT, report

    assert harm == [], report
