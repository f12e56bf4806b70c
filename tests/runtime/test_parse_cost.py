"""Every parser of outside bytes costs time linear in their length, and refuses them with
its own error only.

The parsers: a plugin's answers, an agent's report and probe answer, the health
webhook's body, the web view's cookie and bearer header, the decision log read back,
the agent's Docker proxy's request head.
Each gets hand-made worst cases (an unterminated string of escaped quotes, which cost a
regex k squared steps; deep nests; numbers of many digits; long escapes; many keys or
items) up to its size cap, and Hypothesis's bytes. The bound is CPU time
(`time.process_time`, not the wall clock): at most `PER_KIB_SECONDS` per KiB above a
floor, over ten times what the slowest case takes at 1 MiB (0.17 s), and a twelfth of
what the quadratic pattern took at 16 KiB (1 s). A case over the bound is measured up
to three times and its least kept: a pause of the machine is not a cost of the input.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from controller.adapters.agent_client import AgentError, probe_answer_from, report_from
from controller.adapters.agent_report import AgentReport
from controller.adapters.bounded_json import JsonInputError, parse_json
from controller.adapters.decision_log import MAX_LINE_BYTES, parse_decision_line
from controller.adapters.json_client import MAX_ANSWER_BYTES, HttpJsonError, answer_from
from controller.adapters.plugins import (
    ActivateAnswer,
    FilterAnswer,
    HealthAnswer,
    PluginError,
    ScoreAnswer,
    _parse,
)
from controller.runtime.docker_proxy import MAX_READ, RefusedRequestError, rebuilt_request
from controller.runtime.health_store import HealthStore
from controller.runtime.http_replies import bearer_matches
from controller.runtime.http_server import MAX_HEADER_BYTES
from controller.runtime.ui_access import COOKIE, UiAccess
from controller.runtime.webhook import DEFAULT_MAX_BODY, HealthApi, _RequestError
from tests.adapters.test_bounded_json import OUTSIDE_BYTES
from tests.core.builders import node, snapshot

FLOOR_SECONDS = 0.05
PER_KIB_SECONDS = 0.002
HEADER_CAP = MAX_HEADER_BYTES  # what the HTTP server takes in one request head


def _bound(size: int) -> float:
    return FLOOR_SECONDS + PER_KIB_SECONDS * size / 1024


@dataclass(frozen=True)
class Parser:
    name: str
    cap: int  # the most bytes it is ever given
    read: Callable[[bytes], object]
    own: tuple[type[BaseException], ...]  # what it may raise
    fields: tuple[str, ...] = ()  # keys worth filling with many items
    extra: Callable[[int], Iterator[tuple[str, bytes]]] | None = None  # its own worst cases


def _plugin(model: Any) -> Callable[[bytes], object]:
    def read(raw: bytes) -> object:
        return _parse(model, "PlacementDriver", answer_from(raw, 200, "/PlacementDriver"))

    return read


def _webhook() -> Callable[[bytes], object]:
    api = HealthApi(
        token="t0ken",
        store=HealthStore(),
        latest=lambda: snapshot([node(1, manager=True), node(2)], []),
        on_report=lambda _: None,
        clock=lambda: 1000.0,
    )
    return lambda raw: api.accept(raw, caller="10.0.0.9")


def _request(name: bytes, raw: bytes) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/ui", "headers": [(name, raw)]})


def _cookie() -> Callable[[bytes], object]:
    access = UiAccess.configured(token="t" * 32, hosts=(), tls=False)
    return lambda raw: access.authorized(_request(b"cookie", COOKIE.encode() + b"=" + raw))


def _bearer(raw: bytes) -> object:
    return bearer_matches(_request(b"authorization", raw).headers.get("authorization"), "t" * 32)


def head_cases(size: int) -> Iterator[tuple[str, bytes]]:
    """Request heads of about `size` bytes that cost a careless head parser the most."""
    line = b"GET /v1.41/containers/json HTTP/1.1\r\n"
    yield "many header lines", _fit(b"X-A: b\r\n", size, line, b"\r\n")
    yield "many bare LF lines", _fit(b"X-A: b\n", size, line, b"\r\n\r\n")
    yield "many bare CRs", _fit(b"\r", size, line, b"\r\n\r\n")
    yield "a long target", _fit(b"a", size, b"GET /v1.41/containers/json?", b" HTTP/1.1\r\n\r\n")
    yield "a long container ID", _fit(b"a", size, b"GET /containers/", b"/stats HTTP/1.1\r\n\r\n")
    yield "many spaces", _fit(b" ", size, b"GET", b"HTTP/1.1\r\n\r\n")
    yield "a long header name", _fit(b"X", size, line, b": 1\r\n\r\n")
    yield "a long User-Agent", _fit(b"a", size, line + b"User-Agent: ", b"\r\n\r\n")
    yield "many Content-Length", _fit(b"Content-Length: 0\r\n", size, line, b"\r\n")
    yield "many colons", _fit(b":", size, line, b"\r\n\r\n")


PARSERS = [
    Parser(
        "parse_json",
        MAX_ANSWER_BYTES,
        lambda r: parse_json(r, max_bytes=MAX_ANSWER_BYTES),
        (JsonInputError,),
    ),
    *(
        Parser(
            f"plugin {model.__name__}",
            MAX_ANSWER_BYTES,
            _plugin(model),
            (HttpJsonError, PluginError),
            tuple(model.model_fields),
        )
        for model in (ActivateAnswer, FilterAnswer, ScoreAnswer, HealthAnswer)
    ),
    Parser(
        "agent report",
        MAX_ANSWER_BYTES,
        lambda r: report_from(answer_from(r, 200, "/v1/report")),
        (HttpJsonError, AgentError),
        tuple(AgentReport.model_fields),
    ),
    Parser(
        "agent probe answer",
        MAX_ANSWER_BYTES,
        lambda r: probe_answer_from(answer_from(r, 200, "/v1/probe")),
        (HttpJsonError, AgentError),
        ("reachable",),
    ),
    Parser("webhook body", DEFAULT_MAX_BODY, _webhook(), (_RequestError,), ("node", "reason")),
    Parser("web view cookie", HEADER_CAP, _cookie(), ()),
    Parser("bearer header", HEADER_CAP, _bearer, ()),
    Parser(
        "Docker proxy request head",
        MAX_READ,
        rebuilt_request,
        (RefusedRequestError,),
        extra=head_cases,
    ),
    Parser(
        "decision log line",
        MAX_LINE_BYTES,
        lambda r: parse_decision_line(r.decode("utf-8", "replace")),
        (),
    ),
]


def _fit(unit: bytes, size: int, head: bytes = b"", tail: bytes = b"") -> bytes:
    return head + unit * max(0, (size - len(head) - len(tail)) // len(unit)) + tail


def worst_cases(size: int, fields: tuple[str, ...]) -> Iterator[tuple[str, bytes]]:
    """Inputs of about `size` bytes that cost a careless parser the most."""
    yield "quote bait", _fit(b'\\"', size, b'"')
    yield "quote bait in an object", _fit(b'\\"', size, b'{"node": "')
    yield "quote bait after a decision", _fit(b'\\"', size, b'decision reason="')
    yield "quotes", _fit(b'"', size)
    yield "backslashes", _fit(b"\\", size, b'"')
    yield "brackets in a string", _fit(b"[", size, b'"', b'"')
    yield "deep arrays", _fit(b"[", size)
    yield "deep objects", _fit(b'{"a":', size)
    yield "a long integer", _fit(b"9", size, b"[", b"]")
    yield "a long fraction", _fit(b"1", size, b"[0.", b"]")
    yield "a long exponent", _fit(b"9", size, b"[1e", b"]")
    yield "many long integers", _fit(b"9" * 4000 + b",", size, b"[", b"0]")
    yield "unicode escapes", _fit(b"\\u0041", size, b'"', b'"')
    yield "lone surrogates", _fit(b"\\ud800", size, b'["', b'"]')
    yield "many keys", _fit(b'"a":0,', size, b"{", b'"a":0}')
    yield "whitespace", _fit(b" ", size, b"", b"{}")
    yield "not UTF-8", _fit(b"\xff", size)
    yield "ascii digits", _fit(b"9", size)
    yield "superscripts", _fit("²".encode(), size)
    yield "a latin-1 superscript", _fit(b"\xb2", size)
    yield "semicolons", _fit(b";", size)
    yield "equals", _fit(b"=", size)
    for key in fields:
        yield f"many {key}", _fit(b'{"x":1},', size, b'{"' + key.encode() + b'":[', b"{}]}")
        yield f"long {key}", _fit(b"x", size, b'{"' + key.encode() + b'":"', b'"}')


def _cost(parser: Parser, raw: bytes) -> float:
    """CPU seconds of one read; fails the test on an error not the parser's own."""
    gc.disable()  # a collection would charge the heap's size to this input
    started = time.process_time()
    try:
        parser.read(raw)
    except parser.own:
        pass
    finally:
        gc.enable()
    return time.process_time() - started


