"""The web view wants a login, answers only to allowed host names, and is served only on
--http: over real HTTP on loopback (the browser tests show the same to a person)."""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import anyio.from_thread
import pytest
import trustme

from controller.runtime import web_view
from controller.runtime.health_inputs import HealthConfig
from controller.runtime.http_app import make_app
from controller.runtime.http_server import HttpServer, TlsFiles
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.policy_source import PolicySource
from controller.runtime.ui_access import COOKIE, SESSION_SECONDS, UiAccess, host_of
from controller.runtime.web_view import WebView
from tests.runtime.serving import serving

TOKEN = "the-view-token"


class Clock:
    now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _request(
    port: int, method: str, path: str, headers: dict[str, str] | None = None, body: str = ""
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path, body=body or None, headers=headers or {})
        reply = conn.getresponse()
        found = {k.lower(): v for k, v in reply.getheaders()}
        if found.get("content-type", "").startswith("text/event-stream"):
            return reply.status, found, ""  # a stream open for good: its status is enough
        return reply.status, found, reply.read().decode()
    finally:
        conn.close()


@pytest.fixture
def view() -> Iterator[tuple[int, Clock]]:
    clock = Clock()
    access = UiAccess(token=TOKEN, hosts=frozenset({"placement.example.com"}), clock=clock)
    web = WebView(access)
    with serving(HttpServer([("127.0.0.1", 0)], make_app(web.routes(), home="/ui"))) as server:
        yield server.port, clock


def test_without_a_login_the_view_gives_nothing_away(view: tuple[int, Clock]) -> None:
    port, _ = view
    status, headers, _ = _request(port, "GET", "/ui")
    assert (status, headers["location"]) == (303, "/ui/login")
    for path in ("/ui/state", "/ui/events"):
        status, _, body = _request(port, "GET", path)
        assert status == 401 and "log in at /ui/login" in body, path
    assert _request(port, "GET", "/ui/state", {"Authorization": "Bearer guess"})[0] == 401
    # The script and the styles hold no data: the login page uses them.
    assert _request(port, "GET", "/ui/app.css")[0] == 200


def test_the_token_is_exchanged_once_for_a_strict_session_cookie(view: tuple[int, Clock]) -> None:
    port, clock = view
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, _, body = _request(port, "POST", "/ui/login", form, "token=guess")
    assert status == 401 and "Wrong token" in body
    status, headers, _ = _request(port, "POST", "/ui/login", form, f"token={TOKEN}")
    assert (status, headers["location"]) == (303, "/ui")
    cookie = headers["set-cookie"]
    for part in ("HttpOnly", "SameSite=strict", "Path=/ui", f"Max-Age={SESSION_SECONDS}"):
        assert part in cookie, part
    assert "Secure" not in cookie, "plain HTTP: a Secure cookie would never come back"
    session = cookie.split(";")[0]
    assert TOKEN not in session, "the cookie is a signed expiry, not the token"
    status, _, body = _request(port, "GET", "/ui/state", {"Cookie": session})
    assert status == 503 and "no cycle has completed yet" in body  # in, and nothing yet
    assert _request(port, "GET", "/ui", {"Cookie": session})[0] == 200
    # The token in a link is no login: a URL ends up in logs and histories.
    status, headers, body = _request(port, "GET", f"/ui/login?token={TOKEN}")
    assert status == 200 and "set-cookie" not in headers
    # A session ends after its time, and one signed with another token is worth nothing.
    clock.now += SESSION_SECONDS + 1
    assert _request(port, "GET", "/ui/state", {"Cookie": session})[0] == 401
    other = UiAccess(token="another", clock=clock).session()
    assert _request(port, "GET", "/ui/state", {"Cookie": f"{COOKIE}={other}"})[0] == 401


@pytest.mark.parametrize("path", ["/ui", "/ui/state", "/ui/events", "/ui/login", "/ui/app.js"])
def test_a_host_name_not_allowed_is_refused_421(view: tuple[int, Clock], path: str) -> None:
    port, _ = view
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    status, _, body = _request(port, "GET", path, {**bearer, "Host": f"rebound.example:{port}"})
    assert status == 421 and "--ui-hosts" in body
    for allowed in ("placement.example.com", "localhost", f"127.0.0.1:{port}", "[::1]:9464"):
        assert _request(port, "GET", path, {**bearer, "Host": allowed})[0] != 421, allowed


