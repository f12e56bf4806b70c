"""The converters on attrs captured from a real sandbox swarm (see fixtures/capture.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.adapters.attrs import snapshot_from_attrs
from controller.core.model import (
    Availability,
    ClusterSnapshot,
    NodeRole,
    NodeState,
    ServiceMode,
    TaskState,
)

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("swarm-*.json"))


@pytest.fixture(params=FIXTURES, ids=[p.stem for p in FIXTURES])
def snap(request: pytest.FixtureRequest) -> ClusterSnapshot:
    data = json.loads(request.param.read_text())
    return snapshot_from_attrs(nodes=data["nodes"], services=data["services"], tasks=data["tasks"])


def test_there_is_a_captured_fixture() -> None:
    assert FIXTURES, "run `python -m tests.adapters.fixtures.capture` as root"


def test_nodes(snap: ClusterSnapshot) -> None:
    assert snap.unreadable == ()
    assert [n.hostname for n in snap.nodes] == ["node-1", "node-2", "node-3"]
    one, two, three = snap.nodes
    assert one.role is NodeRole.MANAGER and one.leader and one.manager_reachable
    assert two.role is three.role is NodeRole.WORKER
    assert all(
        n.state is NodeState.READY and n.availability is Availability.ACTIVE for n in snap.nodes
    )
    assert two.labels == {"rack": "r1"} and three.labels == {"rack": "r2"}
    assert two.capacity.generic == {"slot": 2} and three.capacity.generic == {"slot": 1}
    assert one.capacity.generic == {}
    assert all(n.capacity.nano_cpus > 0 and n.capacity.memory_bytes > 0 for n in snap.nodes)
    assert all(n.addr and n.platform_os == "linux" and n.updated_at > 0 for n in snap.nodes)


def test_services(snap: ClusterSnapshot) -> None:
    by_name = {s.name: s for s in snap.services}
    assert set(by_name) == {"web", "slots", "agent"}
    web, slots, agent = by_name["web"], by_name["slots"], by_name["agent"]
    assert (web.mode, web.replicas) == (ServiceMode.REPLICATED, 2)
    assert web.constraints == ("node.role==worker",)
    assert web.labels["placement.preferred-nodes"] == "node-2"
    assert web.update_order == "start-first" and web.version > 0
    assert slots.reservations.generic == {"slot": 1}
    assert (agent.mode, agent.replicas) == (ServiceMode.GLOBAL, None)


def test_tasks(snap: ClusterSnapshot) -> None:
    by_name = {s.name: s.id for s in snap.services}
    slots = snap.tasks_of(by_name["slots"])
    pending = [t for t in slots if t.is_pending]
    assert len(slots) == 4 and len(pending) == 1
    assert pending[0].node_id == "" and "insufficient resources" in pending[0].error
    assert all(t.desired_state is TaskState.RUNNING for t in snap.tasks)
    assert len(snap.tasks_of(by_name["agent"])) == 3
    assert all(t.updated_at > 0 and t.slot >= 0 for t in snap.tasks)
    placed = [t for t in snap.tasks if t.node_id]
    assert all(t.node_id in snap.node_by_id for t in placed)
