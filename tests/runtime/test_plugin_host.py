"""The plugin host asks all plugins at once under one deadline, and off the cycle.

Real unix-socket plugins: the reference plugin (fast) and a server that answers the
handshake and then hangs until the test releases it. The per-call timeout is a minute,
so only the deadline can end a round in time.
"""

from __future__ import annotations

import http.server
import json
import logging
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from controller.runtime.plugin_host import Gathered, PluginHost
from tests.adapters.test_plugins import SNAP, TOPOLOGY, Served

GENEROUS = 20.0  # far below the hang, far above the deadline


class _Threaded(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class Hanging:
    """A PlacementDriver that answers the handshake and hangs on every other call."""

    def __init__(self, path: Path) -> None:
        self.release = threading.Event()
        self.hang = True
        self.calls: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def address_string(self) -> str:
                return "local"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.calls.append(self.path)
                if self.path != "/Plugin.Activate" and outer.hang:
                    outer.release.wait(60)
                answer = {"Implements": ["PlacementDriver"]} if "Activate" in self.path else {}
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = _Threaded(str(path), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def plugins(tmp_path: Path) -> Iterator[tuple[Served, Hanging]]:
    fast = Served(tmp_path, TOPOLOGY, name="fast")
    slow = Hanging(tmp_path / "slow.sock")
    yield fast, slow
    slow.stop()
    fast.stop()


def _in_thread(host: PluginHost, now: float = 0.0) -> Gathered:
    got: list[Gathered] = []
    thread = threading.Thread(target=lambda: got.append(host.gather(SNAP, now=now)), daemon=True)
    thread.start()
    thread.join(GENEROUS)
    assert not thread.is_alive(), "the gather waited on the hanging plugin"
    return got[0]


def test_a_hanging_plugin_is_down_by_the_deadline_and_the_others_advice_is_kept(
    tmp_path: Path, plugins: tuple[Served, Hanging]
) -> None:
    host = PluginHost([tmp_path], timeout=60, deadline=0.5, retry_after=0)
    got = _in_thread(host)
    assert got.advice.answered == ("fast",) and len(got.advice.vetoes) == 3
    assert [h.source for h in got.health] == ["plugin.fast"]
    [down] = got.unavailable
    assert (down.kind, down.name) == ("plugin", "slow")
    assert down.problem == "down: no answer within the 0.5 s deadline"

    # Asked again at once (retry_after 0): still busy with the first call, so not asked.
    again = _in_thread(host, now=1.0)
    assert [s.problem for s in again.unavailable] == ["down: still busy with an earlier call"]
    assert again.advice.answered == ("fast",)
    _, slow = plugins
    assert slow.calls == ["/Plugin.Activate", "/PlacementDriver.Filter"]


def test_in_the_background_a_cycle_never_waits_and_changes_trigger_a_cycle(
    tmp_path: Path, plugins: tuple[Served, Hanging]
) -> None:
    fast, _ = plugins
    host = PluginHost([tmp_path], timeout=60, deadline=0.5, retry_after=0)
    changes: list[float] = []
    seen: dict[str, Gathered] = {}

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(host.run, lambda: changes.append(time.monotonic()))
            await anyio.sleep(0.1)
            # The first cycle waits for the first round (by the deadline), no longer.
            with anyio.fail_after(GENEROUS):
                seen["first"] = await anyio.to_thread.run_sync(lambda: host.gather(SNAP, now=0))
            fast.write({**TOPOLOGY, "vetoes": []})  # the fast plugin changes its mind
            rounds = host.rounds
            with anyio.fail_after(GENEROUS):
                # Answers at once with the last round's advice, and wakes the next round
                # (in which the hanging plugin, still busy, is down again).
                seen["cycle"] = await anyio.to_thread.run_sync(lambda: host.gather(SNAP, now=1))
                while not changes:
                    await anyio.sleep(0.05)
            assert host.rounds > rounds
            seen["after"] = await anyio.to_thread.run_sync(lambda: host.gather(SNAP, now=2))
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert len(seen["first"].advice.vetoes) == 3
    assert [s.name for s in seen["first"].unavailable] == ["slow"]
    assert seen["cycle"] == seen["first"], "a cycle takes the last answers, not a new round's"
    assert len(seen["after"].advice.vetoes) == 2, "the change came with a cycle of its own"
    assert "fast" in seen["after"].advice.answered


def test_a_cycle_never_waits_even_for_a_round_held_up_by_its_deadline(
    tmp_path: Path, plugins: tuple[Served, Hanging]
) -> None:
    _, slow = plugins
    slow.hang = False  # it answers the first round, then starts hanging
    host = PluginHost([tmp_path], timeout=60, deadline=45, retry_after=0)
    seen: list[Gathered] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(host.run, lambda: None)
            await anyio.sleep(0.1)
            with anyio.fail_after(GENEROUS):
                seen.append(await anyio.to_thread.run_sync(lambda: host.gather(SNAP, now=0)))
            slow.hang = True
            calls = len(slow.calls)
            with anyio.fail_after(GENEROUS):  # far below the 45 s deadline
                seen.append(await anyio.to_thread.run_sync(lambda: host.gather(SNAP, now=1)))
                while len(slow.calls) == calls:  # the next round is under way, and hangs
                    await anyio.sleep(0.05)
                seen.append(await anyio.to_thread.run_sync(lambda: host.gather(SNAP, now=2)))
            tg.cancel_scope.cancel()

    anyio.run(main)
    first, during, also = seen
    assert first.advice.answered == ("fast", "slow") and first.unavailable == ()
    assert during == first and also == first, "the last round's answers, at once"


class Nesting:
    """A PlacementDriver that answers the handshake, then every call with `[[[[...]]]]`."""

    def __init__(self, path: Path, depth: int) -> None:
        answer = b"[" * depth + b"]" * depth

        class Handler(http.server.BaseHTTPRequestHandler):
            def address_string(self) -> str:
                return "local"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                activate = json.dumps({"Implements": ["PlacementDriver"]}).encode()
                body = activate if "Activate" in self.path else answer
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = _Threaded(str(path), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_plugin_that_nests_its_answer_deep_is_down_and_the_others_are_heard(
    tmp_path: Path,
) -> None:
    """Python's json recurses per level: 100 000 levels raised RecursionError, which went
    past every `except ValueError` and ended the controller from the background round."""
    fast = Served(tmp_path, TOPOLOGY, name="fast")
    deep = Nesting(tmp_path / "deep.sock", 100_000)
    (tmp_path / "spec.json").write_text('{"Addr": ' + "[" * 5000 + "]" * 5000 + "}")
    try:
        got = PluginHost([tmp_path], timeout=10, deadline=10, retry_after=0).ask(SNAP, now=0)
    finally:
        deep.stop()
        fast.stop()
    assert got.advice.answered == ("fast",) and len(got.advice.vetoes) == 3
    [down] = got.unavailable
    assert down.name == "deep" and "nested 100000 deep, over the 32 limit" in down.problem


def test_a_plugin_in_plain_http_across_the_network_is_warned_of_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "far.spec").write_text("tcp://192.0.2.1:9\n")  # TEST-NET: never answers
    (tmp_path / "near.spec").write_text("tcp://127.0.0.1:9\n")
    host = PluginHost([tmp_path], timeout=0.2, deadline=0.3, retry_after=0.0)
    with caplog.at_level(logging.WARNING, logger="controller.runtime.plugin_host"):
        _in_thread(host)
        _in_thread(host)
    warned = [r.getMessage() for r in caplog.records if "plain HTTP" in r.getMessage()]
    assert len(warned) == 1, warned
    assert warned[0].startswith("placement plugin far at tcp://192.0.2.1:9 speaks plain HTTP")
