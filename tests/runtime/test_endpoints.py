"""/healthz, /readyz and /metrics over real HTTP on a local port (no Docker)."""

from __future__ import annotations

import http.client
import json
import socket
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from controller.runtime.endpoints import CYCLE_STUCK_SECONDS, Health, probe_routes
from controller.runtime.http_app import make_app
from controller.runtime.http_server import HttpServer, parse_address
from controller.runtime.lease_keeper import LeaseConfig, LeaseKeeper
from controller.runtime.metrics import Metrics
from controller.runtime.policy_source import PolicySource
from tests.runtime.serving import serving


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def served() -> Iterator[tuple[str, Health, Clock]]:
    clock = Clock()
    health = Health(started=clock.now, loop_beat=clock.now)
    metrics = Metrics(PolicySource(None), lease=None)
    app = make_app(probe_routes(health, metrics, token="s3cret", clock=clock))
    with serving(HttpServer([("127.0.0.1", 0)], app)) as server:
        yield f"http://127.0.0.1:{server.port}", health, clock


def test_health_follows_the_loop_and_the_cycles(served) -> None:  # type: ignore[no-untyped-def]
    url, health, clock = served
    assert _get(f"{url}/healthz")[0] == 200
    code, body = _get(f"{url}/readyz", token="s3cret")
    assert code == 503 and "no reconcile cycle" in json.loads(body)["status"]
    health.cycles_done = 1
    assert _get(f"{url}/readyz")[0] == 200
    health.last_error = "the Docker engine is unreachable: boom"
    code, body = _get(f"{url}/readyz", token="s3cret")
    assert (code, json.loads(body)) == (503, {"ok": False, "status": health.last_error})
    health.last_error = None
    health.cycle_started = clock.now
    clock.now += CYCLE_STUCK_SECONDS + 1
    health.loop_beat = clock.now
    code, body = _get(f"{url}/healthz", token="s3cret")
    assert code == 503 and "reconcile cycle has run" in body


def test_the_probes_say_why_only_to_a_holder_of_the_metrics_token(served) -> None:  # type: ignore[no-untyped-def]
    url, health, _ = served
    health.cycles_done = 1
    health.last_error = "the Docker engine is unreachable: at node-1.internal"
    for path in ("/readyz", "/healthz"):
        _, body = _get(f"{url}{path}")
        assert "status" not in json.loads(body) and "node-1" not in body, (path, body)
    assert _get(f"{url}/readyz") == (503, '{"ok":false}')
    _, body = _get(f"{url}/readyz", token="s3cret")
    assert json.loads(body)["status"] == health.last_error


def test_metrics_want_the_token_and_unknown_paths_are_404(served) -> None:  # type: ignore[no-untyped-def]
    url, _, _ = served
    assert _get(f"{url}/metrics")[0] == 401
    assert _get(f"{url}/metrics", token="wrong")[0] == 401
    code, body = _get(f"{url}/metrics", token="s3cret")
    assert code == 200 and "placement_reconcile_duration_seconds" in body
    assert _get(f"{url}/nope")[0] == 404


def test_readiness_with_a_lease_says_standby_until_it_is_read() -> None:
    clock = Clock()
    lease = LeaseKeeper(
        LeaseConfig(name="placement_controller-lease", holder="a"),
        lambda: None,  # type: ignore[arg-type,return-value]
        say=lambda _: None,
        clock=clock,
    )
    health = Health(started=clock.now, loop_beat=clock.now, cycles_done=1, lease=lease)
    ok, why = health.ready(clock.now)
    assert not ok and "not read lately" in why
    lease.last_read, lease.reads = clock.now, 1
    ok, why = health.ready(clock.now)
    assert ok and why.startswith("standby: the lease placement_controller-lease is missing")


@pytest.mark.parametrize(
    ("text", "expected"),
    [(":9464", ("0.0.0.0", 9464)), ("127.0.0.1:80", ("127.0.0.1", 80)), ("[::1]:9", ("::1", 9))],
)
def test_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


def test_a_bad_address_says_what_is_expected() -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address("localhost")


def test_headers_past_16_kib_are_refused_by_h11_at_a_version_that_is_pinned(served) -> None:  # type: ignore[no-untyped-def]
    """The header limit is h11's (uvicorn's h11 protocol, always): headers still arriving
    are buffered up to 16 KiB. The project pins an h11 with the chunked-body leniency of
    versions before 0.16 fixed (request smuggling)."""
    url, _, _ = served
    port = int(url.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/healthz", headers={"X-Filler": "x" * 8 * 1024})
        assert conn.getresponse().status == 200
    finally:
        conn.close()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Filler: " + b"x" * 20 * 1024)
        assert sock.recv(64).startswith(b"HTTP/1.1 400 ")  # h11's "too long", 431 meant
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    [h11] = [Requirement(r) for r in project["project"]["dependencies"] if r.startswith("h11")]
    assert "0.15.0" not in h11.specifier and "0.16.0" in h11.specifier
    assert version("h11") in h11.specifier
