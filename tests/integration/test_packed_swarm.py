"""Speculative failover on a real swarm where every node already holds a replica.

A stop-first service with 4 replicas on 4 nodes, 0.25 CPU reserved each, the agents on
every node and the controller a process on the manager, as the stack runs them:

- A 2 s link blip of a worker: with agents it may be suspected (both probes fail from
  everywhere) and so surged beside a replica; the false alarm's trim drops the surged
  copy. No original task is restarted, never fewer than 4 run, and the count is back to
  exactly 4 with no record at the end.
- A worker's dockerd killed: every signal agrees at once, so its replica is surged
  beside another before Swarm marks the node down.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from controller.sandbox import Sandbox

from .support import RunningSampler, clean_client, task_ids_by_node, wait_until
from .test_speculative_swarm import (
    DownWatch,
    agents_and_controller,
    default_heartbeat_sandbox,
    history,
    node_state,
    running_off,
    settled,
    speculated_at,
)

pytestmark = [pytest.mark.swarm, pytest.mark.slow, pytest.mark.alone]

REPLICAS = 4


@pytest.fixture(scope="module")
def packed_sandbox() -> Iterator[Sandbox]:
    with default_heartbeat_sandbox("packed", nodes=4, managers=1) as sandbox:
        yield sandbox


def start_packed(sandbox: Sandbox, client) -> dict[str, set[str]]:  # type: ignore[no-untyped-def]
    sandbox.create_service("web", replicas=REPLICAS, update_order="stop-first", reserve_cpus=0.25)
    sandbox.wait_services_running(["web"], timeout=60)
    return wait_until(
        lambda: (t := task_ids_by_node(client, "web")) and len(t) == REPLICAS and t,
        60,
        "one running task of web on every node",
    )


def test_a_two_second_blip_in_the_packed_layout_restarts_nothing(
    packed_sandbox: Sandbox, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    sandbox = packed_sandbox
    victim = "node-3"
    with clean_client(sandbox) as client:
        before = start_packed(sandbox, client)
        with agents_and_controller(sandbox, tmp_path) as log:
            with RunningSampler(sandbox.manager_host, "web") as sampler:
                sandbox.fail(victim, "partition")
                time.sleep(2.0)
                sandbox.restore(victim)
                time.sleep(6.0)  # a surge from the blip's last probes is written by now
                wait_until(
                    lambda: settled(client, REPLICAS), 60, "web back to exactly 4, no record"
                )
            text = log.read_text()
            assert node_state(client, victim) == "ready", text[-3000:]
            # Every original still runs, the same task on the same node.
            assert task_ids_by_node(client, "web") == before, history(client)
            assert sampler.minimum >= REPLICAS, sampler.samples
            if "outcome=speculate" in text:
                assert "beside a replica" in text, text[-4000:]
                cost = text.split("false alarm cost ", 1)[1].split(")", 1)[0]
                print(f"\npacked blip: surged beside a replica, false alarm cost {cost}")
            else:
                print("\npacked blip: nothing surged")


def test_a_killed_worker_in_the_packed_layout_is_surged_before_swarm_s_down(
    packed_sandbox: Sandbox, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    sandbox = packed_sandbox
    victim = "node-3"
    with clean_client(sandbox) as client:
        start_packed(sandbox, client)
        with agents_and_controller(sandbox, tmp_path) as log:
            killed, watch = time.monotonic(), DownWatch(sandbox.manager_host, victim)
            sandbox.fail(victim, "crash")
            wait_until(
                lambda: running_off(client, victim) >= REPLICAS,
                60,
                f"{REPLICAS} replicas running off {victim}",
            )
            replaced = time.monotonic() - killed
            down_at = watch.wait()
            text = log.read_text()
            print(f"\npacked kill: replicas elsewhere {replaced:.1f} s after the kill")
            assert speculated_at(text) < down_at, text[-4000:]
            assert "beside a replica" in text, text[-4000:]
            wait_until(lambda: settled(client, REPLICAS), 90, "web back to exactly 4")
