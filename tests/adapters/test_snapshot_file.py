"""Snapshot files: a recorded cluster loads back as the controller would observe it, and
a bad file or scenario is refused with a message naming the entry (exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.adapters.snapshot_file import (
    FORMAT,
    SnapshotFileError,
    load_snapshot,
    save_snapshot,
)
from controller.cli.main import main


def _node(i: int) -> dict[str, Any]:
    return {
        "ID": f"n{i}",
        "Version": {"Index": 10 + i},
        "Spec": {"Role": "worker", "Availability": "active", "Labels": {"rack": "r1"}},
        "Description": {"Hostname": f"node-{i}"},
        "Status": {"State": "ready", "Addr": f"10.0.0.{i}"},
    }


def _document() -> dict[str, Any]:
    service = {
        "ID": "s1",
        "Version": {"Index": 7},
        "Spec": {
            "Name": "web",
            "Mode": {"Replicated": {"Replicas": 1}},
            "TaskTemplate": {"RestartPolicy": {"Delay": 2_000_000_000}},
            "UpdateConfig": {"Parallelism": 2, "Monitor": 1_000_000_000},
        },
    }
    task = {
        "ID": "t1",
        "ServiceID": "s1",
        "NodeID": "n1",
        "Slot": 1,
        "DesiredState": "running",
        "Status": {"State": "running", "Timestamp": "2025-01-01T00:00:00.5Z"},
    }
    return {
        "format": FORMAT,
        "taken_at": "2025-01-01T00:00:01.000Z",
        "swarm": {"heartbeat_seconds": 1.0},
        "nodes": [_node(1), _node(2)],
        "services": [service],
        "tasks": [task],
    }


def test_a_saved_snapshot_loads_back_with_the_specs_the_simulation_needs(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    save_snapshot(path, _document())
    loaded = load_snapshot(path)
    assert [n.hostname for n in loaded.snapshot.nodes] == ["node-1", "node-2"]
    assert loaded.snapshot.tasks[0].node_id == "n1"
    assert loaded.heartbeat_seconds == 1.0
    assert loaded.taken_at == 1735689601.0
    assert loaded.restart_delay == {"s1": 2.0}
    assert loaded.update_monitor == {"s1": 1.0}
    assert loaded.update_parallelism == {"s1": 2}


def _errors(tmp_path: Path, content: str) -> list[str]:
    path = tmp_path / "snap.json"
    path.write_text(content)
    with pytest.raises(SnapshotFileError) as caught:
        load_snapshot(path)
    return [line.replace(str(path), "FILE") for line in caught.value.errors]


def test_bad_files_name_the_entry_and_the_field(tmp_path: Path) -> None:
    assert _errors(tmp_path, '{"format": ') == ["FILE:1:12: not JSON: Expecting value"]
    # Python's json recurses per level: a crafted file is an error, not a RecursionError.
    assert _errors(tmp_path, '{"nodes": ' + "[" * 5000) == [
        "FILE: nested deeper than 64: not a snapshot"
    ]
    assert _errors(tmp_path, "[]") == ["FILE: expected a JSON object, found list"]
    wrong = _errors(tmp_path, json.dumps({"format": "x"}))
    assert wrong[0].startswith("FILE: format is 'x'; expected 'swarm-placement/snapshot-v1'")
    doc = _document()
    del doc["tasks"][0]["ServiceID"]
    doc["nodes"][1]["Version"] = {}
    doc["services"].append(3)
    assert _errors(tmp_path, json.dumps(doc)) == [
        "FILE: services[1]: expected an object, found int",
        "FILE: nodes[1] (node n2): missing Version.Index",
        "FILE: tasks[0] (task t1): missing ServiceID",
    ]


def test_simulate_refuses_a_bad_scenario_or_file_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "snap.json"
    save_snapshot(path, _document())
    argv = ["simulate", "--snapshot", str(path), "--scenario"]
    assert main([*argv, "fail node-2; wiat 60s"]) == 2
    assert capsys.readouterr().err.strip() == (
        'scenario: step 2 "wiat 60s": unknown verb wiat; '
        "expected fail, restore, wait, drain, pause, activate"
    )
    path.write_text("{}")
    assert main([*argv, "wait 1s"]) == 2
    assert "format is None" in capsys.readouterr().err
    assert main(["simulate", "--snapshot", str(tmp_path / "none.json"), "--scenario", "x"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_simulate_prints_a_timeline_and_the_final_placement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "snap.json"
    save_snapshot(path, _document())
    scenario = "fail node-1; wait 10s"
    assert main(["simulate", "--snapshot", str(path), "--scenario", scenario]) == 0
    out = capsys.readouterr().out
    assert "node-1 is down" in out
    assert "web.1 will be replaced after the 2 s restart delay" in out
    assert out.rstrip().endswith("web  node-2 1")
