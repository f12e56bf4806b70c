"""The health webhook's limits over real HTTP: a caller rotating `failed` across nodes is
throttled, a node reported worse again and again is damped, a flood is refused before
the token is read, every post is logged with its caller and outcome, replays are refused.

Callers are told apart by address: every 127/8 address is loopback, so each test client
picks its own.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from controller.core.outside_inputs import HealthState
from controller.runtime.health_store import HealthStore
from controller.runtime.http_app import make_app
from controller.runtime.http_server import HttpServer
from controller.runtime.report_limits import ReportLimits
from controller.runtime.webhook import HealthApi
from tests.core.builders import node, snapshot
from tests.runtime.serving import serving

TOKEN = "t0ken"


class Hook:
    def __init__(self, limits: ReportLimits) -> None:
        self.now = 1000.0
        self.said: list[str] = []
        self.results: list[str] = []
        self.store = HealthStore()
        self.api = HealthApi(
            token=TOKEN,
            store=self.store,
            latest=lambda: snapshot([node(i, manager=i == 1) for i in range(1, 6)], []),
            on_report=lambda report: None,
            clock=lambda: self.now,
            on_result=self.results.append,
            limits=limits,
            say=self.said.append,
        )
        self.server = HttpServer([("127.0.0.1", 0)], make_app(self.api.routes()))

    def post(
        self, body: dict[str, Any], *, caller: str = "127.0.0.2", token: str = TOKEN
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        conn = http.client.HTTPConnection(
            "127.0.0.1", self.server.port, timeout=5, source_address=(caller, 0)
        )
        try:
            conn.request(
                "POST",
                "/v1/health",
                body=json.dumps(body).encode(),
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            reply = conn.getresponse()
            headers = {k.lower(): v for k, v in reply.getheaders()}
            return reply.status, json.loads(reply.read()), headers
        finally:
            conn.close()

    def state(self, host: int) -> HealthState | None:
        report = self.store.current(f"n{host}", "webhook", self.now)
        return report.state if report else None


@pytest.fixture
def hook(request: pytest.FixtureRequest) -> Iterator[Hook]:
    limits = getattr(request, "param", ReportLimits())
    harness = Hook(limits)
    with serving(harness.server):
        yield harness


def _failed(host: int) -> dict[str, Any]:
    return {"node": f"node-{host}", "state": "failed", "reason": "says the monitor"}


def _ok(host: int) -> dict[str, Any]:
    return {"node": f"node-{host}", "state": "ok"}


def test_a_caller_rotating_failed_across_nodes_is_throttled(hook: Hook) -> None:
    """Within the panic threshold one node at a time, each `failed` evicting everything
    on its node: three go through, the fourth waits for the caller's budget to refill."""
    for host in (2, 3, 4):
        assert hook.post(_failed(host))[0] == 202
        hook.now += 1
        assert hook.post(_ok(host))[0] == 202  # a release is always taken
        hook.now += 1
    status, answer, headers = hook.post(_failed(5))
    assert status == 429 and "reported 3 nodes worse lately" in answer["error"]
    assert 1 <= int(headers["retry-after"]) <= 60
    assert hook.state(5) is None, "nothing was taken"
    hook.now += int(headers["retry-after"])
    assert hook.post(_failed(5))[0] == 202
    assert hook.post(_failed(5))[0] == 202, "the word in force again: free"
    assert hook.results.count("rate-limited") == 1


def test_a_node_reported_worse_again_and_again_is_damped_whoever_reports_it(hook: Hook) -> None:
    callers = ("127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6")
    for caller in callers[:3]:
        assert hook.post(_failed(2), caller=caller)[0] == 202
        assert hook.post(_ok(2), caller=caller)[0] == 202
        hook.now += 60
    status, answer, headers = hook.post(_failed(2), caller=callers[3])
    assert status == 429 and "node n2 was reported worse 3 times within 600 s" in answer["error"]
    assert int(headers["retry-after"]) == 600 - 180
    assert hook.post({**_failed(2), "state": "degraded"}, caller=callers[3])[0] == 429
    assert hook.post(_failed(3), caller=callers[3])[0] == 202, "another node is not damped"
    hook.now += 600 - 180
    assert hook.post(_failed(2), caller=callers[3])[0] == 202
    assert "damped" in hook.results


@pytest.mark.parametrize("hook", [ReportLimits(posts_per_minute=10)], indirect=True)
def test_a_flood_is_refused_before_the_token_is_read_and_logged_without_flooding(
    hook: Hook,
) -> None:
    answers = [hook.post(_failed(2), token="guess")[0] for _ in range(25)]
    assert answers == [401] * 10 + [429] * 15
    assert hook.state(2) is None
    lines = [line for line in hook.said if "127.0.0.2" in line]
    assert len(lines) == 11, "ten refusals said one by one, the flood once"
    assert lines[-1].startswith("webhook: POST from 127.0.0.2: 429 rate-limited: too many")
    # Another caller is not held by this one's flood.
    assert hook.post(_failed(3), caller="127.0.0.9")[0] == 202
    hook.now += 60
    assert hook.post(_ok(2))[0] == 202
    assert hook.said[-1] == (
        "webhook: POST from 127.0.0.2: 202 accepted: node node-2 (n2) ok "
        "(after 14 more posts refused as too many)"
    )


def test_every_post_is_logged_with_its_callers_address_and_outcome(hook: Hook) -> None:
    hook.post(_failed(2), caller="127.0.0.7")
    hook.post(_failed(2), caller="127.0.0.8", token="guess")
    hook.post({"node": "node-9", "state": "failed"}, caller="127.0.0.9")
    assert hook.said == [
        "webhook: POST from 127.0.0.7: 202 accepted: node node-2 (n2) failed",
        "webhook: POST from 127.0.0.8: 401 unauthorized: wrong bearer token",
        "webhook: POST from 127.0.0.9: 404 unknown-node: unknown node 'node-9': "
        "not a hostname or ID of this swarm",
    ]


@pytest.mark.parametrize("hook", [ReportLimits(replay_seconds=30)], indirect=True)
def test_with_a_replay_window_a_post_is_taken_once_and_only_while_fresh(hook: Hook) -> None:
    status, answer, _ = hook.post(_failed(2))
    assert status == 422 and "at: required" in answer["error"]
    status, answer, _ = hook.post({**_failed(2), "at": hook.now - 31})
    assert status == 422 and "more than 30 s from this controller's clock" in answer["error"]
    fresh = {**_failed(2), "at": hook.now - 5}
    assert hook.post(fresh)[0] == 202
    status, answer, _ = hook.post(fresh)  # the same post again, recorded and replayed
    assert status == 409 and "a replay" in answer["error"]
    assert hook.post({**_ok(2), "at": hook.now - 4})[0] == 202
    assert hook.state(2) is HealthState.OK
    assert hook.post({**_failed(2), "at": hook.now - 5})[0] == 409, "older than the last"
    assert hook.state(2) is HealthState.OK
