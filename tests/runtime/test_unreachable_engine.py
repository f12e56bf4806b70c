"""A long-running controller waits for an unreachable engine, saying where, with backoff."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import docker
import pytest

from controller.adapters.docker_api import connect
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
