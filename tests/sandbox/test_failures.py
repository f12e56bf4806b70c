"""Breaking a node (crash, stop, partition) makes Swarm mark it down; restoring brings it back."""

from __future__ import annotations

import pytest

from controller.sandbox import Sandbox, SandboxUsageError
from controller.sandbox import daemon as node_daemon

pytestmark = pytest.mark.swarm


@pytest.mark.parametrize("mode", ["crash", "stop", "partition"])
def test_failed_node_goes_down_and_comes_back_ready(swarm: Sandbox, mode: str) -> None:
    target = "node-3"
    service_id = swarm.create_service(
        f"sbx-fail-{mode}", mode="global", stop_grace_seconds=1, restart_delay_seconds=0.5
    )
    try:
        swarm.wait_services_running([f"sbx-fail-{mode}"])
        swarm.fail(target, mode)
        try:
            down_after = swarm.wait_node_state(target, "down", timeout=60)
            print(f"{mode}: {target} down {down_after:.1f} s after the failure (heartbeat 1 s)")
            node = swarm.state.node(target)
            if mode == "partition":
                assert node_daemon.dockerd_running(node)
            else:
                assert not node_daemon.dockerd_running(node)
                # A dockerd that is gone leaves its own containerd running.
                assert node_daemon.containerd_running(node)
        finally:
            swarm.restore(target)
        ready_after = swarm.wait_node_state(target, "ready", timeout=60)
        print(f"{mode}: {target} ready {ready_after:.1f} s after restore returned")
        assert swarm.state.node(target).failure is None
        # The node takes work again: the global service runs a task there.
        swarm.wait_services_running([f"sbx-fail-{mode}"], timeout=60)
    finally:
        client = swarm.client()
        try:
            client.api.remove_service(service_id)
        finally:
            client.close()


def test_failing_a_failed_node_again_is_refused(swarm: Sandbox) -> None:
    swarm.fail("node-2", "partition")
    try:
        with pytest.raises(SandboxUsageError, match="already failed"):
            swarm.fail("node-2", "crash")
    finally:
        swarm.restore("node-2")
    swarm.wait_node_state("node-2", "ready", timeout=60)


def test_unknown_mode_is_refused(swarm: Sandbox) -> None:
    with pytest.raises(SandboxUsageError, match="unknown failure mode"):
        swarm.fail("node-2", "melt")
