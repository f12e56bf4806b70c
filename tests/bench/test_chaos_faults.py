"""The schedule's own bookkeeping. A fault of a manager is addressed by the schedule
and records which manager led just before it (arms may differ there; the node may not).
A replica edit Swarm took after refusals changes the count the run wants."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_faults import Chaos
from chaos_schedule import Event


class _Node:
    def __init__(self, manager: bool) -> None:
        self.manager = manager


class _State:
    def node(self, name: str) -> _Node:
        return _Node(name != "node-4")


class _Sandbox:
    managers = ("node-1", "node-2", "node-3")
    state = _State()

    def __init__(self, leader: str = "node-2") -> None:
        self.restored: list[str] = []
        self.failed: list[tuple[str, str]] = []
        self.leader = leader

    def node_info(self) -> list[dict[str, Any]]:
        return [
            {"hostname": m, "role": "manager", "leader": m == self.leader,
             "reachability": "reachable"}
            for m in self.managers
        ]  # fmt: skip

    def fail(self, node: str, mode: str) -> None:
        self.failed.append((node, mode))

    def restore(self, node: str) -> None:
        self.restored.append(node)

    def docker_host(self, node: str) -> str:
        return f"unix:///{node}"


@pytest.mark.parametrize("node", ["node-2", "node-3"])
def test_a_manager_crash_hits_the_schedule_s_node_and_records_who_led(
    tmp_path: Path, node: str
) -> None:
    sandbox = _Sandbox(leader="node-2")
    chaos = Chaos(sandbox, None, None, tmp_path, {})  # type: ignore[arg-type]
    said = chaos.do(Event(100.0, "crash-manager", node=node))
    assert sandbox.failed == [(node, "crash")]
    assert chaos.manager_faults == [
        {"planned": 100.0, "event": "crash-manager", "node": node, "leader": "node-2"}
    ]
    assert said == node + (" (the leader)" if node == "node-2" else "")
    chaos.do(Event(115.0, "restore", node=node))
    assert sandbox.restored == [node]


def test_a_worker_s_fault_records_no_leader(tmp_path: Path) -> None:
    sandbox = _Sandbox()
    chaos = Chaos(sandbox, None, None, tmp_path, {})  # type: ignore[arg-type]
    assert chaos.do(Event(10.0, "cut", node="node-4")) == "node-4"
    assert sandbox.failed == [("node-4", "partition")]
    assert chaos.manager_faults == []


class _Recorder:
    def edit(self, services: list[str], write: Callable[[], tuple[bool, str]]) -> tuple[bool, str]:
        return write()


REFUSED = "raft: failed to process the request: node lost leader status"


@pytest.mark.parametrize(
    ("answer", "wanted"),
    [
        # Swarm took the edit on the second try: the refusal's own words say "failed".
        ((True, f"ok after 1 refusal(s): [{REFUSED!r}]"), 3),
        ((False, f"failed: [{REFUSED!r}]"), 2),
    ],
)
def test_a_replica_edit_counts_as_wanted_once_swarm_takes_it(
    tmp_path: Path, answer: tuple[bool, str], wanted: int
) -> None:
    desired = {"legacy": 2}
    chaos = Chaos(_Sandbox(), _Recorder(), None, tmp_path, desired)  # type: ignore[arg-type]
    chaos._cli = lambda argv: answer  # type: ignore[method-assign]
    chaos.do(Event(456.6, "replicas", service="legacy", value="3"))
    assert desired["legacy"] == wanted
