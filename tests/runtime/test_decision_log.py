from __future__ import annotations

import io
import json

from controller.core.actions import SetServiceConstraints
from controller.core.decisions import Decision, Outcome
from controller.runtime.tracing import DecisionLog

ADOPT = Decision(
    "adoption",
    "service web",
    Outcome.ADOPT,
    "placement.managed is true",
    SetServiceConstraints("s1", "web", 2, ("x",)),
)
WAIT = Decision("adoption", "service db", Outcome.WAIT, "Swarm is rolling an update (updating)")


def test_logfmt_line_carries_rule_subject_outcome_reason_action() -> None:
    out = io.StringIO()
    DecisionLog(out).write([ADOPT], now=0.0)
    line = out.getvalue().strip()
    assert line.startswith("decision time=1970-01-01T00:00:00.000+00:00 rule=adoption ")
    assert 'subject="service web"' in line and "outcome=adopt" in line
    assert (
        'reason="placement.managed is true"' in line
        and "action=\"service web: constraints = ['x']\"" in line
    )


def test_json_lines() -> None:
    out = io.StringIO()
    DecisionLog(out, "json").write([WAIT], now=0.0)
    record = json.loads(out.getvalue())
    assert record["event"] == "decision" and record["subject"] == "service db"
    assert "action" not in record


def test_an_unchanged_decision_is_logged_once_and_again_after_it_lapses() -> None:
    out = io.StringIO()
    log = DecisionLog(out)
    log.write([WAIT], now=0.0)
    log.write([WAIT], now=1.0)
    assert out.getvalue().count("outcome=wait") == 1
    log.write([], now=2.0)
    log.write([WAIT], now=3.0)
    assert out.getvalue().count("outcome=wait") == 2


def test_a_decision_repeated_with_an_equal_new_action_is_logged_once() -> None:
    def adopt() -> Decision:
        action = SetServiceConstraints("s1", "web", 2, ("x",), set_labels={"a": "1"})
        return Decision("adoption", "service web", Outcome.ADOPT, "managed", action)

    out = io.StringIO()
    log = DecisionLog(out)
    log.write([adopt()], now=0.0)
    log.write([adopt()], now=1.0)
    assert out.getvalue().count("outcome=adopt") == 1
