"""`swarm-placement start SERVICE`: exit codes and messages (the write is tested apart)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from controller.adapters.docker_read import ServiceNotFoundError
from controller.adapters.engine import ConflictError, DockerUnavailableError, NotAManagerError
from controller.adapters.start import InRolloutError, NothingToStartError, Started
from controller.cli import start_cmd


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="swarm-placement")
    start_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["start", *argv])
    code: int = args.handler(args)
    return code


def engine(monkeypatch: pytest.MonkeyPatch, outcome: Started | Exception) -> list[str]:
    asked: list[str] = []

    def start(client: Any, name: str) -> Started:
        asked.append(name)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(start_cmd, "connect", object)
    monkeypatch.setattr(start_cmd, "check_manager", lambda client: None)
    monkeypatch.setattr(start_cmd, "start_service", start)
    return asked


def test_start_prints_the_change(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked = engine(monkeypatch, Started(name="batch", before=2, after=3))
    assert run("batch") == 0
    assert asked == ["batch"]
    assert capsys.readouterr().out == "started batch: replicas 2 -> 3\n"


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ServiceNotFoundError("no service named 'nope'"), 2),
        (NothingToStartError("service batch is not held: nothing to start"), 2),
        (NotAManagerError("the Docker engine at x is a swarm worker"), 2),
        (ConflictError("service batch changed"), 1),
        (InRolloutError("service batch is in a rollout (paused): rollout paused by Swarm"), 1),
        (DockerUnavailableError("cannot reach the Docker engine"), 1),
    ],
)
def test_failures_exit_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: Exception,
    code: int,
) -> None:
    engine(monkeypatch, error)
    assert run("batch") == code
    err = capsys.readouterr().err
    assert err.startswith("start: ") and str(error) in err
