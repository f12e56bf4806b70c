"""The plugin protocol against the reference plugin, served in this process."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.adapters.json_client import Endpoint
from controller.adapters.plugins import (
    PluginError,
    PluginRef,
    activate,
    discover_plugins,
    filter_nodes,
    node_health,
    score_nodes,
)
from controller.core.outside_inputs import HealthState, PluginVeto
from controller.refplugin import make_server
from controller.runtime.plugin_host import PluginHost
from tests.core.builders import node, service, snapshot

SNAP = snapshot([node(1, manager=True), node(2), node(3)], [service("db"), service("web")])
TOPOLOGY = {
    "nodes": {"node-1": {"storage": ["san-a"], "score": 10}, "node-2": {"storage": []}},
    "services": {"db": {"requires": ["san-a"]}},
    "vetoes": [{"service": "web", "node": "node-3", "reason": "rack maintenance"}],
    "health": {"node-3": {"state": "degraded", "reason": "multipath", "ttl": 20}},
}


class Served:
    def __init__(self, directory: Path, data: dict[str, Any], name: str = "topo") -> None:
        self.file = directory / f"{name}.json.data"
        self.write(data)
        self.socket = directory / f"{name}.sock"
        self.server = make_server(self.file, socket_path=self.socket)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.ref = PluginRef(name, Endpoint(f"unix://{self.socket}"), str(self.socket))

    def write(self, data: dict[str, Any]) -> None:
        self.file.write_text(json.dumps(data))

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[Served]:
    served = Served(tmp_path, TOPOLOGY)
    yield served
    served.stop()


def test_activation_and_the_three_calls(plugin: Served) -> None:
    assert activate(plugin.ref, timeout=2)
    vetoes = filter_nodes(plugin.ref, SNAP, SNAP.services, timeout=2)
    assert set(vetoes) == {
        PluginVeto("topo", "s-db", "n2", "no path to san-a"),
        PluginVeto("topo", "s-db", "n3", "no path to san-a"),
        PluginVeto("topo", "s-web", "n3", "rack maintenance"),
    }
    assert score_nodes(plugin.ref, SNAP, SNAP.services, timeout=2) == {
        "s-db": {"n1": 10.0},
        "s-web": {"n1": 10.0},
    }
    [report] = node_health(plugin.ref, SNAP, now=100.0, timeout=2)
    assert (report.node_id, report.state, report.source) == (
        "n3",
        HealthState.DEGRADED,
        "plugin.topo",
    )
    assert report.expires_at == 120.0 and report.reason == "multipath"


@pytest.mark.parametrize(
    ("fault", "says"), [("garbage", "not a JSON object"), ("error", "injected failure")]
)
def test_a_misbehaving_plugin_is_an_error(plugin: Served, fault: str, says: str) -> None:
    plugin.write({**TOPOLOGY, "fault": fault})
    with pytest.raises(PluginError, match=says):
        filter_nodes(plugin.ref, SNAP, SNAP.services, timeout=2)


def test_a_hanging_plugin_times_out(plugin: Served) -> None:
    plugin.write({**TOPOLOGY, "fault": "hang"})
    with pytest.raises(PluginError, match=r"no answer within 0\.3 s"):
        node_health(plugin.ref, SNAP, now=0.0, timeout=0.3)


@pytest.mark.parametrize(
    "answer",
    [
        {"Nodes": [{"Node": "node-1", "State": "dead"}]},
        {"Nodes": [{"Node": "node-1", "State": "failed", "TTL": -5}]},
        {"Nodes": [{"Node": "node-1", "State": "failed", "TTL": "30"}]},
        {"Nodes": "node-1"},
    ],
)
def test_wrongly_typed_answers_are_garbage(tmp_path: Path, answer: dict[str, Any]) -> None:
    """A plugin whose answer has the right shape but wrong values is failing too."""
    import http.server  # noqa: PLC0415
    import socketserver  # noqa: PLC0415

    class Handler(http.server.BaseHTTPRequestHandler):
        def address_string(self) -> str:
            return "local"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    path = tmp_path / "bad.sock"
    server = socketserver.UnixStreamServer(str(path), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ref = PluginRef("bad", Endpoint(f"unix://{path}"), str(path))
        with pytest.raises(PluginError, match="answered garbage"):
            node_health(ref, SNAP, now=0.0, timeout=2)
    finally:
        server.shutdown()
        server.server_close()


def test_discovery_follows_dockers_conventions(tmp_path: Path, plugin: Served) -> None:
    (tmp_path / "remote.spec").write_text("tcp://10.0.0.9:8080\n")
    (tmp_path / "json-one.json").write_text(json.dumps({"Name": "json-one", "Addr": "tcp://h:1"}))
    (tmp_path / "tls.json").write_text(json.dumps({"Addr": "tcp://h:1", "TLSConfig": {"x": 1}}))
    (tmp_path / "empty.spec").write_text("")
    (tmp_path / "notes.txt").write_text("not a plugin")
    found, problems = discover_plugins([tmp_path, tmp_path / "missing"])
    assert {p.name: p.endpoint.address for p in found} == {
        "topo": f"unix://{plugin.socket}",
        "remote": "tcp://10.0.0.9:8080",
        "json-one": "tcp://h:1",
    }
    assert len(problems) == 2 and any("TLS" in p for p in problems)


def test_the_host_goes_on_without_a_failing_plugin_and_retries_later(
    tmp_path: Path, plugin: Served
) -> None:
    clock = [0.0]
    host = PluginHost([tmp_path], timeout=2, retry_after=10, monotonic=lambda: clock[0])
    got = host.gather(SNAP, now=0.0)
    assert got.advice.answered == ("topo",) and len(got.advice.vetoes) == 3
    assert got.unavailable == ()
    plugin.write({**TOPOLOGY, "fault": "garbage"})
    got = host.gather(SNAP, now=1.0)
    assert got.advice.vetoes == () and got.health == ()
    assert [s.name for s in got.unavailable] == ["topo"]
    assert "not a JSON object" in got.unavailable[0].problem
    plugin.write(TOPOLOGY)
    clock[0] = 5.0
    assert [s.name for s in host.gather(SNAP, now=5.0).unavailable] == ["topo"], "backing off"
    clock[0] = 11.0
    got = host.gather(SNAP, now=11.0)
    assert got.unavailable == () and len(got.advice.vetoes) == 3


def test_other_docker_plugins_are_left_alone(tmp_path: Path) -> None:
    import http.server  # noqa: PLC0415
    import socketserver  # noqa: PLC0415

    calls: list[str] = []

    class VolumePlugin(http.server.BaseHTTPRequestHandler):
        def address_string(self) -> str:
            return "local"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            calls.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"Implements": ["VolumeDriver"]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    path = tmp_path / "volumes.sock"
    server = socketserver.UnixStreamServer(str(path), VolumePlugin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host = PluginHost([tmp_path], timeout=2)
        for _ in range(3):
            got = host.gather(SNAP, now=0.0)
            assert got.advice.answered == () and got.unavailable == ()
        assert calls == ["/Plugin.Activate"], "activated once, then never asked anything"
    finally:
        server.shutdown()
        server.server_close()


def test_the_reference_plugin_listens_on_loopback_only(tmp_path: Path) -> None:
    """It asks no credential: over TCP it answers this machine only."""
    topology = tmp_path / "topology.json"
    topology.write_text(json.dumps(TOPOLOGY))
    with pytest.raises(ValueError, match="loopback only"):
        make_server(topology, listen=("0.0.0.0", 0))
    server = make_server(topology, listen=("127.0.0.1", 0))
    server.server_close()


@pytest.mark.parametrize(
    ("headers", "body", "says"),
    [
        ("Content-Length: -1\r\n", b"", b"Content-Length must be a length"),
        ("Content-Length: many\r\n", b"", b"Content-Length must be a length"),
        ("Content-Length: 20000\r\n", b"[" * 10_000 + b"]" * 10_000, b"request is not JSON"),
    ],
)
def test_the_reference_plugin_refuses_a_lying_length_or_a_deep_body(
    tmp_path: Path, headers: str, body: bytes, says: bytes
) -> None:
    served = Served(tmp_path, TOPOLOGY)
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(5)  # a negative length read to the end: no answer, ever
            sock.connect(str(served.socket))
            sock.sendall(
                f"POST /PlacementDriver.Filter HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode() + body
            )
            answer = b""
            while chunk := sock.recv(4096):  # HTTP/1.0: the answer ends with the connection
                answer += chunk
        assert answer.startswith(b"HTTP/1.0 400") and says in answer
    finally:
        served.stop()
