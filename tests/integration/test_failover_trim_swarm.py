"""Failover's trim on a real 4-node swarm when Swarm's replacement waits longer than the
trim's age limit (a restart delay of 40 s): the trim waits for it to run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from controller.adapters.engine import update_service_spec
from controller.sandbox import Sandbox, SandboxSpec

from .support import ControllerThread, RunningSampler, clean_client, running_by_node, wait_until

pytestmark = [pytest.mark.swarm, pytest.mark.slow]

POLICY = """\
apiVersion: placement/v1
controller:
  resync-interval: 1s
"""
RESTART_DELAY_SECONDS = 40.0  # past the trim's 30 s age limit


@pytest.fixture(scope="module")
def four() -> Iterator[Sandbox]:
    from tests.conftest import require_swarm_host, sandbox_name  # noqa: PLC0415

    require_swarm_host()
    sandbox = Sandbox.up(SandboxSpec(name=sandbox_name("trim"), nodes=4, heartbeat_seconds=1.0))
    try:
        yield sandbox
    finally:
        sandbox.down()


def _operation(c: docker.DockerClient, service: str) -> str | None:
    labels: dict[str, str] = c.api.inspect_service(service)["Spec"].get("Labels") or {}
    return labels.get("swarm-placement.operation")


def _replicas(c: docker.DockerClient, service: str) -> int:
    return int(c.api.inspect_service(service)["Spec"]["Mode"]["Replicated"]["Replicas"])


def test_a_restart_delay_past_the_trim_age_stops_no_running_task(four, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """api: 3 stop-first replicas reserving CPU and memory, two on one node, one on
    another, node-1 and node-4 empty, failover-mode confirmed. The node with one dies:
    Swarm's replacement waits 40 s on one empty node, the surge runs on the other.
    Back to 3 before the replacement runs, Swarm would drop the running second copy on
    the node with two and keep the replacement that does not run yet. Before, the trim
    went once the surge was 30 s old, and the count fell to 2 until the delay ended."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    with clean_client(four) as client:  # restores a failed node, whatever happens
        four.create_service(
            "api",
            replicas=3,
            labels={"placement.managed": "true", "placement.failover-mode": "confirmed"},
            constraints=["node.hostname!=node-1", "node.hostname!=node-4"],
            update_order="stop-first",
            restart_delay_seconds=RESTART_DELAY_SECONDS,
            reserve_cpus=0.1,
            reserve_memory_bytes=32 << 20,
        )
        four.wait_services_running(["api"])
        layout = running_by_node(client, "api")
        assert sorted(layout.values()) == [1, 2], layout
        single = next(h for h, n in layout.items() if n == 1)
        # Widen placement: a constraint change every task still satisfies restarts nothing.
        attrs = client.api.inspect_service("api")
        spec = attrs["Spec"]
        spec["TaskTemplate"]["Placement"]["Constraints"] = []
        update_service_spec(client, attrs["ID"], attrs["Version"]["Index"], spec)
        with ControllerThread(four.manager_host, policy=policy) as ctl:
            ctl.wait_cycles(2)
            assert running_by_node(client, "api") == layout, "adoption restarted nothing"
            four.fail(single, "crash")
            four.wait_node_state(single, "down")
            wait_until(lambda: sum(running_by_node(client, "api").values()) >= 3, 30, "surged")
            with RunningSampler(four.manager_host, "api", interval=0.1) as sampler:
                wait_until(
                    lambda: _operation(client, "api") is None and _replicas(client, "api") == 3,
                    RESTART_DELAY_SECONDS + 40,
                    "the surge trimmed",
                )
                wait_until(lambda: sum(running_by_node(client, "api").values()) == 3, 30, "3 run")
            out = ctl.out.getvalue()
        print(f"api after the surge ran: min {sampler.minimum} running of 3")
        waits = [line for line in out.splitlines() if "trim waits until" in line]
        print(waits[-1] if waits else out[-3000:])
        assert waits, "the trim had to wait for the delayed replacement"
        assert sampler.minimum >= 3, "the trim stopped a running task below the count"
