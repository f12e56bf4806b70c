"""A possible-owner mark while a new Raft leader calls its node unknown, on a real swarm.

Three managers and a worker, Swarm's default heartbeat. db (one stop-first replica that
reserves CPU and memory) may run only on node-4, and runs there. The Raft leader's
dockerd is killed and, during the election, the policy is changed so that only node-3
may run db: its mark on node-4 is no longer wanted. The new leader calls node-4
`unknown` until it reports; counted from ready nodes only, node-4 looked empty and the
mark went, and once node-4 reported Swarm's constraint enforcer stopped db there with no
replacement running. The mark must stay while db runs there, and db move by surge.
"""

from __future__ import annotations

import time
from pathlib import Path

import docker
import pytest
import requests

from controller.core.labels import possible_label

from .support import ControllerThread, RunningSampler, running_by_node, wait_until

pytestmark = [pytest.mark.swarm, pytest.mark.slow, pytest.mark.alone]

POLICY = """\
apiVersion: placement/v1
controller:
  resync-interval: 1s
  move-cooldown: 2s
services:
  - match: {{name: db}}
    managed: true
    possible-nodes: {owners}
"""


def _answered(read):  # type: ignore[no-untyped-def]
    """A read, or None while Raft elects a leader (the managers refuse it meanwhile)."""
    try:
        return read()
    except (docker.errors.DockerException, requests.RequestException):
        return None


def _labels(client: docker.DockerClient, hostname: str) -> dict[str, str]:
    for node in client.api.nodes():
        if node["Description"]["Hostname"] == hostname:
            return dict(node["Spec"].get("Labels") or {})
    return {}


def test_a_mark_stays_while_its_task_runs_on_a_node_a_new_leader_calls_unknown(
    make_sandbox, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    sandbox = make_sandbox(nodes=4, managers=3, heartbeat_seconds=None)
    leader = next(n["hostname"] for n in sandbox.node_info() if n["leader"])
    on = next(h for h in sandbox.nodes[:3] if h != leader)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(owners="node-4"))
    sandbox.create_service(
        "db",
        update_order="stop-first",
        reserve_cpus=0.1,
        reserve_memory_bytes=32 << 20,
    )
    sandbox.wait_services_running(["db"], timeout=60)
    client = docker.DockerClient(base_url=sandbox.docker_host(on), version="auto", timeout=10)
    try:
        with ControllerThread(sandbox.docker_host(on), policy=policy) as ctl:
            wait_until(
                lambda: (
                    _labels(client, "node-4").get(possible_label("db")) == "true"
                    and any("swarm-placement.possible.db" in c for c in _constraints(client))
                ),
                60,
                "db limited to node-4 by its mark",
            )
            with RunningSampler(sandbox.docker_host(on), "db", interval=0.1) as sampler:
                sandbox.fail(leader, "crash")
                time.sleep(0.5)
                policy.write_text(POLICY.format(owners="node-3"))
                try:
                    wait_until(
                        lambda: _answered(lambda: running_by_node(client, "db")) == {"node-3": 1},
                        120,
                        "db moved to node-3",
                    )
                    wait_until(
                        lambda: _answered(
                            lambda: possible_label("db") not in _labels(client, "node-4")
                        ),
                        60,
                        "node-4's mark gone once db left it",
                    )
                except AssertionError:
                    print(ctl.out.getvalue()[-8000:])
                    raise
            text = ctl.out.getvalue()
            print(f"db sampled every 0.1 s across the election: min {sampler.minimum} running")
            assert "node-4" in text and "unknown" in text, "the view was never a new leader's"
            assert sampler.minimum >= 1, "db stopped with no replacement running"
            print(text)
    finally:
        client.close()


def _constraints(client: docker.DockerClient) -> list[str]:
    spec = client.api.inspect_service("db")["Spec"]
    return list(spec["TaskTemplate"].get("Placement", {}).get("Constraints") or [])
