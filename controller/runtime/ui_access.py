"""Who may see the web view: a token exchanged once for a cookie, and a Host allow-list.

The view shows every node, service and constraint, so it wants a credential by default.
A person logs in once at /ui/login, with the token (a Docker secret in the stack) typed
in a form, or with the one-time link the controller prints at its start when it made a
token of its own (`/ui/login?code=...`: a code good for one login within 10 minutes,
never the token itself, which no URL carries and no log shows); the answer sets a
session cookie: HttpOnly (no script reads it),
SameSite=Strict (no other site's page sends it), Secure under TLS, and signed with the
token (an HMAC of its expiry), so every replica that shares the token accepts it, and a
new token ends every session. Scripts may send `Authorization: Bearer TOKEN` instead.
Under mutual TLS the token is still asked: the certificate says only that the stack's
CA signed it, which it did for every controller and agent too, and the server does not
hand the certificate's name to the application to tell a person from an agent.
`POST /ui/logout` ends a session on this replica (the cookie is dropped and its value
refused until it would have expired). After 5 wrong tokens from one address, each
further attempt waits twice as long as the last (up to 5 minutes) and is answered 429.
A cookie that is not one this controller makes is a 400, never a server error.

DNS rebinding (a page of another site whose name is made to point at the controller)
reaches the view under that site's name: every web view request must name an allowed
host in `Host` (an IP address, `localhost`, or a name given with `--ui-hosts`); another
name is answered 421.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
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
CODE_SECONDS = 600  # a one-time login link is good this long
FREE_FAILURES = 5  # wrong tokens from one address before it must wait
MAX_WAIT_SECONDS = 300.0
_TRACKED = 4096  # addresses with failures remembered (the oldest forgotten first)
_SESSION = re.compile(r"([0-9]{1,12})\.([0-9a-f]{64})")
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
_USED_CODE = "That login link was used already or has expired: log in with the token."
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
    # Mutable state of a frozen value: one-time codes, ended sessions, failed logins.
    _codes: dict[str, float] = field(default_factory=dict, compare=False, repr=False)
    _ended: dict[str, float] = field(default_factory=dict, compare=False, repr=False)
    _failures: dict[str, tuple[int, float]] = field(default_factory=dict, compare=False, repr=False)

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

    def login_code(self) -> str:
        """A code for one login within CODE_SECONDS: the link said at start carries it."""
        code = secrets.token_urlsafe(24)
        self._codes[code] = self.clock() + CODE_SECONDS
        return code

    def _use_code(self, code: str) -> bool:
        now = self.clock()
        for old in [c for c, until in self._codes.items() if until <= now]:
            del self._codes[old]
        for known in list(self._codes):
            if hmac.compare_digest(known.encode(), code.encode()):
                del self._codes[known]
                return True
        return False

    def session_expiry(self, request: Request) -> float | None:
        """When the request's session cookie expires (None: a bearer token or mutual
        TLS, which have no session to outlive)."""
        found = _SESSION.fullmatch(session_cookie(request) or "")
        return float(found.group(1)) if found and self._session_valid(found.group(0)) else None

    def session(self) -> str:
        expires = int(self.clock()) + SESSION_SECONDS
        return f"{expires}.{self._sign(expires)}"

    def _sign(self, expires: int) -> str:
        assert self.token is not None
        message = f"swarm-placement web view until {expires}".encode()
        return hmac.new(self.token.encode(), message, hashlib.sha256).hexdigest()

    def _session_valid(self, value: str | None) -> bool:
        found = _SESSION.fullmatch(value or "")
        if found is None or int(found.group(1)) <= self.clock() or value in self._ended:
            return False
        expected = self._sign(int(found.group(1)))
        return hmac.compare_digest(found.group(2).encode(), expected.encode())

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
        cookie = session_cookie(request)
        if cookie is not None and self.token is not None and not _SESSION.fullmatch(cookie):
            return problem(400, f"malformed {COOKIE} cookie: log in again at /ui/login")
        if self.authorized(request):
            return None
        if page:
            return RedirectResponse("/ui/login", status_code=303)
        return problem(401, "log in at /ui/login first (or send the token as a bearer token)")

    # --- /ui/login ---------------------------------------------------------------------

    def routes(self) -> list[Route]:
        return [
            Route("/ui/login", self._login, methods=["GET", "HEAD", "POST"]),
            Route("/ui/logout", self._logout, methods=["POST"]),
        ]

    async def _logout(self, request: Request) -> Response:
        if (refused := self.refusal(request)) is not None:
            return refused
        cookie = session_cookie(request)
        now = self.clock()
        for old in [v for v, until in self._ended.items() if until <= now]:
            del self._ended[old]
        if cookie is not None and (found := _SESSION.fullmatch(cookie)):
            self._ended[cookie] = float(found.group(1))
        answer = RedirectResponse("/ui/login", status_code=303)
        answer.delete_cookie(COOKIE, path="/ui", secure=self.secure, httponly=True)
        return answer

    def _wait_left(self, peer: str) -> float:
        failures, until = self._failures.get(peer, (0, 0.0))
        return max(0.0, until - self.clock()) if failures >= FREE_FAILURES else 0.0

    def _failed(self, peer: str) -> None:
        failures, _ = self._failures.pop(peer, (0, 0.0))
        failures += 1
        wait = min(MAX_WAIT_SECONDS, 2.0 ** (failures - FREE_FAILURES))
        self._failures[peer] = (failures, self.clock() + wait)  # last in the order
        while len(self._failures) > _TRACKED:
            del self._failures[next(iter(self._failures))]

    async def _login(self, request: Request) -> Response:
        if not self.host_allowed(request.headers.get("host")):
            refused = self.refusal(request)
            assert refused is not None
            return refused
        if self.token is None:
            return RedirectResponse("/ui", status_code=303)
        peer = request.client.host if request.client is not None else "local"
        if (left := self._wait_left(peer)) > 0:
            answer = problem(429, f"too many wrong tokens from {peer}: try again in {left:.0f} s")
            answer.headers["Retry-After"] = str(int(left) + 1)
            return answer
        code = request.query_params.get("code")
        if request.method != "POST" and code is not None:
            if not self._use_code(code):
                self._failed(peer)
                return self._page(_FORM.format(message=_USED_CODE), status=401)
            return self._logged_in(request)
        given = await self._form_token(request) if request.method == "POST" else None
        if given is None:
            return self._page(_FORM.format(message=""), status=200)
        if not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            self._failed(peer)
            return self._page(_FORM.format(message="Wrong token: try again."), status=401)
        self._failures.pop(peer, None)
        return self._logged_in(request)

    def _logged_in(self, request: Request) -> Response:
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
