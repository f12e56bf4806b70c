"""A Docker Engine that answers from a record: the replay's only Docker.

It listens on a unix socket and speaks the Engine API's HTTP, so the controller's own
client and adapters (whatever they are: docker-py, a raw client) read the recorded
answers and send their writes as they would to a real manager. Every write is kept, as
sent (path, version, body), and answered with success; the next cycle's answers come
from the record again, whatever was written.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socketserver
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from controller.adapters.engine import EngineClient, connect

API_VERSION = "1.41"
_VERSIONED = re.compile(r"^/v\d+\.\d+(/.*)$")


@dataclass
class Answers:
    """What the engine says during one cycle."""

    nodes: list[Any] = field(default_factory=list)
    services: list[Any] = field(default_factory=list)
    tasks: list[Any] = field(default_factory=list)  # desired state running or ready
    history: list[Any] = field(default_factory=list)  # desired state shutdown
    swarm: Any = None  # None: not a manager's answer (404)
    mirror: Any = None  # the mirror's config; None: there is none


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    engine: FakeEngine


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def address_string(self) -> str:
        return "replay"

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> tuple[str, dict[str, list[str]]]:
        url = urlsplit(self.path)
        path = url.path
        found = _VERSIONED.match(path)
        if found:
            path = found.group(1)
        return path, parse_qs(url.query)

    def do_HEAD(self) -> None:
        self._send(200, {})

    def do_GET(self) -> None:
        path, query = self._route()
        status, body = self.server.engine.get(path, query)
        self._send(status, body)

    def do_POST(self) -> None:
        path, query = self._route()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, body = self.server.engine.post(path, query, json.loads(raw) if raw else None)
        self._send(status, body)


def _missing(what: str) -> tuple[int, Any]:
    return 404, {"message": f"{what} not found"}


class FakeEngine:
    def __init__(self) -> None:
        self.answers = Answers()
        self.writes: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def get(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        a = self.answers
        parts = [p for p in path.split("/") if p]
        if path in ("/version", "/_ping"):
            return 200, {"ApiVersion": API_VERSION, "MinAPIVersion": "1.12", "Version": "replay"}
        if path == "/info":
            return 200, {"Swarm": {"LocalNodeState": "active", "ControlAvailable": True}}
        if path == "/swarm":
            return (200, a.swarm) if a.swarm is not None else _missing("swarm")
        if path == "/tasks":
            filters = json.loads(query.get("filters", ["{}"])[0])
            wanted = filters.get("desired-state", [])
            if isinstance(wanted, dict):  # the older filter encoding: {"running": true}
                wanted = list(wanted)
            return 200, a.history if "shutdown" in wanted else a.tasks
        listing = {"nodes": a.nodes, "services": a.services}
        if len(parts) == 1 and parts[0] in listing:
            return 200, listing[parts[0]]
        if len(parts) == 2 and parts[0] in listing:
            for item in listing[parts[0]]:
                if parts[1] in (item.get("ID"), (item.get("Spec") or {}).get("Name")):
                    return 200, item
            return _missing(parts[0][:-1])
        if len(parts) == 2 and parts[0] == "configs":
            mirror = a.mirror
            if mirror is not None and parts[1] in (mirror.get("ID"), mirror["Spec"].get("Name")):
                return 200, mirror
            return _missing("config")
        return 404, {"message": f"the replay engine has no {path}"}

    def post(self, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        with self._lock:
            self.writes.append(
                {"path": path, "version": query.get("version", [None])[0], "body": body}
            )
        if path == "/configs/create":
            return 201, {"ID": "replay-mirror"}
        return 200, {}

    def take_writes(self) -> list[dict[str, Any]]:
        with self._lock:
            writes, self.writes = self.writes, []
        return writes

    @contextlib.contextmanager
    def serving(self) -> Iterator[str]:
        """Serve on a fresh unix socket; yields its DOCKER_HOST."""
        with tempfile.TemporaryDirectory(prefix="replay-engine-") as where:
            socket = Path(where) / "docker.sock"
            server = _Server(str(socket), _Handler)
            server.engine = self
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            try:
                yield f"unix://{socket}"
            finally:
                server.shutdown()
                server.server_close()
                thread.join()

    @contextlib.contextmanager
    def client(self) -> Iterator[EngineClient]:
        """Serve, and a client connected as the runtime connects (through DOCKER_HOST)."""
        with self.serving() as host:
            before = os.environ.get("DOCKER_HOST")
            os.environ["DOCKER_HOST"] = host
            try:
                client = connect()
            finally:
                if before is None:
                    os.environ.pop("DOCKER_HOST", None)
                else:
                    os.environ["DOCKER_HOST"] = before
            try:
                yield client
            finally:
                client.close()
