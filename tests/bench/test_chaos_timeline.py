"""A failed chaos pair is read back from its log: the timeline says when each event was
done, who led, when no manager answered and when each node was seen other than ready."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_report import timeline


def _sample(t: float, answered: bool, nodes: dict[str, str]) -> list[object]:
    return [t, answered, {}, {}, nodes, [], {}]


def test_the_timeline_names_events_leaders_silences_and_node_states() -> None:
    run = {
        "events": [
            {"event": "crash node-2", "at": 26.9, "planned": 26.9, "took": 0.1, "detail": "node-2"}
        ],
        "manager_faults": [{"node": "node-2", "planned": 26.9, "leader": "node-1"}],
        "samples_seen": [
            _sample(1.0, True, {"node-1": "ready", "node-2": "ready"}),
            _sample(2.0, True, {"node-1": "ready", "node-2": "down"}),
            _sample(3.0, False, {"node-1": "ready", "node-2": "down"}),
            _sample(4.0, True, {"node-1": "ready", "node-2": "down"}),
            _sample(5.0, True, {"node-1": "ready", "node-2": "ready"}),
            _sample(6.0, True, {"node-1": "unknown", "node-2": "ready"}),
        ],
    }
    lines = timeline(run).splitlines()
    assert lines == [
        "   26.9s crash node-2 (planned 26.9, took 0.1 s): node-2",
        "  leader before each manager fault: node-2 at 26.9 s: node-1",
        "  no manager answered: 3.0-4.0",
        "  node-1 not ready: 6.0-6.0",
        "  node-2 not ready: 2.0-5.0",
    ]


def test_a_run_recorded_before_the_timeline_existed_still_reads() -> None:
    assert timeline({}).splitlines() == [
        "  leader before each manager fault: none recorded",
        "  no manager answered: never",
    ]
