"""What the agent's and the health webhook's HTTP servers share: JSON replies with a
length, bearer tokens compared in constant time, a socket timeout, and quiet logs."""

from __future__ import annotations

import hmac
import json
import logging
from http.server import BaseHTTPRequestHandler
from typing import Any

log = logging.getLogger(__name__)


def bearer_matches(header: str | None, token: str) -> bool:
    """`Authorization: Bearer TOKEN` with exactly this token (no timing leak)."""
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


class JsonHandler(BaseHTTPRequestHandler):
    timeout = 10  # seconds per socket operation: a client that stalls is dropped
    sys_version = ""
    realm = "swarm-placement"  # named in the 401 challenge

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(f"{self.realm}: " + format, *args)

    def reply(self, status: int, body: dict[str, Any]) -> None:
        data = (json.dumps(body) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 401:
            self.send_header("WWW-Authenticate", f'Bearer realm="{self.realm}"')
        self.end_headers()
        self.wfile.write(data)
