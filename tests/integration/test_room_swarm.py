"""Moves that fit, on a real 4-node swarm: a target must have room, a stop-first service
is moved start-first or not at all, and one placement is not split by the cooldown.

Every node offers `slot=1`. A filler service the controller does not manage takes the
slot of the node it should not be able to use, so Swarm itself would leave a task sent
there pending.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from controller.adapters.engine_http import engine_url, post_json
from controller.sandbox import Sandbox, SandboxSpec

from .support import ControllerThread, RunningSampler, clean_client, running_by_node, wait_until

pytestmark = [pytest.mark.swarm, pytest.mark.slow]
_names = itertools.count()

# The default move-cooldown (300 s) stays: a placement split by it would time out here.
POLICY = """\
apiVersion: placement/v1
controller:
  resync-interval: 1s
"""


@pytest.fixture(scope="module")
def slots() -> Iterator[Sandbox]:
    from tests.conftest import require_swarm_host, sandbox_name  # noqa: PLC0415

    require_swarm_host()
    sandbox = Sandbox.up(
        SandboxSpec(
            name=sandbox_name("room"),
            nodes=4,
            generic_resources={f"node-{i}": {"slot": 1} for i in range(1, 5)},
            heartbeat_seconds=1.0,
        )
    )
    try:
        yield sandbox
    finally:
        sandbox.down()


@pytest.fixture
def client(slots: Sandbox) -> Iterator[docker.DockerClient]:
    with clean_client(slots) as c:
        yield c


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def _name(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


def _managed(**settings: str) -> dict[str, str]:
    labels = {"placement.managed": "true"}
    labels.update({f"placement.{k.replace('_', '-')}": v for k, v in settings.items()})
    return labels


@pytest.mark.second_engine
def test_a_stop_first_service_is_not_moved_to_a_full_preferred_node(slots, client, policy) -> None:  # type: ignore[no-untyped-def]
    filler = _name("fill")
    slots.create_service(filler, constraints=["node.hostname==node-2"], reserve_generic={"slot": 1})
    slots.wait_services_running([filler])
    db = _name("db")
    slots.create_service(
        db,
        update_order="stop-first",
        reserve_generic={"slot": 1},
        labels=_managed(preferred_nodes="node-2"),
    )
    slots.wait_services_running([db])
    where = running_by_node(client, db)
    assert "node-2" not in where, "node-2 has no free slot"

    with (
        RunningSampler(slots.manager_host, db) as sampler,
        ControllerThread(slots.manager_host, policy=policy) as ctl,
    ):
        wait_until(lambda: "no room on node-2" in ctl.out.getvalue(), 30, "the refusal")
        ctl.wait_cycles(5)
        time.sleep(2)  # a move written in the last cycle would have stopped the task by now
    log = ctl.out.getvalue()
    print(log)
    assert sampler.minimum == 1, sampler.samples
    assert running_by_node(client, db) == where
    assert f'subject="service {db}" outcome=move' not in log


def test_a_stop_first_service_moves_start_first_when_there_is_room(slots, client, policy) -> None:  # type: ignore[no-untyped-def]
    # Swarm puts the service on the emptiest node; fillers (reserving nothing) make
    # node-3 busier, so the preferred owner is not Swarm's own pick.
    fillers = [_name("fill") for _ in range(2)]
    for name in fillers:
        slots.create_service(name, constraints=["node.hostname==node-3"])
    slots.wait_services_running(fillers)
    db = _name("db")
    slots.create_service(db, update_order="stop-first", reserve_generic={"slot": 1})
    slots.wait_services_running([db])
    assert "node-3" not in running_by_node(client, db)
    spec = client.api.inspect_service(db)
    new = {**spec["Spec"], "Labels": _managed(preferred_nodes="node-3")}
    _raw_update(client, spec, new)

    with (
        RunningSampler(slots.manager_host, db) as sampler,
        ControllerThread(slots.manager_host, policy=policy) as ctl,
    ):
        wait_until(lambda: running_by_node(client, db) == {"node-3": 1}, 60, "on node-3")
        wait_until(lambda: _replicas(client, db) == 1, 60, "the surge trimmed")
    log = ctl.out.getvalue()
    print(log)
    assert sampler.minimum >= 1, sampler.samples


def test_two_preferred_nodes_are_reached_without_waiting_out_the_cooldown(
    slots, client, policy
) -> None:  # type: ignore[no-untyped-def]
    fillers = [_name("fill") for _ in range(4)]
    for name, host in zip(fillers, ["node-3", "node-3", "node-4", "node-4"], strict=True):
        slots.create_service(name, constraints=[f"node.hostname=={host}"])
    slots.wait_services_running(fillers)
    web = _name("web")
    slots.create_service(web, replicas=2)
    slots.wait_services_running([web])
    assert set(running_by_node(client, web)).isdisjoint({"node-3", "node-4"}), "Swarm's pick"
    spec = client.api.inspect_service(web)
    labels = _managed(preferred_nodes="node-3,node-4", failback="immediate", failback_delay="0s")
    _raw_update(client, spec, {**spec["Spec"], "Labels": labels})

    with ControllerThread(slots.manager_host, policy=policy) as ctl:
        wait_until(
            lambda: running_by_node(client, web) == {"node-3": 1, "node-4": 1},
            90,
            "both replicas on their preferred owners",
        )
    log = ctl.out.getvalue()
    print(log)
    assert "cooldown" not in log


def _raw_update(client: docker.DockerClient, spec: dict, new: dict) -> None:  # type: ignore[type-arg]
    url = engine_url(client.api, "/services/{0}/update", spec["ID"])
    post_json(client.api, url, data=new, params={"version": spec["Version"]["Index"]})


def _replicas(client: docker.DockerClient, service: str) -> int:
    spec = client.api.inspect_service(service)["Spec"]
    return int(spec["Mode"]["Replicated"]["Replicas"])
