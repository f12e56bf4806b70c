"""A chaos arm is kept with what a loss is scored from again, and written whole."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_record import compact, write_json


def test_an_arm_is_kept_with_its_samples_reduced_to_what_a_loss_is_scored_from() -> None:
    result = {
        "services": {"db": {"lost": 1.0, "waiting_at": {"x": [1.0]}}},
        "samples": 1,
        "decisions": [{"t": 1.0, "msg": "m", "level": "info", "time": "x", "rule": "owners"}],
        "samples_seen": [[0.5, True, {"db": 0}, {"db": {"node-1": 0}}, {"node-1": "ready"},
                          ["node-2"], {"db": 1}]],
    }  # fmt: skip
    kept = compact(result)
    assert kept["samples_seen"] == [[0.5, True, [0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0],
                                     ["node-2"]]]  # fmt: skip
    assert kept["services"] == {"db": {"lost": 1.0}}
    assert kept["samples"] == 1
    assert kept["decisions"] == [{"t": 1.0, "rule": "owners"}]


def test_a_document_is_written_aside_then_moved_into_place(tmp_path: Path) -> None:
    path = tmp_path / "ab-101.json"
    write_json(path, {"pair": "ab-101"})
    assert json.loads(path.read_text()) == {"pair": "ab-101"}
    assert [p.name for p in tmp_path.iterdir()] == ["ab-101.json"]
