"""The conservative ledger on a real 4-node swarm with Swarm's default heartbeat.

node-1 is the only manager. The default 5 s heartbeat is the point of the first test: a
crashed engine's tasks read `running` for 11 to 15 s, until Swarm marks its node down,
and a degraded report on another node in that window must not stop a task. The others:
a managed global service keeps every task through two degraded reports, and a service
with a local volume keeps its task on a degraded node. Counts are sampled, not timed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from controller.core.health.node_marks import health_key
from controller.runtime.health_inputs import HealthConfig
from controller.sandbox import Sandbox
from controller.sandbox.netns_probe import NetnsProber

from .health_support import NANO, create_service, node_attrs, post_health, reset_nodes
from .support import (
    ControllerThread,
    RunningSampler,
    clean_client,
    running_by_node,
    wait_until,
)
from .test_speculative_swarm import default_heartbeat_sandbox, node_state

pytestmark = [pytest.mark.swarm, pytest.mark.slow, pytest.mark.alone]
TOKEN = "ledger-token-for-tests"
POLICY = """\
apiVersion: placement/v1
defaults:
  managed: true
controller:
  resync-interval: 1s
  # Two of four nodes in question at once (a crash and a report): within the cap.
  health-panic-threshold: 0.6
"""


@pytest.fixture(scope="module")
def four() -> Iterator[Sandbox]:
    with default_heartbeat_sandbox("cl", nodes=4, managers=1) as sandbox:
        yield sandbox


@pytest.fixture
def client(four: Sandbox) -> Iterator[docker.DockerClient]:
    with clean_client(four, also=reset_nodes) as c:
        yield c


class LiveSampler(RunningSampler):
    """The fewest running tasks of a service on nodes whose engine lives (the API still
    lists a crashed engine's tasks as running), sampled in the background."""

    def __init__(self, docker_host: str, service: str, dead: set[str]) -> None:
        super().__init__(docker_host, service, interval=0.1)
        self.dead = dead

    def _count(self) -> int:
        placed = running_by_node(self._client, self._service)
        return sum(n for h, n in placed.items() if h not in self.dead)


def controller(four: Sandbox, tmp_path: Path, prober: NetnsProber) -> ControllerThread:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    health = HealthConfig(
        webhook=("127.0.0.1", 0), webhook_token=TOKEN, liveness=True, liveness_connect=prober
    )
    return ControllerThread(four.manager_host, policy=policy, health=health)


def degrade(ctl: ControllerThread, host: str) -> None:
    assert ctl.controller.server is not None
    report = {"node": host, "state": "degraded", "reason": "disk", "ttl": 600}
    status, answer = post_health(ctl.controller.server.port, report, token=TOKEN)
    assert status == 202, answer


def marked(client: docker.DockerClient, host: str) -> bool:
    return health_key("webhook") in (node_attrs(client, host)["Spec"].get("Labels") or {})


@pytest.mark.second_engine
def test_a_global_service_keeps_every_task_through_two_degraded_reports(
    four: Sandbox, client: docker.DockerClient, tmp_path: Path
) -> None:
    four.create_service("agent", mode="global", update_order="stop-first")
    wait_until(lambda: len(running_by_node(client, "agent")) == 4, 60, "agent on every node")
    prober = NetnsProber(four.state.node("node-1").netns)
    with (
        controller(four, tmp_path, prober) as ctl,
        LiveSampler(four.manager_host, "agent", set()) as sampler,
    ):
        ctl.wait_cycles(2)
        degrade(ctl, "node-2")
        time.sleep(0.5)
        degrade(ctl, "node-3")
        wait_until(lambda: marked(client, "node-2") and marked(client, "node-3"), 30, "marked")
        ctl.wait_cycles(5)
        out = ctl.out.getvalue()
    prober.close()
    print(f"agent running on every node, sampled every 0.1 s: min {sampler.minimum} of 4")
    assert sampler.minimum == 4, "a degraded report took a global service's task"
    assert "global: its task there cannot run elsewhere" in out, out


@pytest.mark.second_engine
def test_a_local_volume_service_keeps_its_task_on_a_degraded_node(
    four: Sandbox, client: docker.DockerClient, tmp_path: Path
) -> None:
    template = {
        "ContainerSpec": {
            "Image": four.image_id,
            "Command": ["sleep", "3600"],
            "StopGracePeriod": NANO,
            "Mounts": [{"Type": "volume", "Source": "db-data", "Target": "/data"}],
        },
        "RestartPolicy": {"Condition": "any", "Delay": NANO, "MaxAttempts": 0},
        "Placement": {"Constraints": ["node.role==worker"]},
    }
    client.api.create_service(
        template,
        name="db",
        mode={"Replicated": {"Replicas": 1}},
        update_config={"Order": "stop-first"},
    )
    placed = wait_until(lambda: running_by_node(client, "db"), 60, "db running")
    (host,) = placed
    before = {t["ID"] for t in client.api.tasks(filters={"service": "db"})}
    prober = NetnsProber(four.state.node("node-1").netns)
    with controller(four, tmp_path, prober) as ctl:
        ctl.wait_cycles(2)
        degrade(ctl, host)
        wait_until(lambda: marked(client, host), 30, f"{host} marked degraded")
        ctl.wait_cycles(5)
        out = ctl.out.getvalue()
    prober.close()
    after = {t["ID"] for t in client.api.tasks(filters={"service": "db"})}
    assert running_by_node(client, "db") == {host: 1}, "db was moved off its data"
    assert after == before, "db's task was replaced"
    assert "its data is local to its node" in out, out


def test_a_degraded_report_stops_no_task_while_another_nodes_engine_is_dead(
    four: Sandbox, client: docker.DockerClient, tmp_path: Path
) -> None:
    """api: 3 stop-first replicas, one on each worker, max-unavailable 1. node-3's dockerd
    is SIGKILLed; while Swarm still calls node-3 ready, node-2 is reported degraded.
    Swarm alone keeps node-2's and node-4's tasks running: so must the controller."""
    create_service(
        client,
        "api",
        four.image_id,
        replicas=3,
        constraints=["node.role==worker"],
        order="stop-first",
        reserve=(0.1, 32 << 20),
    )
    wait_until(lambda: len(running_by_node(client, "api")) == 3, 60, "api on each worker")
    prober = NetnsProber(four.state.node("node-1").netns)
    try:
        with controller(four, tmp_path, prober) as ctl:
            ctl.wait_cycles(2)
            with LiveSampler(four.manager_host, "api", {"node-3"}) as sampler:
                four.fail("node-3", "crash")
                wait_until(
                    lambda: (
                        'subject="node node-3"' in ctl.out.getvalue()
                        and "rule=suspicion" in ctl.out.getvalue()
                    ),
                    30,
                    "a liveness signal says node-3 is gone",
                )
                swarm_said = node_state(client, "node-3")
                degrade(ctl, "node-2")
                wait_until(lambda: node_state(client, "node-3") == "down", 60, "node-3 down")
                wait_until(
                    lambda: (
                        sum(n for h, n in running_by_node(client, "api").items() if h != "node-3")
                        == 3
                    ),
                    60,
                    "api whole again on live nodes",
                )
            out = ctl.out.getvalue()
        print(f"Swarm called node-3 {swarm_said} when node-2's report came")
        print(f"api on live nodes, sampled every 0.1 s: min {sampler.minimum} of 3")
        assert sampler.minimum >= 2, "fewer than Swarm alone keeps: node-2's task was stopped"
        assert "keeps its tasks here for now" in out, out
    finally:
        prober.close()
        four.restore("node-3")
        wait_until(lambda: node_state(client, "node-3") == "ready", 90, "node-3 back")
