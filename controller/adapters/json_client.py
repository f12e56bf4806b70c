"""A small JSON-over-HTTP client for plugins and agents (httpx): unix sockets, TCP or
TLS, bounded.

Every call has one deadline for all of it (connecting, TLS, sending, the answer's head
and body) and a cap on the answer's size and depth (bounded_json.py), so a plugin or
agent that hangs, drips, floods or nests costs a bounded time and memory, and never
more than a refused answer. A deadline per read is no bound: a peer that sends a byte
a second keeps every read short and the call going for hours, its thread and socket
with it. So the call runs in an event loop of its own (httpx's async client) under
`anyio.fail_after`, which cancels it wherever it waits. Anything
other than a JSON object in a 2xx answer is an `HttpJsonError` naming what was wrong;
Docker plugins put their error in `{"Err": "..."}`, which is reported as such.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from controller.adapters.bounded_json import JsonInputError, parse_json
from controller.adapters.errors import RetryableError

MAX_ANSWER_BYTES = 1 << 20


class HttpJsonError(RetryableError, RuntimeError):
    """The peer could not be reached, or answered something unusable."""


@functools.lru_cache(maxsize=8)  # loading a CA costs milliseconds: once per file
def tls_context(ca: Path) -> ssl.SSLContext:
    """Trust only this CA. Peers are addressed by overlay IPs that no certificate can
    name ahead of time, so the name is not checked: the CA's signature, and the shared
    secret each request carries, say who answers."""
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    return context


@dataclass(frozen=True, slots=True)
class Endpoint:
    """`unix:///run/docker/plugins/x.sock`, `tcp://host:port`, `http://host:port` or
    `https://host:port` (with `ca`, the CA its certificate must chain to)."""

    address: str
    ca: Path | None = None

    def in_clear(self) -> bool:
        """Plain HTTP to another machine: what is sent can be read and the answer
        forged on the way (a unix socket or loopback stays on this machine)."""
        parts = urlsplit(self.address)
        if parts.scheme not in ("tcp", "http") or not parts.hostname:
            return False
        try:
            return not ipaddress.ip_address(parts.hostname).is_loopback
        except ValueError:
            return parts.hostname != "localhost"

    def client(self, timeout: float) -> tuple[httpx.AsyncClient, str]:
        """A client for one call, and the base URL to ask. No proxy from the environment:
        agents and plugins are reached directly. Plain HTTP has no use for certificates:
        `verify=False` there spares loading a CA bundle on every call."""
        parts = urlsplit(self.address)
        limits = httpx.Timeout(timeout)
        if parts.scheme == "unix":
            transport = httpx.AsyncHTTPTransport(uds=parts.path, retries=0, verify=False)
            client = httpx.AsyncClient(transport=transport, timeout=limits, trust_env=False)
            return client, "http://localhost"
        if parts.scheme in ("tcp", "http") and parts.hostname:
            client = httpx.AsyncClient(timeout=limits, trust_env=False, verify=False)
            return client, f"http://{parts.netloc}"
        if parts.scheme == "https" and parts.hostname:
            verify: ssl.SSLContext | bool = tls_context(self.ca) if self.ca else True
            client = httpx.AsyncClient(timeout=limits, verify=verify, trust_env=False)
            return client, f"https://{parts.netloc}"
        raise HttpJsonError(
            f"unsupported address {self.address!r} (unix://, tcp://, http:// or https://)"
        )


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
    """One request, all of it within `timeout` seconds; the answer's JSON object, or
    HttpJsonError. Blocks: call it from a thread with no event loop running."""
    data = None if body is None else json.dumps(body).encode()
    sent = {"Accept": content_type, **(headers or {})}
    if data is not None:
        sent["Content-Type"] = content_type
    try:
        exchange = functools.partial(_exchange, endpoint, method, path, data, sent, timeout=timeout)
        raw, status = anyio.run(exchange)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise HttpJsonError(f"no answer within {timeout:g} s") from exc
    except (httpx.HTTPError, OSError) as exc:
        raise HttpJsonError(f"cannot reach {endpoint.address}: {_words(exc)}") from exc
    return answer_from(raw, status, path)


async def _exchange(
    endpoint: Endpoint,
    method: str,
    path: str,
    data: bytes | None,
    headers: dict[str, str],
    *,
    timeout: float,
) -> tuple[bytes, int]:
    """The answer's bytes (a little over the cap at most) and status, or TimeoutError
    when the whole exchange takes longer than `timeout`."""
    with anyio.fail_after(timeout):
        client, base = endpoint.client(timeout)
        async with client, client.stream(method, base + path, content=data, headers=headers) as r:
            raw = b""
            async for chunk in r.aiter_bytes():
                raw += chunk
                if len(raw) > MAX_ANSWER_BYTES:
                    break
            return raw, r.status_code


def answer_from(raw: bytes, status: int, path: str) -> dict[str, Any]:
    """The JSON object of a 2xx answer; HttpJsonError for anything else, whatever the
    bytes (too large, too deep, not JSON, not an object, an `Err`)."""
    if len(raw) > MAX_ANSWER_BYTES:
        raise HttpJsonError(f"answer larger than {MAX_ANSWER_BYTES} bytes")
    problem = ""
    try:
        answer = parse_json(raw, max_bytes=MAX_ANSWER_BYTES) if raw.strip() else {}
    except JsonInputError as exc:
        answer, problem = None, str(exc)
    err = answer.get("Err") if isinstance(answer, dict) else None
    if not 200 <= status < 300:
        why = err if isinstance(err, str) and err else _snippet(raw)
        raise HttpJsonError(f"HTTP {status} from {path}: {why}")
    if problem:
        raise HttpJsonError(
            f"{path} answered something that is not a JSON object ({problem}): {_snippet(raw)}"
        )
    if not isinstance(answer, dict):
        raise HttpJsonError(f"{path} answered something that is not a JSON object: {_snippet(raw)}")
    if isinstance(err, str) and err:
        raise HttpJsonError(f"{path} failed: {err}")
    return answer


def _words(exc: BaseException) -> str:
    """The innermost reason, one line (not a library's repr)."""
    while exc.__context__ is not None and not str(exc):
        exc = exc.__context__
    return str(exc) or type(exc).__name__


def _snippet(raw: bytes) -> str:
    text = raw[:80].decode("utf-8", "replace")
    return repr(text + ("..." if len(raw) > 80 else ""))
