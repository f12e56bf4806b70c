"""The health webhook over real HTTP, without Docker: every answer it can give."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings

from controller.core.model import ClusterSnapshot, NodeState
from controller.core.outside_inputs import HealthReport, HealthState
from controller.runtime.health_store import HealthStore
from controller.runtime.http_app import make_app
from controller.runtime.http_server import HttpServer
from controller.runtime.webhook import HealthApi, _RequestError
from tests.adapters.test_bounded_json import OUTSIDE_BYTES
from tests.core.builders import node, snapshot
from tests.runtime.serving import serving

TOKEN = "t0ken"
NOW = 1000.0


class Harness:
    def __init__(self, max_body: int = 256) -> None:
        self.store = HealthStore()
        self.role = "leader"
        self.seen: list[HealthReport] = []
        self.results: list[str] = []
        self.snapshot: ClusterSnapshot | None = snapshot([node(1, manager=True), node(2)], [])
        self.api = HealthApi(
            token=TOKEN,
            store=self.store,
            latest=lambda: self.snapshot,
            on_report=self.seen.append,
            clock=lambda: NOW,
            max_body=max_body,
            role=lambda: self.role,
            on_result=self.results.append,
        )
        self.server = HttpServer([("127.0.0.1", 0)], make_app(self.api.routes()))

    def request(
        self,
        method: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        token: str | None = TOKEN,
        headers: dict[str, str] | None = None,
        path: str = "/v1/health",
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        sent = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=5)
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            text = response.read()
            return (
                response.status,
                json.loads(text) if text else {},
                {k.lower(): v for k, v in response.getheaders()},
            )
        finally:
            conn.close()


@pytest.fixture
def hook() -> Iterator[Harness]:
    harness = Harness()
    with serving(harness.server):
        yield harness


GOOD = {"node": "node-2", "state": "failed", "reason": "disk gone", "ttl": 30}


def test_a_good_report_is_taken_by_hostname_or_id(hook: Harness) -> None:
    status, answer, _ = hook.request("POST", GOOD)
    assert status == 202
    assert answer == {
        "node": "n2",
        "hostname": "node-2",
        "state": "failed",
        "expires_at": NOW + 30,
        "role": "leader",
    }
    assert hook.seen == [HealthReport("n2", HealthState.FAILED, "webhook", NOW + 30, "disk gone")]
    status, _, _ = hook.request("POST", {"node": "n2", "state": "ok"})
    assert status == 202
    assert hook.store.live(NOW) == (HealthReport("n2", HealthState.OK, "webhook", NOW + 600, ""),)
    status, listing, _ = hook.request("GET")
    assert status == 200 and listing["reports"][0]["hostname"] == "node-2"


def test_a_hostname_shared_with_a_stale_down_entry_means_the_live_node(hook: Harness) -> None:
    # node-2 left and rejoined: its old entry stays listed, down, under the same name.
    stale = replace(node(2, state=NodeState.DOWN), id="n2-old")
    hook.snapshot = snapshot([node(1, manager=True), stale, node(2)], [])
    status, answer, _ = hook.request("POST", GOOD)
    assert status == 202 and answer["node"] == "n2"
    # Two live nodes of one name cannot be told apart: refused, the ID asked for.
    twin = replace(node(2), id="n2-twin")
    hook.snapshot = snapshot([node(1, manager=True), twin, node(2)], [])
    status, answer, _ = hook.request("POST", GOOD)
    assert status == 409 and "names 2 nodes (n2, n2-twin)" in answer["error"]
    assert "post the node ID" in answer["error"]
    assert hook.request("POST", {**GOOD, "node": "n2-twin"})[0] == 202


def test_a_standby_keeps_the_report_and_says_it_is_the_standby(hook: Harness) -> None:
    hook.role = "standby"
    status, answer, _ = hook.request("POST", GOOD)
    assert status == 202 and answer["role"] == "standby"
    assert hook.store.live(NOW), "kept for when this replica leads"


@pytest.mark.parametrize(
    ("what", "kwargs", "status", "says"),
    [
        ("no token", {"token": None}, 401, "missing bearer token"),
        ("wrong token", {"token": "guess"}, 401, "wrong bearer token"),
        (
            "another scheme",
            {"token": None, "headers": {"Authorization": f"Basic {TOKEN}"}},
            401,
            "wrong",
        ),
        ("oversized", {"raw": b"{" + b" " * 300 + b"}"}, 413, "over the 256 limit"),
        ("malformed", {"raw": b'{"node": "node-2",'}, 400, "not valid JSON"),
        ("not JSON at all", {"raw": b"\xff\xfe"}, 400, "not valid JSON"),
        ("text/plain", {"headers": {"Content-Type": "text/plain"}}, 415, "application/json"),
        ("chunked", {"headers": {"Transfer-Encoding": "chunked"}}, 411, "chunked"),
        ("wrong path", {"path": "/v1/other"}, 404, "no such path"),
    ],
)
def test_bad_requests_are_refused_with_a_reason(
    hook: Harness, what: str, kwargs: dict[str, Any], status: int, says: str
) -> None:
    got, answer, headers = hook.request("POST", GOOD, **kwargs)
    assert got == status, (what, answer)
    assert says in answer["error"]
    if status == 401:
        assert headers["www-authenticate"].startswith("Bearer")
    assert not hook.seen and not hook.store.live(NOW)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({**GOOD, "node": "node-9"}, "unknown node 'node-9'"),
        ({**GOOD, "state": "sick"}, "state"),
        ({**GOOD, "ttl": 0}, "ttl"),
        ({**GOOD, "ttl": 10 * 86400}, "ttl"),
        ({**GOOD, "ttl": "30"}, "ttl"),
        ({**GOOD, "node": ""}, "node"),
        ({**GOOD, "extra": True}, "extra"),
        ({"state": "failed"}, "node"),
        ([GOOD], "expected a JSON object"),
    ],
)
def test_invalid_fields_are_named(hook: Harness, body: Any, says: str) -> None:
    status, answer, _ = hook.request("POST", body)
    assert status in (404, 422), answer
    assert says in answer["error"]
    assert not hook.seen


def test_before_the_first_observation_it_asks_to_wait(hook: Harness) -> None:
    hook.snapshot = None
    status, answer, _ = hook.request("POST", GOOD)
    assert status == 503 and "no cluster observed yet" in answer["error"]


def test_other_methods_are_not_allowed(hook: Harness) -> None:
    status, answer, _ = hook.request("DELETE")
    assert status == 405 and "not allowed" in answer["error"]


def test_the_store_forgets_lapsed_reports() -> None:
    store = HealthStore()
    store.put(HealthReport("n1", HealthState.FAILED, "webhook", 10.0))
    store.put(HealthReport("n2", HealthState.DEGRADED, "webhook", 20.0))
    store.put(HealthReport("n2", HealthState.OK, "webhook", 30.0))  # replaces
    assert [r.node_id for r in store.live(15.0)] == ["n2"]
    assert store.live(15.0)[0].state is HealthState.OK
    assert store.live(31.0) == ()


def test_a_token_is_required() -> None:
    with pytest.raises(ValueError, match="token"):
        HealthApi(
            token="",
            store=HealthStore(),
            latest=lambda: None,
            on_report=lambda r: None,
            clock=lambda: 0.0,
        )


def test_every_post_counts_once_by_its_result(hook: Harness) -> None:
    hook.request("POST", GOOD)
    hook.request("POST", GOOD, token="wrong")
    hook.request("POST", {**GOOD, "node": "node-9"})
    hook.request("POST", {**GOOD, "state": "sick"})
    hook.request("GET")  # a listing is no report
    hook.snapshot = None
    hook.request("POST", GOOD)
    assert hook.results == ["accepted", "unauthorized", "unknown-node", "invalid", "not-ready"]


def test_a_body_nested_thousands_deep_is_refused_not_a_server_error() -> None:
    harness = Harness(max_body=16 * 1024)
    with serving(harness.server):
        status, answer, _ = harness.request("POST", raw=b"[" * 8000 + b"]" * 8000)
    assert status == 400 and "nested 8000 deep, over the 32 limit" in answer["error"]
    assert harness.results == ["invalid"] and not harness.seen


@pytest.mark.parametrize(
    "raw",
    [
        b'{"node": "node-2", "state": "failed", "ttl": 1' + b"0" * 400 + b"}",  # float overflow
        b'{"node": "node-2", "state": "failed", "ttl": 1' + b"0" * 5000 + b"}",  # > 4300 digits
    ],
    ids=["400-digits", "5000-digits"],
)
def test_a_huge_number_is_a_bad_request_not_a_server_error(raw: bytes) -> None:
    harness = Harness(max_body=16 * 1024)
    with serving(harness.server):
        status, answer, _ = harness.request("POST", raw=raw)
    assert status == 400, answer
    # Too long for int() is refused by the parser, too large for a float by the field.
    assert "out of range" in answer["error"] or "not a usable number" in answer["error"]
    assert not harness.seen


FUZZED = HealthApi(
    token=TOKEN,
    store=HealthStore(),
    latest=lambda: snapshot([node(1, manager=True), node(2)], []),
    on_report=lambda report: None,
    clock=lambda: NOW,
    max_body=1 << 20,
)


@settings(max_examples=300, deadline=None)
@given(OUTSIDE_BYTES)
def test_any_body_is_taken_or_refused_with_a_reason(raw: bytes) -> None:
    try:
        FUZZED.accept(raw)
    except _RequestError as refused:
        assert 400 <= refused.status < 500
