"""A redeploy does not undo the policy: `docker stack deploy` on a real 4-node swarm.

`docker stack deploy` replaces a service's labels and constraints wholesale, and with them
the controller's record of what it decided. A stop-first service with CPU and memory
reservations (what most stacks are) fails over from its preferred node under
`failback: never`; the stack is then deployed again, once while the controller runs and
once while it is down (a new leader after a handover starts with no memory either). The
task must stay where it failed over to, and the record must come back from the mirror.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from controller.sandbox import Sandbox

from .support import ControllerThread, RunningSampler, clean_client, running_by_node, wait_until

pytestmark = [pytest.mark.swarm, pytest.mark.slow]

STACK = "app"
DB = f"{STACK}_db"
EXCLUDED = "swarm-placement.excluded"
RECORDS = "swarm-placement-records"
RECOVERED = f'rule=mirror subject="service {DB}" outcome=recover'
POLICY = """\
apiVersion: placement/v1
defaults:
  managed: false
controller:
  move-cooldown: 2s
  resync-interval: 1s
nodes:
  quarantine: {failures: 100}
"""
STACK_FILE = """\
version: "3.8"
services:
  db:
    image: {image}
    command: ["sleep", "3600"]
    stop_grace_period: 1s
    deploy:
      replicas: 1
      labels:
        placement.managed: "true"
        placement.preferred-nodes: node-2
        placement.failback: never
        placement.failback-delay: 1s
      resources:
        reservations: {{cpus: "0.1", memory: 16M}}
      restart_policy: {{delay: 1s}}
"""


@pytest.fixture
def sandbox(make_sandbox) -> Sandbox:  # type: ignore[no-untyped-def]
    if shutil.which("docker") is None:
        pytest.fail("the docker command line (docker.io) is needed for `docker stack deploy`")
    return make_sandbox(nodes=4, heartbeat_seconds=1.0)  # type: ignore[no-any-return]


@pytest.fixture
def client(sandbox: Sandbox) -> Iterator[docker.DockerClient]:
    with clean_client(sandbox) as c:
        yield c


def _deploy(sandbox: Sandbox, stack_file: Path) -> None:
    result = subprocess.run(
        ["docker", "stack", "deploy", "--resolve-image", "never", "-c", str(stack_file), STACK],
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "DOCKER_HOST": sandbox.manager_host},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def _labels(client: docker.DockerClient) -> dict[str, str]:
    return dict(client.api.inspect_service(DB)["Spec"].get("Labels") or {})


def _mirrored(client: docker.DockerClient) -> bool:
    """True once the mirror holds the exclusions the service carries now."""
    attrs = client.api.inspect_service(DB)
    try:
        config = client.api.inspect_config(RECORDS)
    except docker.errors.NotFound:
        return False
    raw = (config["Spec"].get("Labels") or {}).get(f"swarm-placement.record.{attrs['ID']}")
    if raw is None:
        return False
    saved: dict[str, str] = json.loads(raw)["labels"]
    return saved.get(EXCLUDED) == (attrs["Spec"].get("Labels") or {}).get(EXCLUDED)


@pytest.mark.second_engine
def test_failback_never_survives_redeploys(sandbox, client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(STACK_FILE.format(image=sandbox.image_id))
    _deploy(sandbox, stack_file)

    with ControllerThread(sandbox.manager_host, policy=policy) as ctl:
        try:
            wait_until(lambda: set(running_by_node(client, DB)) == {"node-2"}, 60, "db on node-2")
        except AssertionError:
            print(ctl.out.getvalue())
            raise
        sandbox.fail("node-2", "crash")
        sandbox.wait_node_state("node-2", "down")
        wait_until(lambda: running_by_node(client, DB), 60, "db failed over")
        (there,) = running_by_node(client, DB)
        sandbox.restore("node-2")
        sandbox.wait_node_state("node-2", "ready")
        wait_until(lambda: EXCLUDED in _labels(client), 30, "db steered off node-2")
        wait_until(lambda: _mirrored(client), 30, "the record mirrored")

        with RunningSampler(sandbox.manager_host, DB) as sampler:
            _deploy(sandbox, stack_file)  # labels and constraints replaced wholesale
            wait_until(lambda: EXCLUDED in _labels(client), 30, "the record put back")
            time.sleep(6)  # past failback-delay and move-cooldown, several cycles
        log = ctl.out.getvalue()
        print(log)
        assert set(running_by_node(client, DB)) == {there}, "moved back after the deploy"
        assert sampler.minimum >= 1, sampler.samples
        assert RECOVERED in log

    # Deployed again while no controller runs: the next one starts with no memory.
    _deploy(sandbox, stack_file)
    assert EXCLUDED not in _labels(client), "the deploy replaced the record"
    with ControllerThread(sandbox.manager_host, policy=policy) as ctl:
        wait_until(lambda: EXCLUDED in _labels(client), 30, "the record put back")
        time.sleep(6)
        log = ctl.out.getvalue()
        print(log)
        assert set(running_by_node(client, DB)) == {there}, "moved back after a restart"
        assert RECOVERED in log
