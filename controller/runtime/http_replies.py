"""What the HTTP routes share: JSON error replies, bearer tokens compared in constant
time, the 401 challenge; and the agent's standard-library handler (a socket timeout,
quiet logs)."""

from __future__ import annotations

import hmac
import json
import logging
from http.server import BaseHTTPRequestHandler
from typing import Any

from starlette.responses import JSONResponse

log = logging.getLogger(__name__)
REALM = "swarm-placement"


def bearer_matches(header: str | None, token: str) -> bool:
    """`Authorization: Bearer TOKEN` with exactly this token (no timing leak)."""
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


def problem(status: int, message: str, **extra: Any) -> JSONResponse:
    """An error answer: `{"error": message, ...}`, with the challenge on a 401."""
    headers = {"WWW-Authenticate": f'Bearer realm="{REALM}"'} if status == 401 else None
    return JSONResponse({"error": message, **extra}, status_code=status, headers=headers)


def unauthorized(message: str) -> JSONResponse:
    return problem(401, message)


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