def _check(parser: Parser, what: str, raw: bytes) -> None:
    bound = _bound(len(raw))
    cost = _cost(parser, raw)
    for _ in range(2):  # a pause of the machine is not the input's cost
        if cost <= bound:
            return
        cost = min(cost, _cost(parser, raw))
    assert cost <= bound, (
        f"{parser.name}: {what} of {len(raw)} bytes took {cost:.3f} s of CPU, "
        f"over the {bound:.3f} s bound ({PER_KIB_SECONDS * 1000:g} ms per KiB)"
    )


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.name)
def test_worst_cases_up_to_the_cap_cost_linear_time(parser: Parser) -> None:
    # Smaller sizes first: a quadratic parser fails on the first, in about a second.
    for size in sorted({min(16 * 1024, parser.cap), parser.cap}):
        for what, raw in worst_cases(size, parser.fields):
            _check(parser, what, raw[: parser.cap])
        for what, raw in parser.extra(size) if parser.extra else ():
            _check(parser, what, raw[: parser.cap])


_SPLICED = st.builds(
    lambda valid, at, bait: valid[: at % (len(valid) + 1)] + bait + valid[at % (len(valid) + 1) :],
    st.sampled_from([b'{"node": "node-2", "state": "ok"}', b'{"Vetoes": [], "Scores": []}', b"[]"]),
    st.integers(0, 40),
    st.builds(
        lambda unit, n: unit * n,
        st.sampled_from([b'\\"', b'"', b"\\", b"[", b"{", b"9", b"\\u0041", b'"a":0,']),
        st.integers(1, 8 * 1024),
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(OUTSIDE_BYTES, _SPLICED), st.sampled_from(PARSERS))
def test_any_bytes_cost_linear_time_and_raise_only_the_parsers_error(
    raw: bytes, parser: Parser
) -> None:
    _check(parser, "Hypothesis's bytes", raw[: parser.cap])


def test_the_bait_is_json_that_python_refuses() -> None:
    """The bait is no strawman: what json itself says of it, quickly."""
    with pytest.raises(json.JSONDecodeError, match="Unterminated string"):
        json.loads(_fit(b'\\"', 4096, b'"'))
