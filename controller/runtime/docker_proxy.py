"""The node agent's read-only window on the Docker socket: an allow-listed proxy.

The agent needs the engine only to read: who the node is (`/info`), its containers
(`/containers/json`, a container's `/stats`) and their events (`/events`). The socket
itself lets whoever holds it start a privileged container, which is root on the node.
With `swarm-placement agent --docker-proxy`, the agent starts this proxy as a process of
its own, still root, and then gives up root itself: the network-facing process can then
reach the engine only through the proxy, which forwards nothing but those reads.

One request per connection, `GET` or `HEAD`, no body, a path from the list (with or
without an API version); anything else is answered 403 and never reaches the engine.
The request is rebuilt from its checked parts (method, target, User-Agent, with
`Connection: close`), never forwarded as received; the engine's answer is piped back
until it ends: event streams included, nothing is parsed on the way
back. Standard library only: a small process beside the agent.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import socketserver
import sys
import threading
from pathlib import Path

MAX_HEAD = 16 * 1024
_CHUNK = 4096
MAX_READ = MAX_HEAD + _CHUNK  # the most `_head` returns: the head's cap and a chunk over
HEAD_SECONDS = 10.0
_ID = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
ALLOWED = re.compile(
    rf"^(?:/v[0-9]{{1,2}}\.[0-9]{{1,3}})?"
    rf"/(?:_ping|version|info|events|containers/json|containers/{_ID}/stats)"
    r"(?:\?[A-Za-z0-9_.~%=&+\-]*)?$"
)
_METHODS = (b"GET", b"HEAD")


def allowed(method: bytes, target: bytes) -> bool:
    """Whether a request line's method and target are on the read-only list."""
    try:
        text = target.decode("ascii")
    except UnicodeDecodeError:
        return False
    return method in _METHODS and ALLOWED.fullmatch(text) is not None


def _refuse(conn: socket.socket, why: str) -> None:
    body = f'{{"message": "refused by the agent\'s Docker proxy: {why}"}}\n'.encode()
    head = (
        "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with contextlib.suppress(OSError):
        conn.sendall(head + body)


def _head(conn: socket.socket) -> bytes | None:
    conn.settimeout(HEAD_SECONDS)
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD:
            return None
        chunk = conn.recv(_CHUNK)
        if not chunk:
            return None
        data += chunk
    return data


_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_USER_AGENT = re.compile(rb"[ -~]{1,200}")  # printable ASCII, no control bytes
_BODY_HEADERS = (b"content-length", b"transfer-encoding")


class RefusedRequestError(ValueError):
    """A request head the proxy will not forward; the message says why."""


def rebuilt_request(data: bytes) -> bytes:
    """The request to forward, rebuilt from the checked parts of `data` (what was read
    of a request head, at most `MAX_HEAD` and a chunk); `RefusedRequestError` if not.

    Nothing the client sent is forwarded as sent: the engine (Go's net/http) reads a
    bare LF as a line end, so a line forwarded whole could carry a second request.
    Only the method, the target (both checked against the list) and a printable
    User-Agent go on; lines must end in CRLF, with no folding and no body. Anything
    after the head is dropped: one request is all a connection carries. Each step is
    a split or a match over the head once: time linear in its length."""
    head = data.split(b"\r\n\r\n", 1)[0]
    if b"\n" in head.replace(b"\r\n", b"") or b"\r" in head.replace(b"\r\n", b""):
        raise RefusedRequestError("a bare CR or LF in the request head")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or parts[2] not in (b"HTTP/1.0", b"HTTP/1.1"):
        raise RefusedRequestError("not an HTTP/1 request")
    if not allowed(parts[0], parts[1]):
        raise RefusedRequestError(
            f"{parts[0].decode('latin-1')[:20]} {parts[1].decode('latin-1')[:100]}"
        )
    agent, seen = b"swarm-placement", set()
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or _TOKEN.fullmatch(name) is None:
            raise RefusedRequestError("a malformed header line (or a folded one)")
        name, value = name.lower(), value.strip(b" \t")
        if name in _BODY_HEADERS and name in seen:
            raise RefusedRequestError(f"{name.decode()} given twice")
        seen.add(name)
        if name in _BODY_HEADERS and (name == b"transfer-encoding" or value != b"0"):
            raise RefusedRequestError("a request with a body")
        if name == b"user-agent" and _USER_AGENT.fullmatch(value):
            agent = value
    rebuilt = [
        parts[0] + b" " + parts[1] + b" HTTP/1.1",
        b"Host: docker",
        b"User-Agent: " + agent,
        b"Connection: close",
    ]
    return b"\r\n".join(rebuilt) + b"\r\n\r\n"


class _Handler(socketserver.BaseRequestHandler):
    upstream: str

    def handle(self) -> None:
        conn: socket.socket = self.request
        try:
            data = _head(conn)
        except OSError:
            return
        if data is None:
            _refuse(conn, "no whole request head")
            return
        try:
            head = rebuilt_request(data)
        except RefusedRequestError as refused:
            _refuse(conn, str(refused))
            return
        conn.settimeout(None)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as engine:
            try:
                engine.connect(self.upstream)
                engine.sendall(head)
                while chunk := engine.recv(65536):
                    conn.sendall(chunk)
            except OSError:
                return


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def make_proxy(upstream: str, listen: Path) -> socketserver.BaseServer:
    """Bound now; anyone who may open `listen` may read through it (mode 0666 in a
    directory of its own): the agent, once it has given up root."""
    listen.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    if listen.is_socket():
        listen.unlink()
    handler = type("Handler", (_Handler,), {"upstream": upstream})
    server = _Server(str(listen), handler)
    listen.chmod(0o666)
    return server


def serve_until_stdin_closes(server: socketserver.BaseServer) -> None:
    """Serve until the agent that started this process is gone (its end of our stdin
    closes with it): a proxy never outlives its agent."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with contextlib.suppress(OSError):
        while os.read(sys.stdin.fileno(), 1):
            pass
    server.shutdown()
    server.server_close()


def give_up_root(uid: int, gid: int) -> None:
    """From now on this process is `uid`: the Docker socket and the secrets (root's, mode
    0400 or 0660) are out of its reach; what it opened before stays open."""
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.geteuid() == 0 or os.getuid() == 0:
        raise RuntimeError("could not give up root")


def main(argv: list[str] | None = None) -> int:
    """`python -m controller.runtime.docker_proxy UPSTREAM LISTEN`: the standard library
    only, so that the process beside the agent stays small."""
    upstream, listen = argv if argv is not None else sys.argv[1:]
    serve_until_stdin_closes(make_proxy(upstream, Path(listen)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
