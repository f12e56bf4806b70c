"""The live web view at /ui: one static page, its state as JSON, and an event stream.

The page (runtime/ui/) is plain HTML, CSS and JavaScript shipped in the package: no CDN
and no build step, so it works on an air-gapped swarm. It reads `/ui/state` once, then
`/ui/events` (server-sent events) pushes the new state after every cycle; the page never
reloads. The document is built only when someone looks (view_document.py), once per
cycle however many pages are open, and off the event loop. Only a logged-in browser, at
an allowed host name, gets the page and its data (ui_access.py); the script and style
sheet, which hold no data, are served to the login page too.
"""

from __future__ import annotations

import json
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from importlib import resources

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from controller.policy import Policy
from controller.runtime.http_replies import problem
from controller.runtime.reconciler import CycleResult
from controller.runtime.ui_access import COOKIE, UiAccess
from controller.runtime.view_document import Logged, view_document

TIMELINE = 500  # decisions the timeline keeps
MAX_STREAMS = 16  # open event streams; more would starve the probes of connections
STREAMS_PER_SESSION = 4  # one person's tabs; the rest stay for others
KEEPALIVE_SECONDS = 15.0
# The longest one stream runs, whatever the credential: a bearer token or a client
# certificate has no session to end it. EventSource then opens the next one by itself.
MAX_STREAM_SECONDS = 3600.0
STATIC = {
    "/ui": ("index.html", "text/html; charset=utf-8"),
    "/ui/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/ui/app.css": ("app.css", "text/css; charset=utf-8"),
}
# Everything the page loads is its own: no script or style from anywhere else.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; "
        "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True)
class _Cycle:
    result: CycleResult
    policy: Policy
    role: str
    now: float


class WebView:
    def __init__(
        self,
        access: UiAccess,
        *,
        trace_url: str | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.access = access
        self._trace_url = trace_url
        self._clock = clock
        self._timeline: deque[Logged] = deque(maxlen=TIMELINE)
        self._last: _Cycle | None = None
        self.version = 0
        self._built: tuple[int, bytes] | None = None
        # Views that wake on the same cycle wait for one build rather than each making one.
        self._building = anyio.Lock()
        self._changed = anyio.Event()
        self._streams = 0
        self._per_session: Counter[str] = Counter()
        self._closed = False

    def update(self, result: CycleResult, policy: Policy, role: str) -> None:
        """After each cycle, in the event loop: remember it and wake the open streams."""
        now = self._clock()
        self._timeline.extend(Logged(now, d, result.trace_id) for d in result.logged)
        if result.snapshot is not None:
            self._last = _Cycle(result, policy, role, now)
        self.version += 1
        self._changed.set()
        self._changed = anyio.Event()

    def close(self) -> None:
        """The server stops: end the open streams (browsers reconnect to the next one)."""
        self._closed = True
        self._changed.set()

    def _build(self, last: _Cycle, timeline: tuple[Logged, ...]) -> bytes:
        assert last.result.snapshot is not None
        document = view_document(
            snapshot=last.result.snapshot,
            plan=last.result.plan,
            policy=last.policy,
            timeline=timeline,
            role=last.role,
            now=last.now,
            trace_url=self._trace_url,
        )
        return json.dumps(document, default=str).encode()

    async def state(self) -> bytes | None:
        version, last = self.version, self._last
        if last is None:
            return None
        async with self._building:
            if self._built is None or self._built[0] != version:
                body = await anyio.to_thread.run_sync(self._build, last, tuple(self._timeline))
                self._built = (version, body)
            return self._built[1]

    def routes(self) -> list[Route]:
        return [
            *(Route(path, self._static, methods=["GET", "HEAD"]) for path in STATIC),
            Route("/ui/", self._static, methods=["GET", "HEAD"]),
            Route("/ui/state", self._state, methods=["GET", "HEAD"]),
            Route("/ui/events", self._events, methods=["GET"]),
            *self.access.routes(),
        ]

    async def _static(self, request: Request) -> Response:
        path = request.url.path.rstrip("/")
        if path == "/ui":
            refused = self.access.refusal(request, page=True)
        elif not self.access.host_allowed(request.headers.get("host")):
            refused = self.access.refusal(request)
        else:
            refused = None  # the script and styles hold no data; the login page uses them
        if refused is not None:
            return refused
        name, media = STATIC.get(path, STATIC["/ui"])
        body = resources.files("controller.runtime").joinpath("ui", name).read_bytes()
        return Response(body, media_type=media, headers=SECURITY_HEADERS)

    async def _state(self, request: Request) -> Response:
        if (refused := self.access.refusal(request)) is not None:
            return refused
        body = await self.state()
        if body is None:
            return problem(503, "no cycle has completed yet: try again in a moment")
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    async def _events(self, request: Request) -> Response:
        if (refused := self.access.refusal(request)) is not None:
            return refused
        if self._streams >= MAX_STREAMS:
            return problem(503, f"{MAX_STREAMS} views are open already")
        # A session, or else the credential (a bearer token, a client certificate).
        who = request.cookies.get(COOKIE) or request.headers.get("authorization") or "tls"
        if self._per_session[who] >= STREAMS_PER_SESSION:
            return problem(429, f"{STREAMS_PER_SESSION} views are open for this login already")
        expires = self.access.session_expiry(request)
        ends = self.access.clock() + MAX_STREAM_SECONDS
        return StreamingResponse(
            self._stream(who, ends if expires is None else min(expires, ends)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _stream(self, who: str, ends: float) -> AsyncIterator[bytes]:
        """Until the controller stops, the session ends or `MAX_STREAM_SECONDS` pass: a
        stream outlives no login, and none runs for ever."""
        self._streams += 1
        self._per_session[who] += 1
        try:
            sent = -1
            while not self._closed and self.access.clock() < ends:
                if self.version != sent:
                    sent = self.version
                    body = await self.state()
                    if body is not None:
                        yield b"event: state\ndata: " + body + b"\n\n"
                changed = self._changed
                with anyio.move_on_after(KEEPALIVE_SECONDS) as waited:
                    await changed.wait()
                if waited.cancelled_caught and not self._closed:
                    yield b": keepalive\n\n"  # proxies keep an idle stream open
        finally:
            self._streams -= 1
            self._per_session[who] -= 1
            if self._per_session[who] <= 0:
                del self._per_session[who]


def role_of(standby: str | None) -> str:
    return "leader" if standby is None else f"standby: {standby}"
