"""A long-running controller waits for an unreachable engine, saying where, with backoff."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import docker
import pytest

from controller.adapters.engine import TransientError, connect
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.policy_source import PolicySource


def test_unreachable_engine_is_retried_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    attempts = 0

    def counting_connect() -> docker.DockerClient:
        nonlocal attempts
        attempts += 1
        return connect()

    out = io.StringIO()
    controller = Controller(
        RunConfig(duration=3.0),
        PolicySource(None),
        out=out,
        client_factory=counting_connect,
        handle_signals=False,
    )
    anyio.run(controller.run)  # returns after --for 3 s, still waiting for the engine
    assert attempts >= 3, "it must keep trying while running"
    assert f"cannot reach the Docker engine at unix://{tmp_path}/none.sock" in out.getvalue()


class _Done(BaseException):
    pass


def test_a_failed_cycle_never_ends_the_controller() -> None:
    """A manager amid a Raft election answers 5xx, and a bug can raise anything: the
    worker says so, counts it, backs off and plans again from a fresh observation."""
    out = io.StringIO()
    controller = Controller(RunConfig(), PolicySource(None), out=out, handle_signals=False)
    failures = [TransientError("the swarm does not have a leader"), RuntimeError("a bug")]
    calls: list[set[str]] = []

    class Reconciler:
        def reconcile(self, reasons: set[str]) -> object:
            calls.append(reasons)
            if failures:
                raise failures.pop(0)
            raise _Done  # not an Exception: it ends the worker, as a cancellation would

    controller.reconciler = Reconciler()  # type: ignore[assignment]

    async def main() -> None:
        controller.trigger.fire("start")
        with anyio.move_on_after(10):
            await controller._worker()

    with pytest.raises(_Done):
        anyio.run(main)
    assert len(calls) == 3 and calls[1] == {"retry"}
    said = out.getvalue()
    assert "cycle failed, the swarm answered with an error it may recover from" in said
    assert "cycle failed, unexpectedly: a bug" in said
    errors = controller.metrics.cycle_errors
    assert errors.labels("swarm-error")._value.get() == 1
    assert errors.labels("unexpected")._value.get() == 1
