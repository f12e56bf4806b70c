"""The leader case's rules can fail: the reach of a write at the floor, and the
controller's reaction against a writer that surges the moment the free node is ready."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from failover import IDEAL_FLOOR, IDEAL_FREE, STACK_CASE, _reach, _reaction


def test_a_write_at_the_floor_running_later_than_2_s_puts_the_goal_out_of_reach() -> None:
    assert "out of reach" in _reach({IDEAL_FLOOR: [1.0, 3.5, 4.0]})
    assert "within reach" in _reach({IDEAL_FLOOR: [1.0, 1.5, 4.0]})
    assert _reach({STACK_CASE: [9.0]}) == ""


def test_the_reaction_fails_past_half_a_second_more_than_the_ideal_writer() -> None:
    ideal = [0.30, 0.35, 0.40]
    assert _reaction({STACK_CASE: [0.4, 0.8, 0.9], IDEAL_FREE: ideal}).startswith("reaction: PASS")
    assert _reaction({STACK_CASE: [0.4, 0.95, 2.0], IDEAL_FREE: ideal}).startswith("reaction: FAIL")
    assert _reaction({STACK_CASE: [0.4]}) == ""
