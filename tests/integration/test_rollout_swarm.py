"""An operator's rollout Swarm paused is left paused: the controller never resumes it.

Every service spec write resets UpdateStatus in SwarmKit, so a controller write to a
service whose failing update Swarm paused resumes that update, and a stop-first rollout
of a failing image then stops the tasks that still work. The same scenario is measured
first without the controller, then with it, in one test on one 4-node sandbox.

A rollout the controller's own write started is told apart from an operator's by what
Swarm stores (Spec against PreviousSpec), on both engines: paused, it would otherwise
keep the controller from writing the service at all.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import docker
import pytest

from controller.adapters.attrs import service_from_attrs
from controller.adapters.engine import update_service_spec
from controller.core.labels import possible_constraint
from controller.sandbox import Sandbox

from .support import (
    ControllerThread,
    RunningSampler,
    running_by_node,
    running_task_ids,
    wait_until,
)

pytestmark = pytest.mark.swarm

NANOSECONDS = 1_000_000_000
REPLICAS = 4
WATCH_SECONDS = 10.0  # how long each paused rollout is watched (about ten cycles)


def _create(sandbox: Sandbox, name: str) -> None:
    sandbox.create_service(
        name,
        replicas=REPLICAS,
        update_order="stop-first",
        stop_grace_seconds=1,
        restart_delay_seconds=1,
    )


def _break(client: docker.DockerClient, name: str) -> None:
    """Roll out a command that exits at once; Swarm's default failure action pauses it."""
    attrs = client.api.inspect_service(name)
    spec: dict[str, Any] = attrs["Spec"]
    spec["TaskTemplate"]["ContainerSpec"]["Command"] = ["false"]
    spec["UpdateConfig"] = {
        "Parallelism": 1,
        "Order": "stop-first",
        "FailureAction": "pause",
        "Monitor": 3 * NANOSECONDS,
        "MaxFailureRatio": 0,
    }
    update_service_spec(client, attrs["ID"], int(attrs["Version"]["Index"]), spec)


def _update_state(client: docker.DockerClient, name: str) -> str | None:
    state: str | None = (client.api.inspect_service(name).get("UpdateStatus") or {}).get("State")
    return state


def _watch(client: docker.DockerClient, name: str, seconds: float) -> list[str | None]:
    states = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        states.append(_update_state(client, name))
        time.sleep(0.5)
    return states


def test_a_paused_rollout_stays_paused_under_the_controller(
    make_sandbox: Any, tmp_path: Path
) -> None:
    sandbox: Sandbox = make_sandbox(nodes=4)
    client = docker.DockerClient(base_url=sandbox.manager_host, version="auto", timeout=30)
    name = "db"
    _create(sandbox, name)
    sandbox.wait_services_running([name])
    wait_until(lambda: len(running_task_ids(client, name)) == REPLICAS, 90, "every replica")
    _break(client, name)
    wait_until(lambda: _update_state(client, name) == "paused", 90, f"{name} paused")

    # Swarm alone: the paused rollout stays paused, and so does the number of old tasks
    # running. Swarm's pause leaves 2 or 3 of 4 of them, run to run (the updater may reach
    # the next slot before the first new task fails), and a failing new task counts as
    # running for a moment on each restart: the minimum over the watch is the old tasks.
    with RunningSampler(sandbox.manager_host, name) as swarm_alone:
        states = _watch(client, name, WATCH_SECONDS)
    assert set(states) == {"paused"}, states
    baseline = swarm_alone.minimum
    assert 0 < baseline < REPLICAS, swarm_alone.samples

    # The controller starts and is told to manage the service (by the policy file: a
    # label write would itself resume the rollout).
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: placement/v1\n"
        "services:\n"
        f"  - match: {{name: {name}}}\n"
        "    managed: true\n"
        # The failing tasks count as task failures on their nodes; quarantine is not
        # what this test is about.
        "nodes:\n"
        "  quarantine: {failures: 100}\n"
        "controller:\n"
        "  resync-interval: 1s\n"
        "  move-cooldown: 2s\n"
    )
    version = int(client.api.inspect_service(name)["Version"]["Index"])
    with (
        RunningSampler(sandbox.manager_host, name) as with_controller,
        ControllerThread(sandbox.manager_host, policy=policy) as controller,
    ):
        controller.wait_cycles(3, timeout=60)
        states = _watch(client, name, WATCH_SECONDS)
        controller.wait_cycles(1, timeout=60)
    out = controller.out.getvalue()
    assert set(states) == {"paused"}, f"{states}\n{out}"
    assert with_controller.minimum >= baseline, (with_controller.samples, baseline, out)
    assert int(client.api.inspect_service(name)["Version"]["Index"]) == version, out
    assert f"service {name}" in out and "rollout paused by Swarm" in out, out
    client.close()


@pytest.mark.second_engine
def test_a_rollout_is_the_controller_s_own_only_while_only_its_constraints_changed(
    make_sandbox: Any, tmp_path: Path
) -> None:
    sandbox: Sandbox = make_sandbox(nodes=4)
    client = docker.DockerClient(base_url=sandbox.manager_host, version="auto", timeout=30)
    name = "db"
    # Start-first, so that the controller's first write moves the task at once and Swarm's
    # rollout of it lasts a monitor period (a stop-first move surges first, and its
    # eviction write rolls out within milliseconds).
    sandbox.create_service(name, replicas=2, update_order="start-first")
    sandbox.wait_services_running([name])
    # Possible owners that take exactly one task off its node: the controller's write
    # moves it (a move of two at once would wait for the disruption budget).
    kept, moved = sorted(running_by_node(client, name))
    free = sorted(set(sandbox.nodes) - {kept, moved})[0]
    attrs = client.api.inspect_service(name)
    spec: dict[str, Any] = attrs["Spec"]
    spec["Labels"] = {"placement.managed": "true", "placement.possible-nodes": f"{kept},{free}"}
    update_service_spec(client, attrs["ID"], int(attrs["Version"]["Index"]), spec)
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: placement/v1\ncontroller:\n  resync-interval: 1s\n")

    def read() -> Any:
        return service_from_attrs(client.api.inspect_service(name))

    def rolled(what: str) -> Any:
        """The service once Swarm's updater has set UpdateStatus for the last write (a
        write clears it; 26.1 shows it cleared for a moment)."""
        return wait_until(lambda: (s := read()).update_state and s, 30, what)

    ours = possible_constraint(name)
    with ControllerThread(sandbox.manager_host, policy=policy) as controller:
        # The write that steers the task off its node starts Swarm's rollout: the
        # controller's own. (The possible-owner constraint that follows moves no task,
        # and a write that makes no task dirty leaves UpdateStatus cleared.)
        service = rolled("the rollout of the controller's steering write")
        wait_until(lambda: ours in read().constraints, 60, "the controller's constraint")
        controller.wait_cycles(1, timeout=60)
    out = controller.out.getvalue()
    assert service.update_state in ("updating", "completed"), (service, out)
    assert service.rollout_is_own, (client.api.inspect_service(name), out)

    # An operator's edit sends the spec back with the controller's constraint in it: the
    # rollout it starts is the operator's, although the constraints did not change.
    attrs = client.api.inspect_service(name)
    spec = attrs["Spec"]
    spec["TaskTemplate"]["ContainerSpec"]["Env"] = ["EDITED=1"]
    update_service_spec(client, attrs["ID"], int(attrs["Version"]["Index"]), spec)
    service = rolled("the rollout of the operator's edit")
    assert ours in service.constraints, service
    assert not service.rollout_is_own, client.api.inspect_service(name)
    client.close()
