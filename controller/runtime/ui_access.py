"""Who may see the web view: a token exchanged once for a cookie, and a Host allow-list.

The view shows every node, service and constraint, so it wants a credential by default.
A person logs in once at /ui/login, with the token (a Docker secret in the stack, or one
the controller makes and prints at its start) typed in a form or given in the link
`/ui/login?token=...`; the answer sets a session cookie: HttpOnly (no script reads it),
SameSite=Strict (no other site's page sends it), Secure under TLS, and signed with the
token (an HMAC of its expiry), so every replica that shares the token accepts it, and a
new token ends every session. Scripts may send `Authorization: Bearer TOKEN` instead.
Under mutual TLS the token is still asked: the certificate says only that the stack's
CA signed it, which it did for every controller and agent too, and the server does not
hand the certificate's name to the application to tell a person from an agent.

DNS rebinding (a page of another site whose name is made to point at the controller)
reaches the view under that site's name: every web view request must name an allowed
host in `Host` (an IP address, `localhost`, or a name given with `--ui-hosts`); another
name is answered 421.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from controller.runtime.http_replies import bearer_matches, problem

COOKIE = "placement_ui"
SESSION_SECONDS = 12 * 3600
MAX_FORM_BYTES = 4096
LOCAL_NAMES = frozenset({"localhost"})
LOGIN_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>swarm-placement: log in</title>
  <link rel="icon" href="data:,">
  <link rel="stylesheet" href="/ui/app.css">{head}
</head>
<body>
  <main id="main" class="login">
    <h1>swarm-placement</h1>
    {body}
  </main>
</body>
</html>
"""
_FORM = """<p id="login-message" role="status">{message}</p>
    <form method="post" action="/ui/login">
      <label for="token">Web view token</label>
      <input id="token" name="token" type="password" autocomplete="current-password" required>
      <button type="submit">Log in</button>
    </form>
    <p class="hint">The token is the controller's <code>--ui-token-file</code> (the
      <code>placement-ui-token</code> secret in the stack), or the one it printed at its
      start.</p>"""


def session_cookie(request: Request) -> str | None:
    """The session cookie's value, read without `request.cookies`: that unquotes every
    value with http.cookies' pattern, quadratic in backslashes on Python before 3.11.10
    (16 KiB of them took half a second of CPU). Ours is never quoted."""
    for header in request.headers.getlist("cookie"):
        for chunk in header.split(";"):
            name, equals, value = chunk.partition("=")
            if equals and name.strip() == COOKIE:
                return value.strip()
    return None


def host_of(header: str) -> str:
    """The name in a Host header, without its port, lower case."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class UiAccess:
    """`token` None: no token is asked (tests only: `configured` always has one)."""

    token: str | None
    hosts: frozenset[str] = frozenset()
    secure: bool = False  # served over TLS: the cookie is Secure
    clock: Callable[[], float] = field(default=time.time, compare=False)

    @classmethod
    def configured(cls, *, token: str | None, hosts: Iterable[str], tls: bool) -> UiAccess:
        """The token given, or one of its own (the controller then says the link to log
        in with). Under mutual TLS too: a client certificate is no person's credential
        (the module's docstring)."""
        names = frozenset(h.strip().lower() for h in hosts if h.strip())
        return cls(token=token or secrets.token_urlsafe(24), hosts=names, secure=tls)

    def host_allowed(self, header: str | None) -> bool:
        if not header:
            return False
        name = host_of(header)
        return _is_address(name) or name in LOCAL_NAMES or name in self.hosts

    def session(self) -> str:
        expires = int(self.clock()) + SESSION_SECONDS
        return f"{expires}.{self._sign(expires)}"

    def _sign(self, expires: int) -> str:
        assert self.token is not None
        message = f"swarm-placement web view until {expires}".encode()
        return hmac.new(self.token.encode(), message, hashlib.sha256).hexdigest()

    def _session_valid(self, value: str | None) -> bool:
        expires, _, signature = (value or "").partition(".")
        # ASCII digits only (`²` is a digit to isdigit() and not to int()), and few of
        # them (int() refuses more than 4300): a forged cookie is refused, never a 500.
        if not (expires.isascii() and expires.isdigit()) or len(expires) > 12:
            return False
        if int(expires) <= self.clock():
            return False
        return hmac.compare_digest(signature.encode(), self._sign(int(expires)).encode())

    def authorized(self, request: Request) -> bool:
        if self.token is None:
            return True
        return self._session_valid(session_cookie(request)) or bearer_matches(
            request.headers.get("authorization"), self.token
        )

    def refusal(self, request: Request, *, page: bool = False) -> Response | None:
        """Why this request may not see the view (a 421, a 401, or the way to the login
        for a page), or None."""
        if not self.host_allowed(request.headers.get("host")):
            return problem(
                421,
                f"this controller does not answer to the name {request.headers.get('host')!r}: "
                "reach it by its address, or add the name with --ui-hosts",
            )
        if self.authorized(request):
            return None
        if page:
            return RedirectResponse("/ui/login", status_code=303)
        return problem(401, "log in at /ui/login first (or send the token as a bearer token)")

    # --- /ui/login ---------------------------------------------------------------------

    def routes(self) -> list[Route]:
        return [Route("/ui/login", self._login, methods=["GET", "HEAD", "POST"])]

    async def _login(self, request: Request) -> Response:
        if not self.host_allowed(request.headers.get("host")):
            refused = self.refusal(request)
            assert refused is not None
            return refused
        if self.token is None:
            return RedirectResponse("/ui", status_code=303)
        given: str | None = request.query_params.get("token")
        if request.method == "POST":
            given = await self._form_token(request)
        if given is None:
            return self._page(_FORM.format(message=""), status=200)
        if not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            return self._page(_FORM.format(message="Wrong token: try again."), status=401)
        if request.method == "POST":
            answer: Response = RedirectResponse("/ui", status_code=303)
        else:
            # A page that moves on by itself, not a redirect: a link followed from another
            # site would carry that site's context through a redirect, and a SameSite=Strict
            # cookie would not go with the next request.
            answer = self._page(
                '<p>Logged in. <a href="/ui">Open the web view</a>.</p>',
                status=200,
                head='\n  <meta http-equiv="refresh" content="0; url=/ui">',
            )
        answer.set_cookie(
            COOKIE,
            self.session(),
            max_age=SESSION_SECONDS,
            path="/ui",
            secure=self.secure,
            httponly=True,
            samesite="strict",
        )
        answer.headers["Cache-Control"] = "no-store"
        return answer

    async def _form_token(self, request: Request) -> str | None:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            return None
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                return None
        values = parse_qs(body.decode("utf-8", "replace")).get("token")
        return values[0] if values else None

    @staticmethod
    def _page(body: str, *, status: int, head: str = "") -> Response:
        return HTMLResponse(
            _PAGE.format(head=head, body=body), status_code=status, headers=LOGIN_HEADERS
        )
