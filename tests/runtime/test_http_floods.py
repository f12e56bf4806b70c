"""Idle sockets and slowloris clients hold neither the server nor the healthcheck.

A request must arrive whole within a deadline, each client address has a share of the
connections, and the container healthcheck asks a unix socket of the process's own that
no network client reaches. All on loopback, in this process: every 127/8 address is
loopback on Linux, so the attacker's sockets come from 127.0.0.2 and the honest clients
from 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anyio
import anyio.from_thread
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from controller.adapters.engine import EngineClient
from controller.cli import healthcheck as probe
from controller.runtime.agent import Agent, AgentConfig
from controller.runtime.http_app import make_app
from controller.runtime.http_server import HttpServer
from controller.runtime.loop import Controller, RunConfig
from controller.runtime.policy_source import PolicySource
from controller.runtime.reconciler import Reconciler
from controller.runtime.tracing import DecisionLog, get_tracer, make_tracer_provider
from tests.core.builders import node, snapshot
from tests.runtime.serving import closed_within, serving

ATTACKER = "127.0.0.2"
IDLE = 200


def _wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _connect(port: int, source: str = ATTACKER) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


@contextlib.contextmanager
def _flood(port: int) -> Iterator[list[socket.socket]]:
    """IDLE silent sockets, then one that sends a request a byte at a time, forever."""
    sockets: list[socket.socket] = []
    stop = threading.Event()

    def slowloris() -> None:
        with contextlib.suppress(OSError):
            slow = _connect(port)
            sockets.append(slow)
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            while not stop.wait(0.2):
                slow.sendall(b"X")

    try:
        for _ in range(IDLE):
            with contextlib.suppress(OSError):  # refused beyond the share: that is the point
                sockets.append(_connect(port))
        dripping = threading.Thread(target=slowloris, daemon=True)
        dripping.start()
        yield sockets
    finally:
        stop.set()
        for sock in sockets:
            sock.close()


def _get(port: int, path: str = "/healthz") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_a_controller_under_a_socket_flood_still_answers_its_healthcheck_and_reconciles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = PolicySource(None)
    out = io.StringIO()
    controller = Controller(
        RunConfig(http=("127.0.0.1", 0), probe_socket=tmp_path / "probe.sock", resync_seconds=0.2),
        policy,
        out=out,
        handle_signals=False,
    )
    written: list[object] = []
    controller.reconciler = Reconciler(
        observe=lambda: snapshot([node(1, manager=True), node(2)], []),
        executor=written.append,
        policy=policy,
        tracer=get_tracer(make_tracer_provider("none")),
        decision_log=DecisionLog(out),
    )
    assert controller.server is not None and controller.probe_server is not None
    port = controller.server.port

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for task in (controller._heartbeat, controller._worker, controller._resync_timer):
                tg.start_soon(task)
            for server in (controller.server, controller.probe_server):
                assert server is not None
                tg.start_soon(server.run)
            await anyio.sleep_forever()

    monkeypatch.setenv("PLACEMENT_PROBE_SOCKET", str(tmp_path / "probe.sock"))
    with anyio.from_thread.start_blocking_portal() as portal:
        running = portal.start_task_soon(main)
        try:
            _wait_until(lambda: controller.health.cycles_done > 0, 30, "a first cycle")
            with _flood(port) as held:
                assert len(held) > 1
                cycles = controller.health.cycles_done
                # The container healthcheck, as Swarm runs it: the unix socket.
                assert probe.main(["healthz"]) == 0
                # A client of its own address is answered over the network too.
                assert _get(port) == 200
                _wait_until(lambda: controller.health.cycles_done > cycles + 2, 30, "more cycles")
        finally:
            running.cancel()


@pytest.fixture
def guarded() -> Iterator[HttpServer]:
    async def ok(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def slow_stream(request: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(10):
                yield b"tick\n"
                await anyio.sleep(0.2)  # the answer outlasts the deadline four times

        return StreamingResponse(chunks(), media_type="text/plain")

    app = make_app([Route("/healthz", ok), Route("/stream", slow_stream)])
    server = HttpServer([("127.0.0.1", 0)], app, per_peer=4, request_seconds=0.5)
    with serving(server):
        yield server


def test_a_request_that_does_not_arrive_whole_in_time_is_cut(guarded: HttpServer) -> None:
    idle = _connect(guarded.port)
    assert closed_within(idle, within=10), "a silent connection is closed after the deadline"
    idle.close()

    slow = _connect(guarded.port)
    slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    slow.settimeout(0.1)
    cut = False
    for _ in range(100):  # a byte every 0.1 s for up to 10 s: each resets no timer
        try:
            slow.sendall(b"X")
            if slow.recv(1024) == b"":
                cut = True
                break
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            cut = True
            break
    slow.close()
    assert cut, "a request dripping in a byte at a time is cut at the deadline"


def test_an_answer_that_outlasts_the_deadline_and_keep_alive_clients_are_left_alone(
    guarded: HttpServer,
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", guarded.port, timeout=10)
    try:
        conn.request("GET", "/stream")
        assert conn.getresponse().read() == b"tick\n" * 10
        for _ in range(3):  # one connection, requests 0.3 s apart: never idle long
            time.sleep(0.3)
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            assert (response.status, response.read()) == (200, b'{"ok":true}')
    finally:
        conn.close()


def test_one_client_address_gets_a_share_of_the_connections(guarded: HttpServer) -> None:
    held = [_connect(guarded.port) for _ in range(4)]
    over = [_connect(guarded.port) for _ in range(6)]
    try:
        assert all(closed_within(sock, within=5) for sock in over), (
            "beyond its share: closed at once"
        )
        assert _get(guarded.port) == 200, "another address is answered"
        held[0].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        held[0].settimeout(5)
        assert held[0].recv(1024).startswith(b"HTTP/1.1 200")
    finally:
        for sock in held + over:
            sock.close()


class _Engine:
    def info(self) -> dict[str, object]:
        return {"Swarm": {"NodeID": "n3"}, "Name": "node-3", "NCPU": 2, "MemTotal": 1 << 30}


def test_an_agent_under_a_socket_flood_still_answers_its_healthcheck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client: EngineClient = type("Client", (), {"api": _Engine()})()
    config = AgentConfig(
        listen=("127.0.0.1", 0), secret="s", probe_socket=tmp_path / "agent-probe.sock"
    )
    agent = Agent(config, lambda: client)
    thread = threading.Thread(target=agent.serve_forever, kwargs={"measure": False})
    thread.start()
    monkeypatch.setenv("PLACEMENT_PROBE_SOCKET", str(tmp_path / "agent-probe.sock"))
    try:
        _wait_until(lambda: probe.main(["healthz"]) == 0, 10, "the agent to listen")
        with _flood(agent.port):
            assert probe.main(["healthz"]) == 0
            assert _get(agent.port) == 200
    finally:
        agent.stop()
        thread.join(timeout=10)


def test_a_process_that_gave_up_root_stops_cleanly_though_it_cannot_remove_its_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent binds its probe socket as root, then runs as user 65534: removing the
    socket at its stop is refused, and that must not turn a clean stop into an error."""
    server = HttpServer([], make_app([]), unix=tmp_path / "probe.sock")

    def refused(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "unlink", refused)
    server.close()
    assert (tmp_path / "probe.sock").is_socket(), "left for the next start to replace"
