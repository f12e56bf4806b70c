"""A sandbox is a real swarm: every node Ready, with its hostname, role, labels, resources."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.sandbox import Sandbox
from controller.sandbox.processes import netns_inode

MakeSandbox = Callable[..., Sandbox]

pytestmark = pytest.mark.swarm


def _running_tasks(sandbox: Sandbox, service_id: str) -> list[dict[str, object]]:
    client = sandbox.client()
    try:
        tasks = client.api.tasks(filters={"service": service_id, "desired-state": "running"})
    finally:
        client.close()
    return [t for t in tasks if t["Status"]["State"] == "running"]


def _wait_running(sandbox: Sandbox, service_id: str, count: int, timeout: float = 60.0) -> list:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while True:
        tasks = _running_tasks(sandbox, service_id)
        if len(tasks) >= count or time.monotonic() > deadline:
            return tasks
        time.sleep(0.2)


def test_three_nodes_ready_with_hostnames_roles_labels_and_resources(swarm: Sandbox) -> None:
    assert swarm.nodes == ["node-1", "node-2", "node-3"]
    nodes = {n["hostname"]: n for n in swarm.node_info()}
    assert sorted(nodes) == ["node-1", "node-2", "node-3"]
    assert all(n["state"] == "ready" and n["availability"] == "active" for n in nodes.values())
    assert [nodes[h]["role"] for h in swarm.nodes] == ["manager", "worker", "worker"]
    assert nodes["node-1"]["leader"]
    assert nodes["node-1"]["labels"] == {"rack": "r1"}
    assert nodes["node-3"]["labels"] == {"rack": "r2"}
    for node in swarm.state.nodes:
        assert nodes[node.hostname]["labels"] == node.labels
        assert nodes[node.hostname]["generic_resources"] == node.generic_resources == {"slot": 2}
    assert swarm.manager_host == swarm.docker_host("node-1")


def test_each_node_is_its_own_dockerd_with_its_own_address_and_the_same_image(
    swarm: Sandbox,
) -> None:
    hosts = {swarm.docker_host(n) for n in swarm.nodes}
    assert len(hosts) == 3
    assert all(h.startswith("unix:///") and h.endswith("/docker.sock") for h in hosts)
    inodes = {netns_inode(Path("/run/netns") / node.netns) for node in swarm.state.nodes}
    assert len(inodes) == 3
    for node in swarm.nodes:
        client = swarm.client(node)
        try:
            info = client.info()
            image = client.images.get(swarm.image_id)
        finally:
            client.close()
        assert info["Name"] == node
        assert info["Swarm"]["LocalNodeState"] == "active"
        assert image.id == swarm.image_id
    assert swarm.image_id.startswith("sha256:")


def test_a_global_service_by_image_id_runs_on_every_node(swarm: Sandbox) -> None:
    service_id = swarm.create_service("sbx-global", mode="global", stop_grace_seconds=1)
    try:
        tasks = _wait_running(swarm, service_id, 3)
        node_ids = {t["NodeID"] for t in tasks}
        assert len(node_ids) == 3
        assert all(t["Spec"]["ContainerSpec"]["Image"] == swarm.image_id for t in tasks)
    finally:
        swarm.client().api.remove_service(service_id)


def test_three_replicas_spread_over_the_three_nodes(swarm: Sandbox) -> None:
    service_id = swarm.create_service(
        "sbx-spread",
        replicas=3,
        labels={"sandbox.test": "spread"},
        reserve_generic={"slot": 1},
        restart_delay_seconds=0.5,
        stop_grace_seconds=1,
    )
    try:
        tasks = _wait_running(swarm, service_id, 3)
        assert len({t["NodeID"] for t in tasks}) == 3
        client = swarm.client()
        try:
            spec = client.api.inspect_service(service_id)["Spec"]
        finally:
            client.close()
        assert spec["Labels"] == {"sandbox.test": "spread"}
        assert spec["UpdateConfig"]["Order"] == "start-first"
    finally:
        swarm.client().api.remove_service(service_id)


@pytest.mark.slow
def test_eight_nodes_with_three_managers(make_sandbox: MakeSandbox) -> None:
    started = time.monotonic()
    sandbox = make_sandbox(nodes=8, managers=3, heartbeat_seconds=None)
    print(f"8 nodes / 3 managers up in {time.monotonic() - started:.1f} s")
    nodes = {n["hostname"]: n for n in sandbox.node_info()}
    assert sorted(nodes) == sorted(f"node-{i}" for i in range(1, 9))
    assert all(n["state"] == "ready" for n in nodes.values())
    managers = [h for h, n in nodes.items() if n["role"] == "manager"]
    assert sorted(managers) == ["node-1", "node-2", "node-3"]
    assert all(nodes[h]["reachability"] == "reachable" for h in managers)
    assert sum(n["leader"] for n in nodes.values()) == 1

    # Swarm's default heartbeat: the real failure-detection timing stays covered.
    sandbox.fail("node-8", "crash")
    down_after = sandbox.wait_node_state("node-8", "down", timeout=60)
    print(f"node-8 down {down_after:.1f} s after the crash (default heartbeat)")
    sandbox.restore("node-8")
    sandbox.wait_node_state("node-8", "ready", timeout=60)
