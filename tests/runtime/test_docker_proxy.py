"""The agent's read-only Docker proxy: the reads the agent makes go through, nothing else
reaches the engine, and an agent that gave up root cannot open the socket itself.

The engine is a stand-in on a unix socket that records what reaches it; the client is
docker-py, as the agent's."""

from __future__ import annotations

import http.server
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from controller.runtime.docker_proxy import allowed, make_proxy


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("GET", "/_ping"),
        ("HEAD", "/_ping"),
        ("GET", "/version"),
        ("GET", "/v1.41/info"),
        ("GET", "/v1.43/containers/json?filters=%7B%22status%22%3A+%5B%22running%22%5D%7D"),
        ("GET", "/v1.41/containers/4f2a9c/stats?stream=0&one-shot=1"),
        (
            "GET",
            "/v1.41/events?since=1764500000.5&filters=%7B%22type%22%3A%5B%22container%22%5D%7D",
        ),
    ],
)
def test_the_agents_reads_are_allowed(method: str, target: str) -> None:
    assert allowed(method.encode(), target.encode())


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("POST", "/v1.41/containers/create"),
        ("POST", "/v1.41/containers/4f2a9c/exec"),
        ("DELETE", "/v1.41/containers/4f2a9c"),
        ("GET", "/v1.41/containers/4f2a9c/json"),  # inspect: environment variables
        ("GET", "/v1.41/containers/../secrets"),
        ("GET", "/v1.41/containers/%2e%2e/stats"),
        ("GET", "/v1.41/secrets"),
        ("GET", "/v1.41/swarm"),
        ("GET", "/v1.41/containers/json/../../swarm"),
        ("GET", "http://localhost/v1.41/info"),
        ("GET", "/v1.41/info#x"),
    ],
)
def test_anything_else_is_refused(method: str, target: str) -> None:
    assert not allowed(method.encode(), target.encode())


HEADERS_SEEN: list[dict[str, str]] = []


class _Engine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A stand-in engine: answers /version, /info and a short event stream."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def address_string(self) -> str:
            return "local"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(f"GET {self.path}")
            HEADERS_SEEN.append(dict(self.headers.items()))
            if "/events" in self.path:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for n in range(3):
                    line = json.dumps({"Type": "container", "n": n}).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.write(b"0\r\n\r\n")
                return
            body = json.dumps(
                {"ApiVersion": "1.41", "Version": "20.10"}
                if self.path.endswith("/version")
                else {"Name": "node-1", "Swarm": {"NodeID": "n1"}}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            seen.append(f"POST {self.path}")
            self.send_response(201)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    path = tmp_path / "engine.sock"
    server = _Engine(str(path), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield path, seen
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxied(engine: tuple[Path, list[str]], tmp_path: Path) -> Iterator[docker.DockerClient]:
    proxy = make_proxy(str(engine[0]), tmp_path / "proxy" / "docker.sock")
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    client = docker.DockerClient(base_url=f"unix://{tmp_path}/proxy/docker.sock", version="1.41")
    yield client
    client.close()
    proxy.shutdown()
    proxy.server_close()


def test_docker_py_reads_through_the_proxy_and_cannot_write(
    proxied: docker.DockerClient, engine: tuple[Path, list[str]]
) -> None:
    _, seen = engine
    assert proxied.api.info()["Name"] == "node-1"
    events = list(proxied.api.events(decode=True, filters={"type": ["container"]}))
    assert [e["n"] for e in events] == [0, 1, 2], "a stream is piped as it comes"
    with pytest.raises(docker.errors.APIError) as refused:
        proxied.api.create_container("busybox", "true")
    assert refused.value.status_code == 403 and "refused by the agent's Docker proxy" in str(
        refused.value
    )
    assert not [s for s in seen if s.startswith("POST")], "no write reached the engine"


def test_a_body_or_a_second_request_on_the_connection_never_reaches_the_engine(
    proxied: docker.DockerClient, engine: tuple[Path, list[str]], tmp_path: Path
) -> None:
    _, seen = engine
    smuggled = (
        b"GET /v1.41/info HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        b"POST /v1.41/containers/create HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    )
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(str(tmp_path / "proxy" / "docker.sock"))
        sock.sendall(smuggled)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.") and b" 200 " in answer.split(b"\r\n")[0]
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(str(tmp_path / "proxy" / "docker.sock"))
        sock.sendall(b"GET /v1.41/info HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        assert sock.recv(4096).startswith(b"HTTP/1.1 403 ")
    assert seen == ["GET /v1.41/info"]


def _exchange(path: Path, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(str(path))
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    "request_bytes",
    [
        # A bare LF ends a line for the engine (Go) but not for a CRLF split: the POST
        # rode inside a header line that was forwarded as received.
        b"GET /v1.41/info HTTP/1.1\r\nX: a\n\nPOST /v1.41/containers/create HTTP/1.1\n"
        b"Host: x\nContent-Type: application/json\nContent-Length: 2\n\n{}\r\n\r\n",
        b"GET /v1.41/info HTTP/1.1\r\nHost: x\r\n X: folded\r\n\r\n",
        b"GET /v1.41/info HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
        b"GET /v1.41/info HTTP/1.1\r\nHost: x\rPOST /v1.41/containers/create\r\n\r\n",
    ],
    ids=["bare-lf-smuggled-post", "obs-fold", "two-content-lengths", "bare-cr"],
)
def test_a_request_that_could_carry_another_is_refused_and_nothing_forwarded_as_sent(
    proxied: docker.DockerClient,
    engine: tuple[Path, list[str]],
    tmp_path: Path,
    request_bytes: bytes,
) -> None:
    _, seen = engine
    answer = _exchange(tmp_path / "proxy" / "docker.sock", request_bytes)
    assert not [s for s in seen if s.startswith("POST")], f"a write reached the engine: {seen}"
    assert answer.startswith(b"HTTP/1.1 403 "), answer[:200]
    assert seen == []


def test_the_engine_gets_a_request_rebuilt_from_checked_parts(
    proxied: docker.DockerClient, engine: tuple[Path, list[str]], tmp_path: Path
) -> None:
    _, seen = engine
    answer = _exchange(
        tmp_path / "proxy" / "docker.sock",
        b"GET /v1.41/info HTTP/1.1\r\nHost: x\r\nX-Registry-Auth: e30=\r\n"
        b"User-Agent: docker-sdk-python/7\r\n\r\n",
    )
    assert b" 200 " in answer.split(b"\r\n")[0]
    assert seen == ["GET /v1.41/info"]
    assert HEADERS_SEEN[-1] == {
        "Host": "docker",
        "User-Agent": "docker-sdk-python/7",
        "Connection": "close",
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="giving up root needs root")
def test_an_agent_that_gave_up_root_cannot_open_a_root_socket(tmp_path: Path) -> None:
    root_only = tmp_path / "docker.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(root_only))
    listener.listen(1)
    root_only.chmod(0o660)  # as dockerd makes it: root and its group
    tmp_path.chmod(0o755)
    script = (
        "import socket, sys\n"
        "from controller.runtime.docker_proxy import give_up_root\n"
        "give_up_root(65534, 65534)\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n    s.connect(sys.argv[1])\nexcept PermissionError:\n    sys.exit(7)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(root_only)], check=False)
    listener.close()
    assert done.returncode == 7
