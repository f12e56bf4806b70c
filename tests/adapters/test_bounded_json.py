"""JSON from outside is read within limits, and whatever the bytes, each input refuses
them with its own error: never RecursionError, never a crash (Hypothesis fuzzes each).

The inputs: a placement plugin's answers, an agent's report, the decision log read back
by `explain`. The webhook's body is fuzzed beside its other tests (tests/runtime).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.adapters.agent_client import AgentError, report_from
from controller.adapters.bounded_json import JsonInputError, nesting_depth, parse_json
from controller.adapters.decision_log import parse_decision_line
from controller.adapters.json_client import MAX_ANSWER_BYTES, HttpJsonError, answer_from
from controller.adapters.plugins import (
    FilterAnswer,
    HealthAnswer,
    PluginError,
    ScoreAnswer,
    _parse,
)

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


def _deep(depth: int, kind: int) -> bytes:
    if kind == 0:
        return b"[" * depth + b"]" * depth
    if kind == 1:
        return b'{"Vetoes":' * depth + b"[]" + b"}" * depth
    return b'{"a":[' * depth  # never closed


def _inserted(data: bytes, at: int, what: bytes) -> bytes:
    at %= len(data) + 1
    return data[:at] + what + data[at:]


# Bytes an attacker might send: noise, JSON (with NaN and Infinity, which Python's json
# writes), nests thousands deep, and JSON with a deep nest spliced in anywhere.
OUTSIDE_BYTES = st.one_of(
    st.binary(max_size=300),
    _VALUES.map(lambda v: json.dumps(v).encode()),
    st.builds(_deep, st.integers(30, 60_000), st.integers(0, 2)),
    st.builds(
        _inserted,
        _VALUES.map(lambda v: json.dumps({"Vetoes": [v], "node_id": "n", "at": 1.0}).encode()),
        st.integers(0, 10_000),
        st.builds(_deep, st.integers(1000, 20_000), st.just(0)),
    ),
)


def test_depth_counts_brackets_outside_strings_only() -> None:
    assert nesting_depth(b'[1, {"a": "[[[[{{"}, [[]]]') == 3
    assert nesting_depth(b'"\\"[[[" ') == 0
    assert parse_json(b'{"a": [1, "x"]}', max_bytes=100) == {"a": [1, "x"]}


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested 100000 deep, over the 32 limit"),
        (b'{"at": NaN}', "NaN is not a JSON number"),
        (b"[-Infinity]", "-Infinity is not a JSON number"),
        (b"[" + b"0," * 600_000 + b"0]", "1200003 bytes, over the 1048576 limit"),
        (b"\xff[]", "not UTF-8"),
        (b"[1,", "not JSON: Expecting value at line 1 column 4"),
    ],
)
def test_what_is_refused_is_named(raw: bytes, says: str) -> None:
    with pytest.raises(JsonInputError) as refused:
        parse_json(raw, max_bytes=1 << 20)
    assert says in str(refused.value)


@settings(max_examples=300, deadline=None)
@given(OUTSIDE_BYTES)
def test_parse_json_raises_nothing_but_its_own_error(raw: bytes) -> None:
    try:
        value = parse_json(raw, max_bytes=MAX_ANSWER_BYTES)
    except JsonInputError:
        return
    assert value == json.loads(raw)


@settings(max_examples=300, deadline=None)
@given(OUTSIDE_BYTES, st.sampled_from([FilterAnswer, ScoreAnswer, HealthAnswer]))
def test_a_plugin_answer_is_taken_or_refused_as_the_plugin_failing(raw: bytes, model: Any) -> None:
    try:
        answer = answer_from(raw, 200, "/PlacementDriver.Filter")
        _parse(model, "PlacementDriver.Filter", answer)
    except (HttpJsonError, PluginError):
        pass


@settings(max_examples=300, deadline=None)
@given(OUTSIDE_BYTES, st.sampled_from([200, 401, 500]))
def test_an_agent_report_is_taken_or_refused_as_the_agent_failing(raw: bytes, status: int) -> None:
    try:
        report = report_from(answer_from(raw, status, "/v1/report"))
    except (HttpJsonError, AgentError):
        return
    assert status == 200 and report.node_id


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        OUTSIDE_BYTES.map(lambda b: b.decode("utf-8", "replace")),
        OUTSIDE_BYTES.map(lambda b: "decision " + b.decode("utf-8", "replace")),
        st.builds(
            lambda n: 'decision time=t rule=r subject=s outcome=o reason="' + "[" * n + '"',
            st.integers(0, 50_000),
        ),
        st.builds(lambda n: 'x {"event": "decision", "reason": ' + "[" * n, st.integers(0, 50_000)),
    )
)
def test_a_decision_log_line_is_read_or_skipped(line: str) -> None:
    parse_decision_line(line)  # a Past or None; any exception fails the test
