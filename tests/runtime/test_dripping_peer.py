"""A peer that drips its answer a byte at a time costs one call's deadline, and never
more than one call in flight per address, however many polls ask it.

The peer on 127.0.0.1 accepts, then sends a byte every 20 ms forever (within its
answer's head, or within a body it announces as 1 MB): each read is quick, so only a
deadline over the whole call ends it. The tests count threads and open descriptors after
many polls; they time nothing.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from controller.adapters.agent_client import AgentError, fetch_report, probe_via
from controller.runtime import agent_collector
from controller.runtime.agent_collector import AgentCollector
from controller.runtime.indirect_probes import IndirectProbes

POLLS = 12
TIMEOUT = 0.2  # each call's own; the drip (20 ms a byte) never lets a read time out

HEADS = {
    "head": b"HTTP/1.1 200 OK\r\nX-Drip: ",  # never ends
    "body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Content-Length: 1000000\r\n\r\n[",
}


class DrippingPeer:
    """Answers every connection with `head`, then one more byte every 20 ms."""

    def __init__(self, head: bytes) -> None:
        self.head = head
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="dripping-peer")

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        self.listener.setblocking(False)
        selector.register(self.listener, selectors.EVENT_READ)
        peers: list[socket.socket] = []
        while not self._stop.is_set():
            for _ in selector.select(0.02):
                with contextlib.suppress(BlockingIOError):
                    conn, _ = self.listener.accept()
                    conn.sendall(self.head)
                    peers.append(conn)
            for conn in list(peers):
                try:
                    conn.send(b" ")
                except OSError:  # the caller gave up: drop its side too
                    peers.remove(conn)
                    conn.close()
        for conn in peers:
            conn.close()
        selector.close()

    def __enter__(self) -> DrippingPeer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.listener.close()


@pytest.fixture(params=sorted(HEADS))
def peer(request: pytest.FixtureRequest) -> Iterator[DrippingPeer]:
    with DrippingPeer(HEADS[request.param]) as dripping:
        yield dripping


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _settled(threads_before: int) -> int:
    """Threads above `threads_before` once the calls that can end have ended."""
    deadline = time.monotonic() + 3 * TIMEOUT + 2
    while threading.active_count() > threads_before and time.monotonic() < deadline:
        time.sleep(0.05)
    return threading.active_count() - threads_before


def test_a_single_call_to_a_dripping_peer_ends_with_its_deadline(peer: DrippingPeer) -> None:
    for call in (
        lambda: fetch_report(peer.url, secret="s", timeout=TIMEOUT),
        lambda: probe_via(peer.url, "127.0.0.1", secret="s", timeout=TIMEOUT),
    ):
        done = threading.Event()

        def run(call=call, done=done) -> None:  # type: ignore[no-untyped-def]
            with contextlib.suppress(AgentError):
                call()
            done.set()

        threading.Thread(target=run, daemon=True).start()
        # Generous: the deadline is 0.2 s; the drip alone would go on for hours.
        assert done.wait(30), "the call was still reading from the dripping peer after 30 s"


def test_polls_of_a_dripping_agent_leave_threads_and_descriptors_bounded(
    peer: DrippingPeer,
) -> None:
    collector = AgentCollector(secret="s", addresses={peer.url: "node-1"}, timeout=TIMEOUT)
    threads, fds = threading.active_count(), _fds()
    for _ in range(POLLS):
        collector.poll_once()
    extra_threads, extra_fds = _settled(threads), _fds() - fds
    # One call at most stays in flight for the one address: one thread, one socket
    # (and the peer's end of it, in this process too).
    assert extra_threads <= 1, f"{extra_threads} threads left after {POLLS} polls"
    assert extra_fds <= 4, f"{extra_fds} descriptors left after {POLLS} polls"
    assert "unreachable" in collector._seen[peer.url].problem


class _Agents:
    secret, ca = "s", None

    def __init__(self, url: str) -> None:
        self.url = url

    def vantage_points(self) -> dict[str, tuple[str, str]]:
        return {self.url: ("n-agent", "node-9")}


def test_indirect_probes_through_a_dripping_agent_stay_bounded(peer: DrippingPeer) -> None:
    probes = IndirectProbes(_Agents(peer.url), timeout=TIMEOUT)  # type: ignore[arg-type]
    threads, fds = threading.active_count(), _fds()
    for _ in range(POLLS):
        assert probes("n-1", "127.0.0.1") is None  # no answer says nothing
    extra_threads, extra_fds = _settled(threads), _fds() - fds
    assert extra_threads <= 1, f"{extra_threads} threads left after {POLLS} probes"
    assert extra_fds <= 4, f"{extra_fds} descriptors left after {POLLS} probes"


def test_an_agent_whose_last_call_still_runs_is_not_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release, asked = threading.Event(), []

    def stuck(address: str, **_: object) -> None:
        asked.append(address)
        release.wait(30)
        raise AgentError("released")

    monkeypatch.setattr(agent_collector, "fetch_report", stuck)
    collector = AgentCollector(secret="s", addresses={"http://10.9.9.9:1": "node-1"}, timeout=0.05)
    try:
        for _ in range(5):
            collector.poll_once()
        assert asked == ["http://10.9.9.9:1"], f"asked {len(asked)} times in 5 polls"
        assert collector.calls.skipped == 4
        assert "last call has not ended" in collector._seen["http://10.9.9.9:1"].problem
    finally:
        release.set()


def test_an_indirect_probe_still_running_is_not_started_again() -> None:
    release, asked = threading.Event(), []

    def stuck(agent: str, address: str, **_: object) -> bool:
        asked.append((agent, address))
        release.wait(30)
        raise AgentError("released")

    probes = IndirectProbes(_Agents("http://10.9.9.9:1"), timeout=0.05, probe=stuck)  # type: ignore[arg-type]
    try:
        for _ in range(5):
            assert probes("n-1", "10.0.0.1") is None
        assert probes("n-2", "10.0.0.2") is None  # another address: its own call
        assert asked == [("http://10.9.9.9:1", "10.0.0.1"), ("http://10.9.9.9:1", "10.0.0.2")]
        assert probes.calls.skipped == 4
    finally:
        release.set()
