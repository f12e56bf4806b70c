"""What the HTTP routes share: JSON error replies, bearer tokens compared in constant
time, the 401 challenge."""

from __future__ import annotations

import hmac
from typing import Any

from starlette.responses import JSONResponse

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
