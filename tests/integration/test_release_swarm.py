"""Letting a service go on a real 4-node swarm: nothing it runs may stop.

A service held on its possible owners depends on the controller's node marks through
its constraint. When it leaves management the controller must take its constraints
back first and the marks after; `release --all` (uninstalling) takes back everything.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path

import docker
import pytest

from controller.adapters.engine_http import engine_url, post_json
from controller.cli.main import main
from controller.sandbox import Sandbox, SandboxSpec
from controller.sandbox.swarm import service_spec

from .support import (
    ControllerThread,
    RunningSampler,
    clean_client,
    constraints_of,
    running_by_node,
    running_task_ids,
    wait_until,
)

pytestmark = [pytest.mark.swarm, pytest.mark.slow]
OWN = "swarm-placement."
POLICY = """\
apiVersion: placement/v1
controller:
  move-cooldown: 2s
  resync-interval: 1s
"""
_names = itertools.count()


@pytest.fixture(scope="module")
def four() -> Iterator[Sandbox]:
    from tests.conftest import require_swarm_host, sandbox_name  # noqa: PLC0415

    require_swarm_host()
    sandbox = Sandbox.up(SandboxSpec(name=sandbox_name("rel"), nodes=4, heartbeat_seconds=1.0))
    try:
        yield sandbox
    finally:
        sandbox.down()


def _all_active(client: docker.DockerClient) -> None:
    """Lift the operator's pause a test set (clean_client lifts only the controller's)."""
    for node in client.api.nodes():
        if node["Spec"].get("Availability") != "active":
            spec = {**node["Spec"], "Availability": "active"}
            client.api.update_node(node["ID"], node["Version"]["Index"], spec)


@pytest.fixture
def client(four: Sandbox) -> Iterator[docker.DockerClient]:
    with clean_client(four, also=_all_active) as c:
        yield c


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def _create(
    four: Sandbox,
    client: docker.DockerClient,
    name: str,
    labels: Mapping[str, str],
    constraints: list[str],
) -> None:
    """3 stop-first replicas reserving CPU and memory: an evicted task stops before its
    replacement has a node, so any eviction shows in the running count. The operator's
    own constraints put it on its possible owners already: the controller only adds its
    constraints (no move), and they must stay after the release."""
    template = service_spec(
        image_id=four.image_id,
        command=["sleep", "100000"],
        constraints=constraints,
        reserve_generic=None,
        restart_delay_seconds=1.0,
        stop_grace_seconds=1.0,
    )
    template["Resources"] = {"Reservations": {"NanoCPUs": 100_000_000, "MemoryBytes": 16 << 20}}
    client.api.create_service(
        template,
        name=name,
        labels=dict(labels),
        mode={"Replicated": {"Replicas": 3}},
        update_config={"Parallelism": 1, "Order": "stop-first"},
    )


def _set_labels(client: docker.DockerClient, name: str, labels: Mapping[str, str]) -> None:
    """What `docker service update --label-add` does to Spec.Labels, as a raw update."""
    attrs = client.api.inspect_service(name)
    spec = {**attrs["Spec"], "Labels": {**(attrs["Spec"].get("Labels") or {}), **labels}}
    url = engine_url(client.api, "/services/{0}/update", attrs["ID"])
    post_json(client.api, url, data=spec, params={"version": attrs["Version"]["Index"]})


def _ours_on_service(client: docker.DockerClient, name: str) -> list[str]:
    spec = client.api.inspect_service(name)["Spec"]
    labels = [k for k in spec.get("Labels") or {} if k.startswith(OWN)]
    constraints = [c for c in constraints_of(client, name) if OWN in c or c.startswith("node.id")]
    return labels + constraints


def _ours_on_nodes(client: docker.DockerClient) -> dict[str, list[str]]:
    out = {}
    for node in client.api.nodes():
        own = [k for k in node["Spec"].get("Labels") or {} if k.startswith(OWN)]
        if own:
            out[node["Description"]["Hostname"]] = own
    return out


def _running(client: docker.DockerClient, name: str) -> int:
    return sum(running_by_node(client, name).values())


def _steered(client: docker.DockerClient, name: str, hosts: set[str]) -> bool:
    possible = f"node.labels.{OWN}possible.{name}==true"
    on = running_by_node(client, name)
    return possible in constraints_of(client, name) and set(on) == hosts and sum(on.values()) == 3


@pytest.mark.second_engine
def test_unmanaging_a_possible_owners_service_stops_none_of_its_tasks(
    four: Sandbox, client: docker.DockerClient, policy: Path
) -> None:
    name = f"db{next(_names)}"
    _create(
        four,
        client,
        name,
        {"placement.managed": "true", "placement.possible-nodes": "node-2,node-3"},
        ["node.hostname!=node-1", "node.hostname!=node-4"],
    )
    with ControllerThread(four.manager_host, policy=policy) as ctl:
        wait_until(lambda: _steered(client, name, {"node-2", "node-3"}), 90, "steered")
        tasks = running_task_ids(client, name)
        with RunningSampler(four.manager_host, name) as sampler:
            _set_labels(client, name, {"placement.managed": "false"})

            def settled() -> bool:
                released = not _ours_on_service(client, name) and not _ours_on_nodes(client)
                return released or min(sampler.samples, default=3) < 3

            wait_until(settled, 60, "the service released")
            ctl.wait_cycles(3)
        assert sampler.minimum >= 3, f"running tasks fell to {sampler.minimum} while released"
        assert not _ours_on_service(client, name)
        assert not _ours_on_nodes(client), "a possible-owner mark outlived the release"
        labels = client.api.inspect_service(name)["Spec"]["Labels"]
        assert labels == {"placement.managed": "false", "placement.possible-nodes": "node-2,node-3"}
        assert constraints_of(client, name) == ["node.hostname!=node-1", "node.hostname!=node-4"]
        assert running_task_ids(client, name) == tasks, "a task was restarted"
    assert f'subject="service {name}" outcome=release' in ctl.out.getvalue()


def test_release_all_takes_back_everything_and_keeps_the_service_running(
    four: Sandbox,
    client: docker.DockerClient,
    policy: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name = f"web{next(_names)}"
    _create(
        four,
        client,
        name,
        {"placement.managed": "true", "placement.possible-nodes": "node-2,node-3,node-4"},
        ["node.hostname!=node-1"],
    )
    with ControllerThread(four.manager_host, policy=policy):
        wait_until(
            lambda: (
                _steered(client, name, {"node-2", "node-3", "node-4"})
                and any(c.startswith("node.id!=") for c in constraints_of(client, name))
            ),
            90,
            "steered",
        )
    # A count the controller changed, as a preemption records it: release puts back 4.
    _set_labels(
        client,
        name,
        {
            OWN + "replicas": "4",
            OWN + "replicas-set": "3",
            OWN + "operation": "preempt",
            OWN + "operation-since": "0",
        },
    )
    # The controller's own pause of a node (as its health rule records it) and an
    # operator's pause of another: release takes back only the first.
    nodes = {n["Description"]["Hostname"]: n for n in client.api.nodes()}
    for host, labels in (("node-1", {OWN + "paused": "health"}), ("node-2", {})):
        spec = nodes[host]["Spec"]
        new = {**spec, "Availability": "pause", "Labels": {**spec.get("Labels", {}), **labels}}
        client.api.update_node(nodes[host]["ID"], nodes[host]["Version"]["Index"], new)
    monkeypatch.setenv("DOCKER_HOST", four.manager_host)

    assert main(["release", "--all", "--dry-run"]) == 0
    assert _ours_on_service(client, name), "a dry run wrote"
    with RunningSampler(four.manager_host, name) as sampler:
        assert main(["release", "--all"]) == 0
        wait_until(lambda: not _ours_on_nodes(client), 30, "no node label of ours")
    out = capsys.readouterr().out
    assert f"service {name}" in out and "node node-1" in out, out
    assert sampler.minimum >= 3
    assert not _ours_on_service(client, name)
    spec = client.api.inspect_service(name)["Spec"]
    assert spec["Mode"]["Replicated"]["Replicas"] == 4
    assert constraints_of(client, name) == ["node.hostname!=node-1"]
    availability = {
        n["Description"]["Hostname"]: n["Spec"]["Availability"] for n in client.api.nodes()
    }
    assert availability == {
        "node-1": "active",
        "node-2": "pause",
        "node-3": "active",
        "node-4": "active",
    }
    wait_until(lambda: _running(client, name) == 4, 60, "the recorded count running")
    assert main(["release", "--all"]) == 0  # nothing left: a no-op
