"""Connections are counted when accepted, before TLS, and cut when they hold the server.

Sockets that never start TLS, a client that never reads, a process out of file
descriptors. On loopback: the attacker's sockets come from 127.0.0.2, the honest
client's from 127.0.0.1.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest
import trustme
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from controller.runtime import http_guard, http_server
from controller.runtime.http_app import make_app
from controller.runtime.http_server import HttpServer, TlsFiles
from tests.runtime.serving import closed_within, serving

ATTACKER = "127.0.0.2"


def _connect(port: int, source: str = ATTACKER) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


async def _ok(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def _endless(request: Request) -> Response:
    async def chunks() -> AsyncIterator[bytes]:
        while True:
            yield b"x" * 65536
            await anyio.sleep(0)

    return StreamingResponse(chunks(), media_type="application/octet-stream")


def _dripping(media_type: str) -> Callable[[Request], Awaitable[Response]]:
    """An answer that never ends, a small chunk every 50 ms: a client reading it keeps
    up, so the no-progress deadline never runs out."""

    async def route(request: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            while True:
                yield b"data: x\n\n"
                await anyio.sleep(0.05)

        return StreamingResponse(chunks(), media_type=media_type)

    return route


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_server(ca: trustme.CA, tmp_path: Path) -> Iterator[HttpServer]:
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    app = make_app([Route("/healthz", _ok)])
    tls = TlsFiles(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = HttpServer([("127.0.0.1", 0)], app, tls=tls, per_peer=4)
    with serving(server):
        yield server


def _https_get(ca: trustme.CA, port: int) -> int:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    finally:
        conn.close()


def test_sockets_that_never_start_tls_are_capped_per_address_at_accept(
    tls_server: HttpServer, ca: trustme.CA
) -> None:
    silent = [_connect(tls_server.port) for _ in range(20)]
    try:
        # The share is 4: the 16 beyond it are closed at once, before any TLS state.
        closed = sum(closed_within(sock, within=1) for sock in silent[4:])
        assert closed == 16, f"{closed} of 16 sockets beyond the share were closed"
        assert _https_get(ca, tls_server.port) == 200, "another address is answered"
    finally:
        for sock in silent:
            sock.close()


def test_handshakes_from_many_addresses_crowd_out_no_new_client(
    ca: trustme.CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All places taken by sockets that never start TLS, from three addresses within
    their shares: a client from a new address takes the place of the oldest of them;
    the attacker's own addresses take none of each other's."""
    monkeypatch.setattr(http_server, "HANDSHAKE_SECONDS", 120.0)  # none ends on its own
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    tls = TlsFiles(tmp_path / "cert.pem", tmp_path / "key.pem")
    app = make_app([Route("/healthz", _ok)])
    server = HttpServer([("127.0.0.1", 0)], app, tls=tls, per_peer=4, max_connections=8)
    with serving(server):
        silent = []
        for source in ["127.0.0.2"] * 4 + ["127.0.0.4"] * 3 + ["127.0.0.5"]:
            silent.append(_connect(server.port, source))
            # accepted in this order: the first is the oldest
            assert not closed_within(silent[-1], within=0.1)
        time.sleep(http_guard.EVICT_AFTER)  # every handshake has run that long
        try:
            assert server.admission.total == 8, "every place is taken"
            within_share = _connect(server.port, "127.0.0.4")  # its 4th: within its share
            assert closed_within(within_share, within=5), "an address with places takes none"
            within_share.close()
            assert _https_get(ca, server.port) == 200, "a client from a new address gets in"
            assert closed_within(silent[0], within=5), "the oldest handshake gave its place"
            assert not any(closed_within(sock, within=0.1) for sock in silent[1:]), (
                "one place made, not more"
            )
        finally:
            for sock in silent:
                sock.close()


def test_a_socket_that_never_finishes_its_handshake_is_closed(tls_server: HttpServer) -> None:
    silent = _connect(tls_server.port)
    try:
        # The handshake deadline is 5 s; asyncio's default, 60.
        assert closed_within(silent, within=30), (
            "a silent socket is closed at the handshake deadline"
        )
    finally:
        silent.close()


def test_a_client_that_never_reads_is_cut() -> None:
    app = make_app([Route("/endless", _endless)])
    server = HttpServer([("127.0.0.1", 0)], app, request_seconds=0.5)
    with serving(server):
        sock = _connect(server.port)
        sock.sendall(b"GET /endless HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(3)  # reads nothing: the answer fills the buffers and stops
        got, cut = 0, False
        sock.settimeout(10)
        try:
            while got < 256 * 1024 * 1024:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    cut = True
                    break
                got += len(chunk)
        except (ConnectionResetError, TimeoutError):
            cut = True
        finally:
            sock.close()
        assert cut, f"the answer went on: {got} bytes read and still coming"


def _read_for(sock: socket.socket, reads: int) -> bool:
    """Whether the server ends the answer within so many reads (a chunk every 50 ms)."""
    sock.settimeout(10)
    try:
        for _ in range(reads):
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    return False


def test_an_answer_read_steadily_is_still_cut_at_the_whole_response_deadline() -> None:
    routes = [
        Route("/drip", _dripping("text/plain")),
        Route("/events", _dripping("text/event-stream")),
    ]
    server = HttpServer([("127.0.0.1", 0)], make_app(routes), response_seconds=0.5)
    with serving(server):
        sock = _connect(server.port)
        sock.sendall(b"GET /drip HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            # 400 chunks take 20 s to come: the deadline, 0.5 s, ends it long before.
            assert _read_for(sock, 400), "an answer that never ends went on"
        finally:
            sock.close()
        stream = _connect(server.port)
        stream.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            # 40 chunks, 2 s: four times the deadline, which an event stream is not under.
            assert not _read_for(stream, 40), "an event stream was cut by the answer deadline"
        finally:
            stream.close()


def test_out_of_file_descriptors_the_server_says_so_once_not_a_traceback_per_attempt(
    tmp_path: Path,
) -> None:
    script = textwrap.dedent(
        """
        import resource, socket, sys, time
        import anyio.from_thread
        from controller.runtime.http_app import make_app
        from controller.runtime.http_server import HttpServer
        server = HttpServer([("127.0.0.1", 0)], make_app([]), per_peer=1000,
                            max_connections=1000)
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        with anyio.from_thread.start_blocking_portal() as portal:
            running = portal.start_task_soon(server.run)
            held = []
            for _ in range(100):
                try:
                    s = socket.socket(); s.bind(("127.0.0.2", 0)); s.settimeout(1)
                    s.connect(("127.0.0.1", server.port)); held.append(s)
                except OSError:
                    pass
            time.sleep(3)
            running.cancel()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    tracebacks = done.stderr.count("Traceback")
    assert tracebacks == 0, f"{tracebacks} tracebacks, {len(done.stderr)} bytes on stderr"
    assert done.stderr.count("out of file descriptors") == 1, done.stderr[-2000:]
