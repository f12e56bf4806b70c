"""The chaos benchmark's sampler tells the controller's stops from the schedule's faults."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import chaos_sample
from chaos_sample import Recorder


def _node(node_id: str) -> dict[str, Any]:
    return {
        "ID": node_id,
        "Description": {"Hostname": node_id},
        "Status": {"State": "ready"},
        "Spec": {"Availability": "active"},
    }


def _task(task_id: str, node: str, desired: str = "running") -> dict[str, Any]:
    state = "running" if desired == "running" else "shutdown"
    return {
        "ID": task_id,
        "ServiceID": "svc-web",
        "NodeID": node,
        "DesiredState": desired,
        "Status": {"State": state, "ContainerStatus": {"ContainerID": "c"}},
    }


SERVICE = {
    "ID": "svc-web",
    "Spec": {"Name": "app_web"},
    "Version": {"Index": 1},
}


def _recorder(answers: list[tuple[Any, ...]], faulted: list[set[str]]) -> Recorder:
    recorder = Recorder(desired={"web": 2}, budgets={"web": 1}, prefix="app_")
    recorder._read = lambda call: answers.pop(0)  # type: ignore[method-assign]
    recorder.faulted = lambda: faulted.pop(0)
    return recorder


def _both_stopped(nodes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    running = [_task("t1", "node-2"), _task("t2", "node-2")]
    stopped = [_task("t1", "node-2", "shutdown"), _task("t2", "node-2", "shutdown")]
    return [(nodes, [SERVICE], running), (nodes, [SERVICE], stopped)]


def test_tasks_stopped_on_a_sound_node_are_stops_and_past_the_budget_an_overrun() -> None:
    nodes = [_node("node-1"), _node("node-2")]
    recorder = _recorder(_both_stopped(nodes), [set(), set()])
    recorder._observe()
    recorder._observe()
    assert recorder.tally.stops == {"web": 2}
    assert [out for _, out in recorder.tally.overruns["web"]] == [2]
    # Each overrun keeps the stops it is made of, where they were: what the audit sets
    # beside the controller's writes.
    [made_of] = recorder.tally.overrun_stops["web"]
    assert sorted(host for _, host in made_of) == ["node-2", "node-2"]


def test_tasks_a_restarted_node_reports_stopped_are_the_fault_s_not_stops() -> None:
    # node-2's dockerd was killed and started again within the heartbeat grace: Swarm kept
    # it ready, and its agent reports the containers the restart stopped only now.
    nodes = [_node("node-1"), _node("node-2")]
    answers = _both_stopped(nodes)
    recorder = _recorder([answers[0], *answers], [{"node-2"}, set(), set()])
    for _ in range(3):  # killed, restored (its tasks still reported running), reported
        recorder._observe()
    assert recorder.tally.stops == {}
    assert recorder.tally.overruns == {}


def test_each_sample_says_on_which_node_the_counted_tasks_ran() -> None:
    # The second sample finds no manager: only the task off the failed node still counts.
    nodes = [_node("node-1"), _node("node-2")]
    running = [_task("t1", "node-1"), _task("t2", "node-2")]
    recorder = _recorder([(nodes, [SERVICE], running), None], [set(), {"node-2"}])
    recorder._observe()
    recorder._observe()
    first, second = recorder.tally.samples
    assert first.where == {"web": {"node-1": 1, "node-2": 1}}
    assert (second.running, second.where) == ({"web": 1}, {"web": {"node-1": 1}})
    assert (first.answered, second.answered) == (True, False)


def test_each_sample_keeps_the_node_states_and_when_a_task_waited_why() -> None:
    # A shortfall read back later needs the manager's view of the nodes then, and when
    # Swarm gave which reason for a waiting task (not just how often).
    nodes = [_node("node-1"), {**_node("node-2"), "Status": {"State": "unknown"}}]
    waiting = {
        **_task("t2", ""),
        "Status": {"State": "pending", "Err": "no suitable node (scheduling constraints ...)"},
    }
    answers = [(nodes, [SERVICE], [_task("t1", "node-1"), waiting]), None]
    recorder = _recorder(answers, [set(), set()])
    recorder.now = iter([1.0, 1.5]).__next__  # type: ignore[method-assign]
    recorder._observe()
    recorder._observe()
    first, second = recorder.tally.samples
    assert first.nodes == {"node-1": "ready", "node-2": "unknown"}
    assert second.nodes == {}  # no manager answered: no view to keep
    assert recorder.tally.waiting_at == {
        "web": {"no suitable node (scheduling constraints ...)": [1.0]}
    }


def test_a_slot_running_two_tasks_is_recorded_when_seen() -> None:
    # Two running tasks in one slot: more than the replicas, yet no scale-down removes
    # either (a rollout's leftover); the run's result says when it was seen.
    nodes = [_node("node-1"), _node("node-2")]
    one_each = [{**_task("t1", "node-1"), "Slot": 1}, {**_task("t2", "node-2"), "Slot": 2}]
    doubled = [*one_each, {**_task("t3", "node-2"), "Slot": 2}]
    answers = [(nodes, [SERVICE], one_each), (nodes, [SERVICE], doubled)]
    recorder = _recorder(answers, [set(), set()])
    recorder.now = iter([1.0, 1.5]).__next__  # type: ignore[method-assign]
    recorder._observe()
    recorder._observe()
    assert recorder.tally.doubled_at == {"web": [1.5]}


def _spec(image: str) -> dict[str, Any]:
    return {"Name": "app_web", "TaskTemplate": {"ContainerSpec": {"Image": image}}}


def _edited(after: dict[str, Any]) -> Recorder:
    """One edit of web seen by the recorder: web had spec A before, `after` once done."""
    nodes = [_node("node-1")]
    before = {**SERVICE, "Spec": _spec("a")}
    recorder = _recorder(
        [(nodes, [before], []), [{**SERVICE, "Version": {"Index": 2}, **after}]], [set()]
    )
    recorder.edit(["web"], lambda: (True, "ok"))
    return recorder


def test_an_edit_retried_with_the_same_spec_is_the_schedule_s_own() -> None:
    # A stack deploy refused half way and sent again: web got B, then B once more.
    recorder = _edited({"Spec": _spec("b"), "PreviousSpec": _spec("b")})
    assert recorder.tally.writes == {}


def test_a_write_slipped_in_during_an_edit_is_counted() -> None:
    recorder = _edited({"Spec": _spec("b"), "PreviousSpec": _spec("c")})
    assert list(recorder.tally.writes) == ["service web"]
    assert len(recorder.tally.writes["service web"]) == 1


class _SwarmMarkingNode2Down:
    """A Docker client whose swarm marks node-2 down, and stops its task, right after
    the first call of a sample: whatever the sampler reads first is one step older."""

    def __init__(self) -> None:
        self.calls = 0
        self.api = self

    def _down(self) -> bool:
        self.calls += 1
        return self.calls > 1

    def nodes(self) -> list[dict[str, Any]]:
        down = self._down()
        node2 = _node("node-2")
        if down:
            node2["Status"] = {"State": "down"}
        return [_node("node-1"), node2]

    def services(self) -> list[dict[str, Any]]:
        self._down()
        return [SERVICE]

    def tasks(self) -> list[dict[str, Any]]:
        down = self._down()
        return [_task("t1", "node-1"), _task("t2", "node-2", "shutdown" if down else "running")]


def test_a_node_marked_down_between_two_reads_is_no_stop_on_a_sound_node() -> None:
    recorder = _recorder([], [set(), set()])
    client = _SwarmMarkingNode2Down()
    before = [_node("node-1"), _node("node-2")]
    recorder._read = lambda call: (
        before,
        [SERVICE],
        [_task("t1", "node-1"), _task("t2", "node-2")],
    )  # type: ignore[method-assign]
    recorder._observe()
    recorder._read = lambda call: call(client)  # type: ignore[method-assign]
    recorder._observe()
    assert recorder.tally.stops == {}
    assert recorder.tally.overruns == {}


def test_an_edit_before_the_reset_excuses_stops_for_its_grace_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The warm-up's last deploy at 20 s, t = 0 at 35 s: a stop 30 s after t = 0 is 45 s
    # after that edit, long past its 20 s grace, and counts (as it would in every arm).
    clock = [0.0]
    monkeypatch.setattr(chaos_sample.time, "monotonic", lambda: clock[0])
    nodes = [_node("node-1"), _node("node-2")]
    seen_by_edit = [(nodes, [SERVICE], []), [SERVICE]]  # before the edit, and after it
    recorder = _recorder([*seen_by_edit, *_both_stopped(nodes)], [set()] * 3)
    clock[0] = 20.0
    recorder.edit(["web"], lambda: (True, "ok"))
    clock[0] = 35.0
    recorder.reset()
    clock[0] = 64.5
    recorder._observe()
    clock[0] = 65.0
    recorder._observe()
    assert recorder.tally.stops == {"web": 2}


def test_each_node_s_labels_are_kept_when_first_seen_and_when_they_change() -> None:
    marked = {**_node("node-2"), "Spec": {"Labels": {"swarm-placement.deny.app_web": "true"}}}
    answers = [
        ([_node("node-1"), _node("node-2")], [SERVICE], []),
        ([_node("node-1"), marked], [SERVICE], []),
        ([_node("node-1"), marked], [SERVICE], []),
    ]
    recorder = _recorder(answers, [set()] * 3)
    for t in (1.0, 1.5, 2.0):
        recorder.now = lambda t=t: t  # type: ignore[method-assign]
        recorder._observe()
    assert recorder.tally.node_labels == {
        "node-1": [[1.0, {}]],
        "node-2": [[1.0, {}], [1.5, {"swarm-placement.deny.app_web": "true"}]],
    }