def test_host_names_are_read_without_their_port() -> None:
    assert host_of("Placement.Example.com:9464") == "placement.example.com"
    assert host_of("[::1]:9464") == "::1"
    assert host_of("10.0.0.5") == "10.0.0.5"


def test_the_view_is_served_on_http_only_and_a_made_token_is_said(tmp_path: Path) -> None:
    out = io.StringIO()
    controller = Controller(
        RunConfig(
            http=("127.0.0.1", 0),
            health=HealthConfig(webhook=("127.0.0.1", 0), webhook_token="hook"),
        ),
        PolicySource(None),
        out=out,
        handle_signals=False,
    )
    listeners = controller.listeners
    assert listeners.main is not None and listeners.webhook is not None
    with anyio.from_thread.start_blocking_portal() as portal:
        tasks = [portal.start_task_soon(s.run) for s in listeners.all()]
        try:
            http_port, hook_port = listeners.main.port, listeners.webhook.port
            assert _request(hook_port, "GET", "/ui")[0] == 404
            assert _request(hook_port, "GET", "/ui/state")[0] == 404
            assert _request(hook_port, "GET", "/healthz")[0] == 200
            assert _request(hook_port, "GET", "/v1/health")[0] == 401, "the webhook is there"
            assert _request(http_port, "GET", "/ui")[0] == 303
            assert _request(http_port, "GET", "/v1/health")[0] == 401
            controller._announce_login()
        finally:
            for task in tasks:
                task.cancel()
    assert controller.view is not None and controller.view.access.token
    said = f"log in once within 10 minutes at http://127.0.0.1:{http_port}/ui/login?code="
    assert said in out.getvalue()
    assert controller.view.access.token not in out.getvalue(), "the token is never said"


