"""The reference placement plugin: topology and health from a JSON file.

A tool beside the controller (like the sandbox), and the smallest complete implementation
of docs/plugin-protocol.md: run it as `swarm-placement reference-plugin --socket
/run/docker/plugins/topology.sock --file topology.json`. The file is read again whenever
it changes, so editing it is how an operator (or a test) changes the plugin's mind:

    {
      "nodes":    {"node-1": {"storage": ["san-a"], "score": 10},
                   "node-2": {"storage": ["san-b"]}},
      "services": {"db": {"requires": ["san-a"]}},
      "vetoes":   [{"service": "web", "node": "node-3", "reason": "rack under maintenance"}],
      "health":   {"node-3": {"state": "degraded", "reason": "multipath lost", "ttl": 30}},
      "fault":    null
    }

Filter vetoes a node for a service that requires storage the node lacks, and every
explicit veto. Score gives each node its `score` for every service. Health reports the
listed nodes (the others are not mentioned, which leaves them to other sources).
`fault` injects failures for testing a controller: "garbage" (non-JSON answers), "hang"
(answers after 30 s), "error" (`{"Err": ...}` with HTTP 500).

It asks callers for no credential: on a unix socket the file's mode says who may call;
`--listen` (TCP) takes loopback addresses only.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CONTENT_TYPE = "application/vnd.docker.plugins.v1.2+json"
MAX_REQUEST = 4 << 20


class Topology:
    """The file, re-read when its modification time changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: float | None = None
        self._data: dict[str, Any] = {}

    def data(self) -> dict[str, Any]:
        with self._lock:
            try:
                stamp = self.path.stat().st_mtime_ns
            except OSError:
                return {}
            if stamp != self._stamp:
                try:
                    loaded = json.loads(self.path.read_text())
                except (OSError, ValueError):
                    loaded = self._data  # a file being written: keep the last good one
                self._stamp, self._data = stamp, loaded if isinstance(loaded, dict) else {}
            return self._data


def _name(item: dict[str, Any], key: str) -> str:
    return str(item.get(key) or "")


def filter_answer(topology: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    nodes = topology.get("nodes") or {}
    wanted = topology.get("services") or {}
    vetoes = []
    for service in request.get("Services") or []:
        name = _name(service, "Name")
        requires = set((wanted.get(name) or {}).get("requires") or [])
        if not requires:
            continue
        for node in request.get("Nodes") or []:
            host = _name(node, "Hostname")
            has = set((nodes.get(host) or {}).get("storage") or [])
            missing = sorted(requires - has)
            if missing:
                vetoes.append(
                    {"Service": name, "Node": host, "Reason": f"no path to {', '.join(missing)}"}
                )
    for veto in topology.get("vetoes") or []:
        vetoes.append(
            {
                "Service": str(veto.get("service", "")),
                "Node": str(veto.get("node", "")),
                "Reason": str(veto.get("reason", "")),
            }
        )
    return {"Vetoes": vetoes, "Err": ""}


def score_answer(topology: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    nodes = topology.get("nodes") or {}
    scores = [
        {"Service": _name(s, "Name"), "Node": _name(n, "Hostname"), "Score": float(score)}
        for s in request.get("Services") or []
        for n in request.get("Nodes") or []
        if isinstance(score := (nodes.get(_name(n, "Hostname")) or {}).get("score"), int | float)
    ]
    return {"Scores": scores, "Err": ""}


def health_answer(topology: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    health = topology.get("health") or {}
    known = {_name(n, "Hostname") for n in request.get("Nodes") or []}
    return {
        "Nodes": [
            {
                "Node": host,
                "State": str(entry.get("state", "ok")),
                "Reason": str(entry.get("reason", "")),
                "TTL": float(entry.get("ttl", 30)),
            }
            for host, entry in sorted(health.items())
            if host in known and isinstance(entry, dict)
        ],
        "Err": "",
    }


ROUTES = {
    "/Plugin.Activate": lambda _t, _r: {"Implements": ["PlacementDriver"]},
    "/PlacementDriver.Filter": filter_answer,
    "/PlacementDriver.Score": score_answer,
    "/PlacementDriver.Health": health_answer,
}


class _Handler(BaseHTTPRequestHandler):
    topology: Topology
    timeout = 30
    server_version = "placement-reference-plugin"
    sys_version = ""

    def address_string(self) -> str:  # unix sockets have no client address
        return "local"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:  # rfile.read(-1) would read until the client closes
            self._send(400, json.dumps({"Err": "Content-Length must be a length"}).encode())
            return
        if length > MAX_REQUEST:
            self._send(413, json.dumps({"Err": "request too large"}).encode())
            return
        raw = self.rfile.read(length) if length else b""
        route = ROUTES.get(self.path)
        if route is None:
            self._send(404, json.dumps({"Err": f"unknown method {self.path}"}).encode())
            return
        topology = self.topology.data()
        fault = topology.get("fault")
        if fault == "garbage" and self.path != "/Plugin.Activate":
            self._send(200, b"\x00<html>definitely not JSON")
            return
        if fault == "hang":
            time.sleep(30)
        if fault == "error" and self.path != "/Plugin.Activate":
            self._send(500, json.dumps({"Err": "injected failure"}).encode())
            return
        try:
            request = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):  # json recurses per level of nesting
            self._send(400, json.dumps({"Err": "request is not JSON"}).encode())
            return
        body = route(topology, request if isinstance(request, dict) else {})
        self._send(200, json.dumps(body).encode())


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def make_server(
    topology_file: Path, *, socket_path: Path | None = None, listen: tuple[str, int] | None = None
) -> socketserver.BaseServer:
    handler = type("Handler", (_Handler,), {"topology": Topology(topology_file)})
    if socket_path is not None:
        socket_path.parent.mkdir(parents=True, exist_ok=True)
        if socket_path.exists():
            socket_path.unlink()
        server: socketserver.BaseServer = _UnixServer(str(socket_path), handler)
        os.chmod(socket_path, 0o660)
        return server
    if listen is None:
        raise ValueError("give a socket path or an address to listen on")
    if not _loopback(listen[0]):
        # It asks no credential: over TCP it answers this machine only.
        raise ValueError(
            f"--listen {listen[0]}: the reference plugin asks no credential, so over TCP it "
            "listens on loopback only (127.0.0.1 or ::1); use --socket for a unix socket"
        )
    threaded = ThreadingHTTPServer(listen, handler)
    threaded.daemon_threads = True
    return threaded
