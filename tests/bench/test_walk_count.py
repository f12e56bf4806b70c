"""The walk script's table still matches the code, and its counting rule does what the
architecture doc says of it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import pytest
from walk_count import FORMS, Site, check_walk, doublings, main


def test_every_station_of_the_walk_is_in_the_code() -> None:
    walk = check_walk()  # raises SystemExit when a station or a hand-off is gone
    assert walk[-1][0].holder == "TaskTemplate.Placement.Constraints"
    assert not walk[0][1], "the first station receives nothing"


def test_the_first_site_of_a_form_computes_it_and_every_further_one_doubles_back() -> None:
    again, inverse = FORMS[0], next(f for f in FORMS if f.inverse)
    sites = [
        Site(again, "a.py:f", 1, ""),
        Site(again, "b.py:g", 2, ""),
        Site(inverse, "c.py:h", 3, ""),
    ]
    assert [s.where for s in doublings(sites)] == ["b.py:g", "c.py:h"]


@pytest.mark.parametrize(
    ("code", "form"),
    [
        ("steer(operator_constraints=[str(c) for c in constraints])", "back to text"),
        ("x = EXCLUDED_LABEL in service.labels", "excluded label"),
        ("return parse_constraint(text)", "constraint text parsed"),
    ],
)
def test_each_form_is_found_by_its_pattern(code: str, form: str) -> None:
    statement = ast.parse(code).body[0]
    assert [f.name for f in FORMS if f.matches(statement)] == [
        f.name for f in FORMS if form in f.name
    ]


def test_the_script_prints_its_figures_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("placement.preferred-nodes: ") and "hand-offs" in first
