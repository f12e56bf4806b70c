"""Scenario text: steps, and errors that name the step, its text and what was expected."""

from __future__ import annotations

import pytest

from controller.core.simulate import ScenarioError, parse_scenario

NODES = ["node-1", "node-2", "node-3"]


def test_steps_in_order_with_durations() -> None:
    steps = parse_scenario(
        "fail node-2; wait 60s; restore node-2;\nwait 2m ; drain node-3", nodes=NODES
    )
    assert [(s.index, s.verb, s.node, s.seconds) for s in steps] == [
        (1, "fail", "node-2", 0.0),
        (2, "wait", "", 60.0),
        (3, "restore", "node-2", 0.0),
        (4, "wait", "", 120.0),
        (5, "drain", "node-3", 0.0),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "fail node-2; wait 60s; wiat 60s",
            'scenario: step 3 "wiat 60s": unknown verb wiat; '
            "expected fail, restore, wait, drain, pause, activate",
        ),
        (
            "fail node-9",
            'scenario: step 1 "fail node-9": no node node-9 in the snapshot '
            "(nodes: node-1, node-2, node-3)",
        ),
        (
            "wait soon",
            'scenario: step 1 "wait soon": soon is not a duration; expected e.g. 60s, 2m or 1h30m',
        ),
        ("fail", 'scenario: step 1 "fail": expected one node, e.g. fail node-2'),
        ("wait 1s 2s", 'scenario: step 1 "wait 1s 2s": expected a duration, e.g. wait 60s'),
        (
            " ; ;",
            'scenario: no steps; expected steps such as "fail node-2; wait 60s; restore node-2"',
        ),
    ],
)
def test_bad_scenarios_say_where_and_what(text: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, nodes=NODES)
    assert str(caught.value) == message
