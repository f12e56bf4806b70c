"""The CLI across processes: up, status, fail, restore, down, and `run` with its signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.sandbox import Sandbox, find_leftovers
from controller.sandbox.state import STATE_FILE, sandbox_dir

pytestmark = pytest.mark.swarm
NewName = Callable[[str], str]


def cli(*argv: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller", "sandbox", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_up_status_fail_restore_down_in_separate_processes(new_sandbox_name: NewName) -> None:
    name = new_sandbox_name("cli")
    up = cli(
        "up", "--name", name, "--nodes", "2",
        "--label", "node-1:rack=r1", "--resource", "node-2:slot=3", "--heartbeat", "1s",
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    assert f"export DOCKER_HOST=unix://{sandbox_dir(name)}/node-1/docker.sock" in up.stdout

    status = cli("status", "--name", name)
    assert status.returncode == 0, status.stderr
    lines = {line.split()[0]: line for line in status.stdout.splitlines() if line.strip()}
    assert "ready" in lines["node-1"] and "leader" in lines["node-1"]
    assert "rack=r1" in lines["node-1"]
    assert "ready" in lines["node-2"] and "slot=3" in lines["node-2"]

    fail = cli("fail", "node-2", "--mode", "crash", "--name", name)
    assert fail.returncode == 0, fail.stderr
    sandbox = Sandbox.load(name)
    sandbox.wait_node_state("node-2", "down", timeout=60)
    assert "crash" in cli("status", "--name", name).stdout

    restore = cli("restore", "node-2", "--name", name)
    assert restore.returncode == 0, restore.stderr
    sandbox.wait_node_state("node-2", "ready", timeout=60)

    down = cli("down", "--name", name)
    assert down.returncode == 0, down.stderr
    assert not find_leftovers(name)
    again = cli("down", "--name", name)
    assert again.returncode == 0


def test_run_runs_the_command_against_the_manager_then_tears_down(
    new_sandbox_name: NewName,
) -> None:
    name = new_sandbox_name("run")
    done = cli("run", "--name", name, "--nodes", "1", "--", "sandbox", "status", "--name", name)
    assert done.returncode == 0, done.stderr
    assert f"DOCKER_HOST=unix://{sandbox_dir(name)}/node-1/docker.sock" in done.stdout
    assert "node-1" in done.stdout and "leader" in done.stdout
    assert "is down" in done.stderr
    assert not find_leftovers(name)


def test_run_without_the_command_shows_status_and_stops_on_sigint(
    new_sandbox_name: NewName, tmp_path: Path
) -> None:
    name = new_sandbox_name("int")
    out = tmp_path / "out"
    with open(out, "w") as handle:
        proc = subprocess.Popen(
            [sys.executable, "-m", "controller", "sandbox", "run", "--name", name,
             "--nodes", "1", "--", "no-such-command"],
            stdout=handle,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        _wait_for(lambda: "leader" in out.read_text(), 120, "the first status")
        assert "'no-such-command' is not available" in out.read_text()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "is down" in out.read_text()
    assert not find_leftovers(name)


def test_sigterm_during_up_removes_the_half_made_sandbox(new_sandbox_name: NewName) -> None:
    name = new_sandbox_name("term")
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller", "sandbox", "up", "--name", name, "--nodes", "3"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # On SIGABRT the process prints every thread's stack: what a hung exit waits on.
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    try:
        _wait_for((sandbox_dir(name) / STATE_FILE).exists, 60, "the state file")
        time.sleep(0.3)  # namespaces and daemons are being made
        os.kill(proc.pid, signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"sandbox up had not ended 120 s after SIGTERM; its threads:\n{err}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (0, 130), err
    if proc.returncode == 130:
        assert "interrupted" in err
        assert not find_leftovers(name)
