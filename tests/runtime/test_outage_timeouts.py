"""No cycle hangs through a Raft election: short requests and fast retries while the
engine is away, the usual timeout back once a cycle succeeds.

The controller's log through an election on a real swarm: `cycle failed, the Docker
engine is unreachable: lost the Docker engine: no answer within 10 s`, twice, so its first
cycle after the election came up to 10 s after the first write Swarm accepted."""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import docker
import pytest

from controller.adapters.engine import (
    REQUEST_SECONDS,
    DockerUnavailableError,
    _call,
    set_request_timeout,
)
from controller.runtime.cycle_retry import FAST_FOR_SECONDS, CycleRetry
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.outage_timeouts import OUTAGE_REQUEST_SECONDS, OutageTimeouts
from controller.runtime.policy_source import PolicySource


@dataclass
class ElectingEngine:
    """A fake manager amid an election: a request sent before `elected_at` is taken and
    never answered (the client gives up at its timeout); after it, answered at once."""

    elected_at: float
    timeout: float = REQUEST_SECONDS

    def cycle(self, start: float) -> tuple[bool, float]:
        """Whether a cycle started at `start` succeeds, and when it ends."""
        if start >= self.elected_at:
            return True, start + 0.01
        return False, start + self.timeout


def first_cycle_after(elected_at: float) -> float:
    """When the first cycle after the election starts, the worker's retry and timeouts
    driving the fake engine from a first failure at 0 (the election's start)."""
    engine = ElectingEngine(elected_at)
    retry = CycleRetry()

    def apply(seconds: float) -> None:
        engine.timeout = seconds

    timeouts = OutageTimeouts(apply, usual=REQUEST_SECONDS)
    start = 0.0
    while True:
        ok, end = engine.cycle(start)
        if ok:
            return start
        delay = retry.failed("engine-unreachable", end)
        timeouts.failed(retry, "engine-unreachable", end)
        start = end + delay


def test_the_first_cycle_after_an_election_starts_within_half_a_second() -> None:
    # Elections measured on a real swarm took 10.5 to 24 s: every 10 ms of that range.
    for ms in range(10_500, 24_000, 10):
        elected = ms / 1000
        assert first_cycle_after(elected) - elected <= 0.5, elected


def test_a_long_outage_gets_the_usual_timeout_back() -> None:
    """An engine slow rather than gone must not be cut short for good."""
    applied: list[float] = []
    retry = CycleRetry()
    timeouts = OutageTimeouts(applied.append, usual=REQUEST_SECONDS)
    retry.failed("engine-unreachable", 0.0)
    timeouts.failed(retry, "engine-unreachable", 0.0)
    assert applied == [OUTAGE_REQUEST_SECONDS]
    retry.failed("engine-unreachable", FAST_FOR_SECONDS + 1)
    timeouts.failed(retry, "engine-unreachable", FAST_FOR_SECONDS + 1)
    assert applied == [OUTAGE_REQUEST_SECONDS, REQUEST_SECONDS]
    retry.failed("unexpected", FAST_FOR_SECONDS + 2)  # a bug is no outage
    timeouts.failed(retry, "unexpected", FAST_FOR_SECONDS + 2)
    assert applied[-1] == REQUEST_SECONDS


@pytest.fixture
def silent_engine() -> Iterator[str]:
    """A TCP address that takes connections and never answers, as a manager amid an
    election may."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not done.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    done.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_a_silent_engine_s_request_is_given_up_at_the_short_timeout(silent_engine: str) -> None:
    client = docker.DockerClient(base_url=silent_engine, version="1.41", timeout=10)
    retry = CycleRetry()
    timeouts = OutageTimeouts(lambda s: set_request_timeout(client, s), usual=REQUEST_SECONDS)
    retry.failed("engine-unreachable", 0.0)
    timeouts.failed(retry, "engine-unreachable", 0.0)
    with pytest.raises(DockerUnavailableError, match=f"no answer within {OUTAGE_REQUEST_SECONDS}"):
        _call(client.api.nodes)
    timeouts.succeeded()
    assert client.api.timeout == REQUEST_SECONDS
    client.close()


def test_the_worker_shortens_requests_after_an_outage_s_failure_and_restores_them() -> None:
    controller = Controller(
        RunConfig(), PolicySource(None), out=io.StringIO(), handle_signals=False
    )
    applied: list[float] = []
    outcomes: list[BaseException | None] = [DockerUnavailableError("lost the engine"), None]

    class Done(BaseException):
        pass

    class Reconciler:
        planned = ()

        def reconcile(self, reasons: set[str]) -> object:
            if not outcomes:
                raise Done
            failure = outcomes.pop(0)
            if failure is not None:
                raise failure
            return _Result()

    controller.reconciler = Reconciler()  # type: ignore[assignment]
    controller._record = lambda result, seconds: None  # type: ignore[method-assign]
    controller.view = None

    async def main() -> None:
        controller.trigger.fire("start")
        with anyio.move_on_after(10):
            await controller._worker(OutageTimeouts(applied.append, usual=REQUEST_SECONDS))

    with pytest.raises(Done):
        anyio.run(main)
    assert applied == [OUTAGE_REQUEST_SECONDS, REQUEST_SECONDS]


class _Result:
    wants_another = True  # so the worker asks for another cycle at once


def test_a_manager_s_failing_probe_shortens_requests_before_any_cycle_fails() -> None:
    """The first cycle of an election went out with the usual timeout and hung 10 s (seen
    on a real swarm, `bench/failover.py --fault leader`): a manager's failing probe now
    shortens the requests first, once per failure."""
    applied: list[float] = []
    timeouts = OutageTimeouts(applied.append, usual=REQUEST_SECONDS)
    timeouts.manager_unreached(100.0)
    assert applied == [OUTAGE_REQUEST_SECONDS]
    timeouts.succeeded()  # the swarm still had its leader: a follower manager died
    timeouts.manager_unreached(100.0)  # the same failure, said again
    assert applied == [OUTAGE_REQUEST_SECONDS, REQUEST_SECONDS]
    timeouts.manager_unreached(None)
    timeouts.manager_unreached(130.0)  # a new failure
    assert applied[-1] == OUTAGE_REQUEST_SECONDS


def test_the_liveness_gatherer_says_since_when_a_manager_s_probe_fails() -> None:
    from tests.runtime.test_liveness import FakeClient, make  # noqa: PLC0415

    client, clock, fired = FakeClient(), [100.0], []
    client.api.peers = [{"Name": "node-1", "IP": "10.0.0.1"}, {"Name": "node-2", "IP": "10.0.0.2"}]
    worker_down = make({"10.0.0.1"}, client, clock, fired)  # node-2, a worker, fails
    worker_down.poll_once()
    assert worker_down.manager_unreached() is None
    manager_down = make({"10.0.0.2"}, client, clock, fired)  # node-1, the manager, fails
    manager_down.poll_once()
    assert manager_down.manager_unreached() == 100.0