def test_under_mutual_tls_an_agents_certificate_does_not_open_the_view(
    tmp_path: Path,
) -> None:
    """The stack's CA signs the agents' certificates too: the handshake says nothing of
    who holds one, so the view still wants its token."""
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    server.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    server.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    tls = TlsFiles(tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem")
    controller = Controller(
        RunConfig(http=("127.0.0.1", 0), tls=tls, ui_token=TOKEN),
        PolicySource(None),
        out=io.StringIO(),
        handle_signals=False,
    )
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    ca.issue_cert("agent.node-2").configure_cert(client)  # an agent's, CA-signed
    assert controller.listeners.main is not None
    with anyio.from_thread.start_blocking_portal() as portal:
        task = portal.start_task_soon(controller.listeners.main.run)
        try:
            conn = http.client.HTTPSConnection(
                "127.0.0.1", controller.listeners.main.port, timeout=5, context=client
            )
            for headers, refused in (({}, True), ({"Authorization": f"Bearer {TOKEN}"}, False)):
                conn.request("GET", "/ui/state", headers=headers)
                reply = conn.getresponse()
                reply.read()  # with the token: 503 until a cluster is observed, not 401
                assert (reply.status == 401) is refused, (headers, reply.status)
            conn.close()
        finally:
            task.cancel()


def _held_stream(port: int, cookie: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(f"GET /ui/events HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n\r\n".encode())
    return sock


def _status_of(sock: socket.socket) -> int:
    return int(sock.recv(64).split(b" ")[1])


@pytest.fixture
def access_view() -> Iterator[tuple[int, Clock, UiAccess]]:
    clock = Clock()
    access = UiAccess(token=TOKEN, clock=clock)
    with serving(HttpServer([("127.0.0.1", 0)], make_app(WebView(access).routes()))) as server:
        yield server.port, clock, access


@pytest.mark.parametrize("value", ["\u00b2.x", "1" * 5000 + "." + "0" * 64])
def test_a_malformed_session_cookie_is_a_bad_request_not_a_server_error(
    access_view: tuple[int, Clock, UiAccess], value: str
) -> None:
    port, _, _ = access_view
    cookie = f"{COOKIE}={value}"  # sent as latin-1: the byte 0xb2, a digit to str.isdigit
    status, _, body = _request(port, "GET", "/ui/state", {"Cookie": cookie})
    assert status == 400 and "malformed" in body, (status, body[:200])


def test_a_one_time_link_logs_in_once(access_view: tuple[int, Clock, UiAccess]) -> None:
    port, _, access = access_view
    code = access.login_code()
    status, headers, body = _request(port, "GET", f"/ui/login?code={code}")
    assert status == 200 and 'url=/ui"' in body and COOKIE in headers["set-cookie"]
    status, headers, body = _request(port, "GET", f"/ui/login?code={code}")
    assert status == 401 and "set-cookie" not in headers and "used already" in body


def test_wrong_tokens_from_one_address_must_wait(access_view: tuple[int, Clock, UiAccess]) -> None:
    port, clock, _ = access_view
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    answers = [_request(port, "POST", "/ui/login", form, "token=guess")[0] for _ in range(8)]
    assert answers[:5] == [401] * 5 and answers[5:] == [429] * 3, answers
    status, headers, _ = _request(port, "POST", "/ui/login", form, f"token={TOKEN}")
    assert status == 429 and int(headers["retry-after"]) >= 1, "the right one waits too"
    clock.now += 3
    assert _request(port, "POST", "/ui/login", form, f"token={TOKEN}")[0] == 303


def test_logout_ends_the_session(access_view: tuple[int, Clock, UiAccess]) -> None:
    port, _, access = access_view
    session = f"{COOKIE}={access.session()}"
    assert _request(port, "GET", "/ui/state", {"Cookie": session})[0] == 503  # in
    status, headers, _ = _request(port, "POST", "/ui/logout", {"Cookie": session})
    assert (status, headers["location"]) == (303, "/ui/login")
    assert f"{COOKIE}=" in headers["set-cookie"] and "Max-Age=0" in headers["set-cookie"]
    assert _request(port, "GET", "/ui/state", {"Cookie": session})[0] == 401


def test_event_streams_are_capped_per_session_and_end_with_it(
    access_view: tuple[int, Clock, UiAccess], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_view, "KEEPALIVE_SECONDS", 0.1)
    port, clock, access = access_view
    first = f"{COOKIE}={access.session()}"
    clock.now += 1
    second = f"{COOKIE}={access.session()}"
    held = [_held_stream(port, first) for _ in range(web_view.STREAMS_PER_SESSION)]
    try:
        assert [_status_of(s) for s in held] == [200] * web_view.STREAMS_PER_SESSION
        over = _held_stream(port, first)
        assert _status_of(over) == 429, "one login holds at most its share of the streams"
        other = _held_stream(port, second)
        assert _status_of(other) == 200, "another login still gets one"
        clock.now += SESSION_SECONDS + 1
        ended = 0
        for sock in held:
            sock.settimeout(10)
            with contextlib.suppress(TimeoutError):
                while chunk := sock.recv(65536):
                    if chunk.endswith(b"0\r\n\r\n"):  # the chunked stream's last chunk
                        ended += 1
                        break
        assert ended == len(held), f"{ended} of {len(held)} streams ended with the session"
    finally:
        for sock in held:
            sock.close()


def _stream_ends(sock: socket.socket, keepalives: int) -> bool:
    """Whether the stream's last chunk comes within so many reads (a keep-alive each)."""
    sock.settimeout(10)
    for _ in range(keepalives):
        chunk = sock.recv(65536)
        if not chunk or chunk.endswith(b"0\r\n\r\n"):  # the chunked stream's end
            return True
    return False


def test_an_event_stream_with_no_session_ends_at_its_stated_maximum(
    access_view: tuple[int, Clock, UiAccess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bearer token has no session to end its stream: the stream's own maximum does."""
    monkeypatch.setattr(web_view, "KEEPALIVE_SECONDS", 0.1)
    port, clock, _ = access_view
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        sock.sendall(
            b"GET /ui/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        assert _status_of(sock) == 200
        clock.now += web_view.MAX_STREAM_SECONDS - 60
        assert not _stream_ends(sock, keepalives=5), "ended before its maximum"
        clock.now += 61
        ended = _stream_ends(sock, keepalives=100)
        assert ended, "the stream outlived its stated maximum"
    finally:
        sock.close()


def test_on_loopback_a_given_token_gets_a_one_time_link_and_is_never_said() -> None:
    """`./dev run` gives a token file and listens on 127.0.0.1: one click logs in."""
    out = io.StringIO()
    token = "a-given-token-of-24-chars"
    controller = Controller(
        RunConfig(http=("127.0.0.1", 0), ui_token=token),
        PolicySource(None),
        out=out,
        handle_signals=False,
    )
    try:
        controller._announce_login()
    finally:
        for server in controller.listeners.all():
            server.close()
    assert "log in once within 10 minutes at http://127.0.0.1:" in out.getvalue()
    assert "no --ui-token-file given" not in out.getvalue() and token not in out.getvalue()
