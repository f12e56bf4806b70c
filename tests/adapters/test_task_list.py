"""Tasks decoded with only the fields the controller reads convert exactly as whole ones,
on answers captured from both engines (fixtures/), and odd answers are decoded whole."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from controller.adapters.attrs import task_from_attrs
from controller.adapters.health_attrs import failure_events_from_attrs
from controller.adapters.task_list import decode_tasks

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("swarm-*.json"))


def _answers(path: Path) -> list[dict[str, Any]]:
    """The captured tasks, and each again as Swarm keeps it after a failure."""
    tasks: list[dict[str, Any]] = json.loads(path.read_text())["tasks"]
    failed = []
    for index, task in enumerate(tasks):
        done = copy.deepcopy(task)
        done["ID"] = f"{task['ID']}-failed"
        done["DesiredState"] = "shutdown"
        done["Status"] |= {"State": "failed", "Err": f"task: non-zero exit ({index})"}
        failed.append(done)
    return [*tasks, *failed]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_cut_tasks_convert_as_whole_ones_on_both_engines(path: Path) -> None:
    whole = _answers(path)
    cut = decode_tasks(json.dumps(whole).encode())
    assert all("Spec" not in t and "NetworksAttachments" not in t for t in cut)
    assert [task_from_attrs(t) for t in cut] == [task_from_attrs(t) for t in whole]
    events = failure_events_from_attrs(cut)
    assert len(events) == sum(
        1 for t in whole if t["Status"]["State"] == "failed" and t.get("NodeID")
    )
    assert events == failure_events_from_attrs(whole)


def test_an_answer_of_another_shape_is_decoded_whole() -> None:
    odd = [{"ID": "t1", "ServiceID": "s", "Status": None, "Spec": {"Name": "x"}}]
    assert decode_tasks(json.dumps(odd).encode()) == odd
    with pytest.raises(ValueError):
        decode_tasks(b"[{")
