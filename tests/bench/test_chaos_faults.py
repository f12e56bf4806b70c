"""The schedule's own bookkeeping. A leader crash that finds no leader leaves its restore
nothing to do: the restore must not bring back an earlier crash's node, nor fail on an
empty name. A replica edit Swarm took after refusals changes the count the run wants."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import chaos_faults
from chaos_faults import Chaos
from chaos_schedule import Event


class _Sandbox:
    managers = ("node-1", "node-2", "node-3")

    def __init__(self) -> None:
        self.restored: list[str] = []

    def node_info(self) -> list[dict[str, Any]]:
        return [{"hostname": m, "role": "manager", "leader": False} for m in self.managers]

    def restore(self, node: str) -> None:
        self.restored.append(node)


def test_a_restore_after_a_leader_crash_that_found_no_leader_restores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = itertools.count(step=10.0)  # the 30 s wait for an election passes at once
    monkeypatch.setattr(chaos_faults.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(chaos_faults.time, "sleep", lambda seconds: None)
    sandbox = _Sandbox()
    chaos = Chaos(sandbox, None, None, tmp_path, {})  # type: ignore[arg-type]
    chaos._leader_victim = "node-2"  # an earlier leader crash, restored since
    assert chaos.do(Event(100.0, "crash-leader")) == "no leader found"
    said = chaos.do(Event(115.0, "restore"))
    assert sandbox.restored == []
    assert not said.startswith("failed") and "found no leader" in said


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
