"""A write Docker refuses never starves the others, on a real 3-node swarm.

One managed service's every write is refused by Docker itself (the wrapper sends it with
a label whose value is a number, which the engine cannot decode: a real 400, not a
conflict). Another managed service, whose
restart delay is a minute, loses a task with a node: the controller must still adopt it
and fail it over at once, while the refused service is reported and backed off.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from controller.adapters.engine import update_service_spec
from controller.adapters.writes import Executor, docker_executor, naming_refusals
from controller.core.actions import Action, SetReplicas, target_of
from controller.core.labels import steering_constraint
from controller.sandbox import Sandbox

from .support import ControllerThread, clean_client, constraints_of, running_by_node, wait_until

pytestmark = pytest.mark.swarm
_names = itertools.count()
POLICY = """\
apiVersion: placement/v1
controller:
  resync-interval: 1s
nodes:
  quarantine: {failures: 100}
"""
# Not a string: the engine cannot decode the spec and answers 400 (an invalid constraint
# would not do: swarmkit answers it with a 500 on some versions).
BAD_LABEL = {"refused-by-test": 1}


@pytest.fixture
def client(swarm: Sandbox) -> Iterator[docker.DockerClient]:
    with clean_client(swarm) as c:
        yield c


def refusing(
    service_id: str, refused: list[docker.errors.APIError], written: list[Action]
) -> Callable[[docker.DockerClient], Executor]:
    """Every write to `service_id` goes to Docker with a label value Docker refuses."""

    def make(c: docker.DockerClient) -> Executor:
        real = docker_executor(c)

        def execute(action: Action) -> None:
            if target_of(action) != ("service", service_id):
                real(action)
                written.append(action)
                return
            attrs = c.api.inspect_service(service_id)
            spec = copy.deepcopy(attrs["Spec"])
            spec["Labels"] = {**(spec.get("Labels") or {}), **BAD_LABEL}
            try:
                update_service_spec(c, service_id, int(attrs["Version"]["Index"]), spec)
            except docker.errors.APIError as exc:
                refused.append(exc)
                raise
            raise AssertionError("Docker accepted a label whose value is a number")

        # Docker's own refusal, named as the adapters' executor names it.
        return naming_refusals(execute)

    return make


def _settled(client: docker.DockerClient, name: str) -> bool:
    spec = client.api.inspect_service(name)["Spec"]
    replicas = spec["Mode"]["Replicated"]["Replicas"]
    return bool(replicas == 3 and "swarm-placement.operation" not in spec["Labels"])


def test_a_refused_write_is_reported_and_another_service_still_fails_over(
    swarm: Sandbox, client: docker.DockerClient, tmp_path: Path
) -> None:
    n = next(_names)
    bad, web = f"a-refused{n}", f"b-web{n}"  # managed services are planned in name order
    managed = {"placement.managed": "true"}
    bad_id = swarm.create_service(bad, replicas=3, labels=managed)
    # Swarm alone would start web's lost task only after a minute.
    swarm.create_service(web, replicas=3, labels=managed, restart_delay_seconds=60)
    swarm.wait_services_running([bad, web])
    assert set(running_by_node(client, web)) == set(swarm.nodes), "one task per node"
    bad_version = int(client.api.inspect_service(bad)["Version"]["Index"])
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    refused: list[docker.errors.APIError] = []
    written: list[Action] = []

    executor = refusing(bad_id, refused, written)
    with ControllerThread(swarm.manager_host, policy=policy, executor=executor) as ctl:
        wait_until(lambda: steering_constraint(web) in constraints_of(client, web), 30, "adopted")
        swarm.fail("node-3", "crash")
        swarm.wait_node_state("node-3", "down")
        wait_until(lambda: sum(running_by_node(client, web).values()) == 3, 30, "web failed over")
        wait_until(
            lambda: (
                client.api.inspect_service(web)["Spec"]["Mode"]["Replicated"]["Replicas"] == 3
                and "swarm-placement.operation"
                not in client.api.inspect_service(web)["Spec"]["Labels"]
            ),
            30,
            "the surge trimmed",
        )
        log = ctl.out.getvalue()
    print(log)
    assert refused and all(e.status_code == 400 for e in refused), refused
    assert any(isinstance(a, SetReplicas) and a.service_name == web for a in written)
    assert f'rule=execute subject="service {bad}" outcome=failed' in log
    assert "cannot unmarshal" in log
    assert int(client.api.inspect_service(bad)["Version"]["Index"]) == bad_version
