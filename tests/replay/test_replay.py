"""Recorded cycles replayed through today's code give the stored writes and decisions.

The corpus (tests/replay/corpus) was recorded from real-swarm test runs with
PLACEMENT_RECORD_DIR set, and its expected results made by replaying it on the code
that recorded it; `python -m tests.replay.check` prints the first differing cycle.
The model check's sequences are stored as their steps and traced again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.core.model import NodeUsage
from controller.core.outside_inputs import (
    HealthReport,
    HealthState,
    LivenessSignal,
    PluginAdvice,
    PluginVeto,
    SourceStatus,
    WorkloadEvent,
    WorkloadEventKind,
)
from controller.runtime.cycle_recorder import plain
from tests.replay.check import check_record, check_sim, expected_of, first_difference, records
from tests.replay.engine_replay import decode, read_lines, replay


@pytest.mark.parametrize("record", records(), ids=lambda p: p.name.removesuffix(".jsonl.xz"))
def test_a_recorded_run_replays_to_the_same_writes_and_decisions(record: Path) -> None:
    assert expected_of(record).exists(), f"no expected results for {record.name}"
    difference = check_record(record)
    assert difference is None, difference


def test_the_corpus_has_writes_and_decisions_to_compare() -> None:
    cycles = [c for r in records() for c in read_lines(expected_of(r))]
    assert sum(len(c["writes"]) for c in cycles) >= 20
    assert sum(len(c["decisions"]) for c in cycles) >= 100


def test_a_changed_decision_or_write_is_found_at_its_cycle() -> None:
    record = next(r for r in records() if any(c["writes"] for c in read_lines(expected_of(r))))
    stored = list(read_lines(expected_of(record)))
    at = next(i for i, c in enumerate(stored) if c["writes"])
    changed = [dict(c) for c in stored]
    changed[at] = {**changed[at], "writes": changed[at]["writes"][1:]}
    difference = first_difference("x", iter(stored), iter(changed))
    assert difference is not None
    assert difference.startswith(f"x: entry {at} ")
    assert "write only before" in difference
    reworded = [dict(c) for c in stored]
    decision = {**reworded[0]["decisions"][0], "reason": "something else"}
    reworded[0] = {**reworded[0], "decisions": [decision, *reworded[0]["decisions"][1:]]}
    difference = first_difference("x", iter(stored), iter(reworded))
    assert difference is not None and "decision only now" in difference


def test_a_replay_of_the_same_record_is_the_same() -> None:
    record = records()[0]
    assert list(replay(read_lines(record))) == list(replay(read_lines(record)))


def test_outside_inputs_are_recorded_as_plain_values_and_read_back() -> None:
    values = (
        HealthReport("n1", HealthState.FAILED, "webhook", 12.5, "disk"),
        WorkloadEvent("t1", "s1", "n1", 3.0, WorkloadEventKind.UNHEALTHY, "probe"),
        LivenessSignal("n2", "gossip", False, 4.0),
        SourceStatus("agent", "n3", "timed out"),
        PluginAdvice(
            vetoes=(PluginVeto("veto", "s1", "n1", "no"),),
            scores={"s1": {"n1": 1.5}},
            answered=("veto",),
        ),
        NodeUsage(0.5, 0.25),
    )
    for value in values:
        assert decode(plain(value)) == value


@pytest.mark.slow
def test_the_model_checks_sequences_trace_the_same() -> None:
    difference = check_sim()
    assert difference is None, difference
