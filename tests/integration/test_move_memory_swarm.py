"""A move's cooldown survives a restart of the controller, on the session's real swarm.

A stop-first service with reservations is moved by the owners rule onto its preferred
node; the controller stops right after the mirror has the move, and a new one starts with
a policy that prefers the node the task came from. Without the mirror the new controller
would watch the swarm for a few heartbeats, then move the task straight back, seconds
after the last move; with it, the move cooldown holds, and a decision says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from controller.core.mirror import MIRROR_CONFIG, MOVES_PREFIX

from .support import ControllerThread, clean_swarm, running_by_node, wait_until

pytestmark = [pytest.mark.swarm, pytest.mark.slow]
_names = itertools.count()
POLICY = """\
apiVersion: placement/v1
controller:
  move-cooldown: 10m
  resync-interval: 1s
nodes:
  quarantine: {{failures: 100}}
services:
  - match: {{name: "{name}"}}
    managed: true
    preferred-nodes: [{node}]
    failback: immediate
    failback-delay: 0s
"""


@pytest.fixture
def client(swarm) -> Iterator[docker.DockerClient]:  # type: ignore[no-untyped-def]
    c = docker.DockerClient(base_url=swarm.manager_host, version="auto", timeout=30)
    yield c
    clean_swarm(c)  # the service, node labels and the mirror
    c.close()


def _mirrored_move(client: docker.DockerClient, service_id: str) -> bool:
    for config in client.api.configs(filters={"name": MIRROR_CONFIG}):
        if MOVES_PREFIX + service_id in (config["Spec"].get("Labels") or {}):
            return True
    return False


def test_a_restarted_controller_does_not_move_a_task_straight_back(  # type: ignore[no-untyped-def]
    swarm, client, tmp_path: Path
) -> None:
    name = f"moved{next(_names)}"
    service_id = swarm.create_service(
        name,
        update_order="stop-first",
        reserve_cpus=0.05,
        reserve_memory_bytes=16 << 20,
        stop_grace_seconds=1,
    )
    (came_from,) = wait_until(lambda: running_by_node(client, name), 60, f"{name} running")
    target = sorted(set(swarm.nodes) - {came_from})[0]
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text(POLICY.format(name=name, node=target))
    second.write_text(POLICY.format(name=name, node=came_from))

    with ControllerThread(swarm.manager_host, policy=first):
        wait_until(lambda: running_by_node(client, name) == {target: 1}, 60, f"{name} moved")
        wait_until(lambda: _mirrored_move(client, service_id), 30, "the move in the mirror")

    with ControllerThread(swarm.manager_host, policy=second) as restarted:
        held = f'subject="service {name}"'
        wait_until(
            lambda: any(
                held in line and "cooldown 600 s" in line
                for line in restarted.out.getvalue().splitlines()
            ),
            30,
            "the new controller's cooldown decision",
        )
        restarted.wait_cycles(3)
        assert running_by_node(client, name) == {target: 1}
