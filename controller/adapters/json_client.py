"""A small JSON-over-HTTP client for plugins and agents: unix sockets or TCP, bounded.

Every call has a deadline for connecting and for each read, and a cap on the answer's
size, so a plugin or agent that hangs or floods costs a bounded time and memory. Anything
other than a JSON object in a 2xx answer is an `HttpJsonError` naming what was wrong;
Docker plugins put their error in `{"Err": "..."}`, which is reported as such.
"""

from __future__ import annotations

import http.client
import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from controller.adapters.errors import RetryableError

MAX_ANSWER_BYTES = 1 << 20


class HttpJsonError(RetryableError, RuntimeError):
    """The peer could not be reached, or answered something unusable."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


@dataclass(frozen=True, slots=True)
class Endpoint:
    """`unix:///run/docker/plugins/x.sock`, `tcp://host:port` or `http://host:port`."""

    address: str

    def connection(self, timeout: float) -> http.client.HTTPConnection:
        parts = urlsplit(self.address)
        if parts.scheme == "unix":
            return _UnixConnection(parts.path, timeout)
        if parts.scheme in ("tcp", "http") and parts.hostname:
            return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
        raise HttpJsonError(f"unsupported address {self.address!r} (unix://, tcp:// or http://)")


def call_json(
    endpoint: Endpoint,
    method: str,
    path: str,
    body: Any = None,
    *,
    timeout: float,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    """One request; the answer's JSON object, or HttpJsonError."""
    data = None if body is None else json.dumps(body).encode()
    sent = {"Accept": content_type, **(headers or {})}
    if data is not None:
        sent["Content-Type"] = content_type
    conn = endpoint.connection(timeout)
    try:
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        raw = response.read(MAX_ANSWER_BYTES + 1)
    except TimeoutError as exc:
        raise HttpJsonError(f"no answer within {timeout:g} s") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise HttpJsonError(f"cannot reach {endpoint.address}: {exc}") from exc
    finally:
        conn.close()
    if len(raw) > MAX_ANSWER_BYTES:
        raise HttpJsonError(f"answer larger than {MAX_ANSWER_BYTES} bytes")
    try:
        answer = json.loads(raw) if raw.strip() else {}
    except (UnicodeDecodeError, ValueError):
        answer = None
    err = answer.get("Err") if isinstance(answer, dict) else None
    if not 200 <= response.status < 300:
        why = err if isinstance(err, str) and err else _snippet(raw)
        raise HttpJsonError(f"HTTP {response.status} from {path}: {why}")
    if not isinstance(answer, dict):
        raise HttpJsonError(f"{path} answered something that is not a JSON object: {_snippet(raw)}")
    if isinstance(err, str) and err:
        raise HttpJsonError(f"{path} failed: {err}")
    return answer


def _snippet(raw: bytes) -> str:
    text = raw[:80].decode("utf-8", "replace")
    return repr(text + ("..." if len(raw) > 80 else ""))
