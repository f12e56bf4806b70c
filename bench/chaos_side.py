"""Chaos arms side by side: one schedule, each arm on its own sandbox and in a process of
its own, all starting the schedule at the same moment.

The suite's gross-harm check (bench/chaos_ci.py) and the protocol's triples
(bench/chaos_pairs.py) run their arms this way. Run at once, the arms share the
machine's load, which on a busy machine is most of the noise between two runs: an
arm that runs while other work peaks and one that runs after would differ for that
alone. Each arm warms up on its own (deploys, waits until quiet), then waits at a
barrier for the others, so that t = 0, and every fault after it, falls at the same
moment in every arm.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from chaos_run import run_once
from chaos_schedule import Event

# How long an arm waits at the barrier for the others' warm-up (each is limited to
# chaos_run.SETUP_LIMIT per deploy, two deploys, and a sandbox to bring up first).
BARRIER_LIMIT = 600.0


def _stop(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _init_worker() -> None:
    # A SIGTERM to a worker takes its arm down the way an exception would: the sandbox
    # is torn down and the controller stopped (chaos_run.run_once's `with` and `finally`).
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; see `stop_workers`


def _arm(name: str, events: list[Event], arm: str, work: Path, start: Any, heartbeat: float,
         barrier: Any) -> dict[str, Any]:  # fmt: skip
    try:
        return run_once(name, events, arm=arm, work=work, heartbeat=heartbeat, start=start,
                        ready=lambda: barrier.wait(BARRIER_LIMIT))  # fmt: skip
    except BaseException:
        barrier.abort()  # the others stop waiting for an arm that will not come
        raise


def side_by_side(
    arms: list[str],
    names: list[str],
    events: list[Event],
    start: Mapping[str, Iterable[str]],
    work: Path,
    *,
    heartbeat: float = 1.0,
    pool_out: list[ProcessPoolExecutor] | None = None,
) -> list[dict[str, Any] | Exception]:
    """Run `events` in each arm at once, the i-th arm on a sandbox named `names[i]`.
    Returns each arm's figures (chaos_run.summarize), or the exception it raised: one
    arm's failure does not hide what the others measured. `pool_out`, if given, gets
    the pool, so that a caller stopping early can stop its workers."""
    ctx = multiprocessing.get_context("spawn")  # a forked copy would inherit our threads
    with ctx.Manager() as manager:
        barrier = manager.Barrier(len(arms))
        with ProcessPoolExecutor(len(arms), mp_context=ctx, initializer=_init_worker) as pool:
            if pool_out is not None:
                pool_out.append(pool)
            futures = [
                pool.submit(
                    _arm, name, events, arm, work / f"{i}-{arm}", dict(start), heartbeat, barrier
                )
                for i, (arm, name) in enumerate(zip(arms, names, strict=True))
            ]
            out: list[dict[str, Any] | Exception] = []
            for future in futures:
                try:
                    out.append(future.result())
                except Exception as exc:  # kept, and raised by the caller
                    out.append(exc)
            return out


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """SIGTERM each worker: each tears its sandbox down and its arm ends with an error."""
    for process in list(getattr(pool, "_processes", {}).values()):
        if process.is_alive():
            process.terminate()
