"""Rebalancing on the real 3-node session swarm (node-1 the manager, heartbeat 1 s).

Services opt in with `placement.rebalance=on` alone. Tasks stop within 1 s
(`stop_grace_seconds=1`) so trims are quick. Nodes report the host's CPUs, so load is
given by CPU reservations.
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

from controller.adapters.writes import execute_action
from controller.core.actions import Action, SetReplicas
from controller.core.labels import EXCLUDED_LABEL
from controller.core.replicas import OPERATION_LABEL, REPLICA_RECORD_LABELS, Operation
from controller.runtime.pause_hook import PAUSE_ENV
from controller.sandbox import swarm as sandbox_swarm
from controller.sandbox.sandbox import DEFAULT_COMMAND

from .support import (
    ControllerThread,
    RunningSampler,
    clean_client,
    running_by_node,
    running_task_ids,
    task_ids_by_node,
    wait_until,
)

pytestmark = [pytest.mark.swarm, pytest.mark.slow]
REBALANCE_ON = {"placement.rebalance": "on"}
_names = itertools.count()

POLICY = """\
apiVersion: placement/v1
controller:
  rebalance-mode: {mode}
  rebalance-interval: 2s
  aggressiveness: {aggressiveness}
  resync-interval: 1s
"""


@pytest.fixture
def client(swarm) -> Iterator[docker.DockerClient]:  # type: ignore[no-untyped-def]
    with clean_client(swarm) as c:
        yield c


def _policy(tmp_path: Path, *, mode: str = "on-join", aggressiveness: int = 3) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.format(mode=mode, aggressiveness=aggressiveness))
    return path


def _spec(client: docker.DockerClient, name: str) -> tuple[int, dict[str, str]]:
    spec = client.api.inspect_service(name)["Spec"]
    return spec["Mode"]["Replicated"]["Replicas"], spec.get("Labels") or {}


def _at_rest(client: docker.DockerClient, name: str, layout: dict[str, int]) -> bool:
    """The spec holds its own count with no record, and tasks run exactly as `layout`."""
    replicas, labels = _spec(client, name)
    return (
        replicas == sum(layout.values())
        and not set(REPLICA_RECORD_LABELS) & set(labels)
        and running_by_node(client, name) == layout
    )


def _web(swarm, replicas: int = 6) -> str:  # type: ignore[no-untyped-def]
    name = f"web{next(_names)}"
    swarm.create_service(name, replicas=replicas, labels=REBALANCE_ON, stop_grace_seconds=1)
    return name


def _lose_node_3(swarm, client: docker.DockerClient, name: str) -> None:  # type: ignore[no-untyped-def]
    swarm.fail("node-3", "crash")
    swarm.wait_node_state("node-3", "down")
    wait_until(
        lambda: _at_rest(client, name, {"node-1": 3, "node-2": 3}), 90, "3/3/0", interval=0.3
    )


class Recording:
    """An executor wrapper that keeps every action the controller wrote."""

    def __init__(self) -> None:
        self.actions: list[Action] = []

    def __call__(self, c: docker.DockerClient):  # type: ignore[no-untyped-def]
        def execute(action: Action) -> None:
            execute_action(c, action)
            self.actions.append(action)

        return execute

    def rebalances(self, name: str) -> int:
        return sum(
            1
            for a in self.actions
            if isinstance(a, SetReplicas)
            and a.service_name == name
            and a.set_labels.get(OPERATION_LABEL) == Operation.REBALANCE
        )


def test_a_returned_node_gets_two_tasks_by_replacing_exactly_two(swarm, client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    web = _web(swarm)
    wait_until(lambda: _at_rest(client, web, {f"node-{i}": 2 for i in (1, 2, 3)}), 60, "2/2/2")
    recording = Recording()
    with ControllerThread(swarm.manager_host, policy=_policy(tmp_path), executor=recording) as ctl:
        _lose_node_3(swarm, client, web)
        before = running_task_ids(client, web)
        with RunningSampler(swarm.manager_host, web) as sampler:
            swarm.restore("node-3")
            swarm.wait_node_state("node-3", "ready")
            wait_until(
                lambda: _at_rest(client, web, {f"node-{i}": 2 for i in (1, 2, 3)}),
                90,
                "2/2/2 again",
                interval=0.3,
            )
        after = task_ids_by_node(client, web)
        ctl.wait_cycles(3)  # and it stays so
        assert running_by_node(client, web) == {f"node-{i}": 2 for i in (1, 2, 3)}
    assert len(before - set().union(*after.values())) == 2, "exactly two tasks replaced"
    assert after["node-3"].isdisjoint(before) and len(after["node-3"]) == 2
    assert after["node-1"] | after["node-2"] <= before, "no other task restarted"
    assert sampler.minimum >= 5, sampler.samples
    assert recording.rebalances(web) == 1
    assert f'subject="service {web}" outcome=rebalance' in ctl.out.getvalue()


def test_a_flapping_node_causes_at_most_one_rebalance(swarm, client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    web = _web(swarm)
    wait_until(lambda: _at_rest(client, web, {f"node-{i}": 2 for i in (1, 2, 3)}), 60, "2/2/2")
    recording = Recording()
    with ControllerThread(swarm.manager_host, policy=_policy(tmp_path), executor=recording) as ctl:
        _lose_node_3(swarm, client, web)
        started = time.monotonic()
        for flap in range(2):
            if flap:
                swarm.fail("node-3", "crash")
                swarm.wait_node_state("node-3", "down")
            swarm.restore("node-3")
            swarm.wait_node_state("node-3", "ready")
        assert time.monotonic() - started < 60, "the node must flap within a minute"
        assert recording.rebalances(web) == 0, "no rebalance while it flaps"
        # Two downs in ten minutes: it must now stay ready 30 s (twice the settle time of
        # aggressiveness 3) before anything moves.
        wait_until(
            lambda: _at_rest(client, web, {f"node-{i}": 2 for i in (1, 2, 3)}),
            150,
            "2/2/2 once node-3 has calmed down",
            interval=0.5,
        )
        ctl.wait_cycles(5)
    assert recording.rebalances(web) == 1
    assert "node-3 joined or returned recently and must stay ready 30 s" in ctl.out.getvalue()


def _create_reserving(swarm, name: str, cpus: float, *, labels: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    """One task reserving `cpus`, started on node-1, then free to run anywhere: Swarm
    leaves a running task where it is when a constraint it meets is removed."""
    template: dict[str, Any] = sandbox_swarm.service_spec(
        image_id=swarm.image_id,
        command=DEFAULT_COMMAND,
        constraints=["node.hostname==node-1"],
        reserve_generic=None,
        restart_delay_seconds=None,
        stop_grace_seconds=1,
    )
    template["Resources"] = {"Reservations": {"NanoCPUs": int(cpus * 1e9)}}
    c = swarm.client()
    try:
        c.api.create_service(
            template,
            name=name,
            labels=labels,
            mode={"Replicated": {"Replicas": 1}},
            update_config={"Parallelism": 1, "Order": "start-first"},
        )
    finally:
        c.close()


def _reserved_share(client: docker.DockerClient, hostname: str) -> float:
    """Reserved CPU on a node as a fraction of its CPUs, from what runs there."""
    node = next(n for n in client.api.nodes() if n["Description"]["Hostname"] == hostname)
    cpus = node["Description"]["Resources"]["NanoCPUs"]
    reserved = 0
    for task in client.api.tasks(filters={"node": node["ID"], "desired-state": "running"}):
        res = task["Spec"].get("Resources", {}).get("Reservations", {})
        reserved += res.get("NanoCPUs", 0)
    return float(reserved / cpus)


@pytest.mark.second_engine
def test_load_moves_off_a_hot_node_until_it_is_under_the_threshold(swarm, client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cpus = client.api.nodes()[0]["Description"]["Resources"]["NanoCPUs"] / 1e9
    # node-1: an unmanaged hog at 40 % and three opted-in services at 12.5 % each: 77.5 %.
    _create_reserving(swarm, "hog", 0.4 * cpus, labels={})
    movers = [f"{kind}{next(_names)}" for kind in ("api", "cache", "web")]
    for name in movers:
        _create_reserving(swarm, name, 0.125 * cpus, labels=REBALANCE_ON)
    for name in ["hog", *movers]:
        wait_until(lambda n=name: running_by_node(client, n) == {"node-1": 1}, 60, f"{name}")
    ids = {name: running_task_ids(client, name) for name in movers}
    for name in movers:
        swarm.set_constraints(name)
    assert {n: running_task_ids(client, n) for n in movers} == ids, "unpinning moved a task"
    assert abs(_reserved_share(client, "node-1") - 0.775) < 0.01

    policy = _policy(tmp_path, mode="periodic", aggressiveness=1)
    with ControllerThread(swarm.manager_host, policy=policy) as ctl:
        # Level 1 moves at 80 %: 77.5 % is a mild imbalance. Several periodic rounds (2 s)
        # and far more cycles than the persistence pass without a move.
        started = time.monotonic()
        ctl.wait_cycles(10)
        wait_until(lambda: time.monotonic() - started >= 8, 20, "four periodic rounds")
        assert {n: running_task_ids(client, n) for n in movers} == ids, "level 1 moved a task"
        assert "outcome=move" not in ctl.out.getvalue()

        policy.write_text(POLICY.format(mode="periodic", aggressiveness=3))  # hot above 60 %
        wait_until(
            lambda: (
                _reserved_share(client, "node-1") <= 0.6
                and sum(running_by_node(client, n).get("node-1", 0) for n in movers) == 1
            ),
            90,
            "node-1 under 60 %",
            interval=0.5,
        )
        ctl.wait_cycles(5)  # and nothing more moves once it is under the threshold
        on_node_1 = [n for n in movers if running_by_node(client, n) == {"node-1": 1}]
        assert len(on_node_1) == 1
    assert running_by_node(client, "hog") == {"node-1": 1}, "unmanaged: never moved"
    moved = [n for n in movers if n not in on_node_1]
    for name in moved:
        labels = _spec(client, name)[1]
        assert labels[EXCLUDED_LABEL] == _node_id(client, "node-1")
        assert running_task_ids(client, name).isdisjoint(ids[name])
    assert running_task_ids(client, on_node_1[0]) == ids[on_node_1[0]]
    assert ctl.out.getvalue().count("outcome=move") == 2
    assert abs(_reserved_share(client, "node-1") - 0.525) < 0.01


def _node_id(client: docker.DockerClient, hostname: str) -> str:
    return str(
        next(n["ID"] for n in client.api.nodes() if n["Description"]["Hostname"] == hostname)
    )


class ControllerProcess:
    """`python -m controller run` in a child process, so that it can be SIGKILLed."""

    def __init__(
        self, docker_host: str, policy: Path, out: Path, pause_after: str | None = None
    ) -> None:
        env = {**os.environ, "DOCKER_HOST": docker_host, "PYTHONUNBUFFERED": "1"}
        env.pop(PAUSE_ENV, None)
        if pause_after:
            env[PAUSE_ENV] = pause_after
        self.out = out
        self._file = out.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "controller", "run", "--resync", "1", "--policy", str(policy)],
            env=env,
            stdout=self._file,
            stderr=subprocess.STDOUT,
        )

    def text(self) -> str:
        return self.out.read_text()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._file.close()


def test_a_controller_killed_between_surge_and_trim_leaves_the_desired_count(  # type: ignore[no-untyped-def]
    swarm, client, tmp_path
) -> None:
    web = _web(swarm)
    wait_until(lambda: _at_rest(client, web, {f"node-{i}": 2 for i in (1, 2, 3)}), 60, "2/2/2")
    policy = _policy(tmp_path)
    first = ControllerProcess(swarm.manager_host, policy, tmp_path / "1.log", "rebalance")
    try:
        wait_until(lambda: "decision" in first.text(), 30, "the controller observing")
        _lose_node_3(swarm, client, web)
        swarm.restore("node-3")
        swarm.wait_node_state("node-3", "ready")
        wait_until(
            lambda: "paused after rebalance" in first.text() or first.proc.poll() is not None,
            90,
            "the pause after the surge",
        )
        assert first.proc.poll() is None, first.text()
        first.stop(signal.SIGKILL)
    finally:
        first.stop(signal.SIGKILL)
    replicas, labels = _spec(client, web)
    assert replicas == 8 and labels[OPERATION_LABEL] == Operation.REBALANCE, (
        "killed between the writes"
    )

    second = ControllerProcess(swarm.manager_host, policy, tmp_path / "2.log")
    try:
        wait_until(
            lambda: _at_rest(client, web, {f"node-{i}": 2 for i in (1, 2, 3)}),
            90,
            "the surge trimmed to 2/2/2",
            interval=0.3,
        )
        time.sleep(3)  # a few more cycles: nothing is applied twice
        assert _at_rest(client, web, {f"node-{i}": 2 for i in (1, 2, 3)})
    finally:
        second.stop()
    assert "outcome=trim" in second.text()
