"""Priorities and preemption on the real 3-node session swarm (2 `slot`s per node).

Every service reserves one slot (or more), so the swarm holds 6 tasks at most and Swarm
itself leaves the rest pending for "insufficient resources". Tasks stop within 1 s
(`stop_grace_seconds=1`), whatever their command does with SIGTERM.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from controller.core.replicas import BASE_LABEL, OPERATION_LABEL, REPLICA_RECORD_LABELS
from controller.runtime.pause_hook import PAUSE_ENV

from .support import (
    ControllerThread,
    clean_client,
    running_by_node,
    running_task_ids,
    wait_until,
)

pytestmark = pytest.mark.swarm
_names = itertools.count()
SETTLE = 90.0


@pytest.fixture
def client(swarm) -> Iterator[docker.DockerClient]:  # type: ignore[no-untyped-def]
    with clean_client(swarm) as c:
        yield c


def _create(swarm, prefix: str, replicas: int, priority: str, slots: int = 1) -> str:  # type: ignore[no-untyped-def]
    name = f"{prefix}{next(_names)}"
    swarm.create_service(
        name,
        replicas=replicas,
        labels={"placement.managed": "true", "placement.priority": priority},
        reserve_generic={"slot": slots},
        stop_grace_seconds=1,
    )
    return name


def _spec(client: docker.DockerClient, name: str) -> tuple[int, dict[str, str]]:
    spec = client.api.inspect_service(name)["Spec"]
    return spec["Mode"]["Replicated"]["Replicas"], spec.get("Labels") or {}


def _running(client: docker.DockerClient, name: str) -> int:
    return len(running_task_ids(client, name))


def _settled(client: docker.DockerClient, name: str, replicas: int, base: int | None) -> bool:
    """The spec says `replicas`, exactly that many run, and the record holds `base`."""
    count, labels = _spec(client, name)
    recorded = labels.get(BASE_LABEL)
    return (
        count == replicas
        and _running(client, name) == replicas
        and (recorded is None if base is None else recorded == str(base))
    )


def _wait_settled(client: docker.DockerClient, name: str, replicas: int, base: int | None) -> None:
    wait_until(
        lambda: _settled(client, name, replicas, base),
        SETTLE,
        f"{name} at {replicas} running" + (f" with {base} recorded" if base else ", no record"),
        interval=0.3,
    )


def _no_record(client: docker.DockerClient, name: str) -> bool:
    return not set(REPLICA_RECORD_LABELS) & set(_spec(client, name)[1])


@pytest.mark.second_engine
def test_preempt_exactly_what_is_needed_then_restore_exactly(swarm, client) -> None:  # type: ignore[no-untyped-def]
    low = _create(swarm, "low", 6, "low")
    wait_until(lambda: _running(client, low) == 6, 60, "low filling the swarm")
    with ControllerThread(swarm.manager_host) as ctl:
        high = _create(swarm, "high", 2, "high")
        wait_until(lambda: _running(client, high) == 2, SETTLE, "high running")
        _wait_settled(client, low, 4, base=6)
        assert _spec(client, low)[1][OPERATION_LABEL] == "preempt"
        client.api.remove_service(high)
        _wait_settled(client, low, 6, base=None)
        assert _no_record(client, low)
    log = ctl.out.getvalue()
    assert f'subject="service {low}" outcome=preempt' in log
    assert f'subject="service {low}" outcome=restore' in log


def test_failover_short_of_capacity_keeps_high_and_preempts_low(swarm, client) -> None:  # type: ignore[no-untyped-def]
    high = _create(swarm, "high", 2, "high")
    wait_until(lambda: _running(client, high) == 2, 60, "high running")
    low = _create(swarm, "low", 4, "low")
    wait_until(lambda: _running(client, low) == 4, 60, "low filling the swarm")
    # A worker that runs a high task (Swarm spread high's 2 tasks over 2 nodes).
    workers = sorted(n for n in running_by_node(client, high) if n != "node-1")
    assert workers, f"Swarm put every task of {high} on node-1: {running_by_node(client, high)}"
    victim = workers[0]
    with ControllerThread(swarm.manager_host) as ctl:
        swarm.fail(victim, "crash")
        swarm.wait_node_state(victim, "down")
        _wait_settled(client, high, 2, base=None)
        _wait_settled(client, low, 2, base=4)
        swarm.restore(victim)
        swarm.wait_node_state(victim, "ready")
        _wait_settled(client, low, 4, base=None)
        assert _settled(client, high, 2, base=None)
    assert f'subject="service {low}" outcome=preempt' in ctl.out.getvalue()


class ControllerProcess:
    """`python -m controller run` in a child process, its output in a file."""

    def __init__(self, docker_host: str, out: Path, pause_after: str | None = None) -> None:
        env = {**os.environ, "DOCKER_HOST": docker_host, "PYTHONUNBUFFERED": "1"}
        env.pop(PAUSE_ENV, None)
        if pause_after:
            env[PAUSE_ENV] = pause_after
        self.out = out
        self._file = out.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "controller", "run", "--resync", "1"],
            env=env,
            stdout=self._file,
            stderr=subprocess.STDOUT,
        )

    def text(self) -> str:
        return self.out.read_text()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._file.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._file.close()


def _paused(ctl: ControllerProcess, step: str) -> Any:
    return f"paused after {step}" in ctl.text() or ctl.proc.poll() is not None


def test_sigkill_between_preempt_steps_and_between_restore_steps(swarm, client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    lowest = _create(swarm, "lowest", 1, "500")
    low = _create(swarm, "low", 5, "low")
    wait_until(lambda: _running(client, low) == 5 and _running(client, lowest) == 1, 60, "full")
    high = _create(swarm, "high", 3, "high")
    wait_until(
        lambda: any(
            "insufficient resources" in t["Status"].get("Err", "")
            for t in client.api.tasks(filters={"service": high})
        ),
        30,
        "high pending for resources",
    )

    # The plan stops lowest's one task and two of low's, written in that order.
    first = ControllerProcess(swarm.manager_host, tmp_path / "1.log", pause_after="preempt")
    try:
        wait_until(lambda: _paused(first, "preempt"), 60, "the pause after the first preempt")
        assert first.proc.poll() is None, first.text()
        first.kill()
    finally:
        first.stop()
    assert _spec(client, lowest)[0] == 0 and _spec(client, lowest)[1][BASE_LABEL] == "1"
    assert _spec(client, low)[0] == 5 and _no_record(client, low), "killed before low's write"

    second = ControllerProcess(swarm.manager_host, tmp_path / "2.log")
    try:
        wait_until(lambda: _running(client, high) == 3, SETTLE, "high running")
        _wait_settled(client, low, 3, base=5)
        _wait_settled(client, lowest, 0, base=1)
    finally:
        second.stop()

    # Restores go highest priority first: low, then lowest.
    third = ControllerProcess(swarm.manager_host, tmp_path / "3.log", pause_after="restore")
    try:
        wait_until(lambda: "decision" in third.text(), 30, "the controller observing")
        client.api.remove_service(high)
        wait_until(lambda: _paused(third, "restore"), 60, "the pause after the first restore")
        assert third.proc.poll() is None, third.text()
        third.kill()
    finally:
        third.stop()
    assert _spec(client, low)[0] == 5 and _no_record(client, low)
    assert _spec(client, lowest)[0] == 0 and _spec(client, lowest)[1][BASE_LABEL] == "1"

    fourth = ControllerProcess(swarm.manager_host, tmp_path / "4.log")
    try:
        _wait_settled(client, lowest, 1, base=None)
        _wait_settled(client, low, 5, base=None)
        time.sleep(3)  # a few more cycles: nothing is applied twice
        assert _settled(client, lowest, 1, base=None) and _settled(client, low, 5, base=None)
    finally:
        fourth.stop()


def test_a_preemption_that_cannot_help_evicts_nothing_and_says_why(swarm, client) -> None:  # type: ignore[no-untyped-def]
    low = _create(swarm, "low", 6, "low")
    wait_until(lambda: _running(client, low) == 6, 60, "low filling the swarm")
    tasks = running_task_ids(client, low)
    with ControllerThread(swarm.manager_host) as ctl:
        big = _create(swarm, "big", 1, "high", slots=3)
        wait_until(
            lambda: f'subject="service {big}" outcome=cannot-help' in ctl.out.getvalue(),
            30,
            "the decision",
        )
        ctl.wait_cycles(3)
    assert running_task_ids(client, low) == tasks, "a task was stopped"
    assert _spec(client, low)[0] == 6 and _no_record(client, low)
    line = next(ln for ln in ctl.out.getvalue().splitlines() if "outcome=cannot-help" in ln)
    assert "reserves slot=3" in line and "even when empty (largest: slot=2):" in line


def _cli(*args: str, docker_host: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller", *args],
        env={**os.environ, "DOCKER_HOST": docker_host},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_priority_none_is_held_after_a_node_loss_until_started(swarm, client) -> None:  # type: ignore[no-untyped-def]
    batch = _create(swarm, "batch", 3, "none")
    wait_until(lambda: _running(client, batch) == 3, 60, "batch running")
    placed = running_by_node(client, batch)
    victim = sorted(n for n in placed if n != "node-1")[0]
    held = 3 - placed[victim]  # what survives the node
    with ControllerThread(swarm.manager_host):
        swarm.fail(victim, "crash")
        swarm.wait_node_state(victim, "down")
        _wait_settled(client, batch, held, base=3)
        swarm.restore(victim)
        swarm.wait_node_state(victim, "ready")
        time.sleep(3)  # the node is back, and still nothing brings the held replicas back
        assert _settled(client, batch, held, base=3)

        done = _cli("start", batch, docker_host=swarm.manager_host)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"started {batch}: replicas {held} -> 3\n"
        _wait_settled(client, batch, 3, base=None)

    again = _cli("start", batch, docker_host=swarm.manager_host)
    assert again.returncode == 2
    assert again.stderr == f"start: service {batch} is not held: nothing to start\n"
    unknown = _cli("start", "no-such-service", docker_host=swarm.manager_host)
    assert unknown.returncode == 2
    assert unknown.stderr == "start: no service named 'no-such-service'\n"
