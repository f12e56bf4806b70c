"""A leader crash that finds no leader leaves its restore nothing to do: the restore
must not bring back an earlier crash's node, nor fail on an empty name."""

from __future__ import annotations

import itertools
import sys
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
