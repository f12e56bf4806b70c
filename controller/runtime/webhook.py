"""`POST /v1/health`: outside monitors tell the controller a node is ok, degraded or failed.

    POST /v1/health
    Authorization: Bearer <token>
    Content-Type: application/json

    {"node": "node-2", "state": "failed", "reason": "storage path lost", "ttl": 300}

`node` is a hostname or a node ID; `ttl` (seconds, default 600, at most 7 days) is how
long the word stands without being repeated. Answers are JSON: 202 with what was taken,
or an error with `{"error": "..."}`: 401 (no or wrong token), 404 (unknown node or path),
405, 408 (the body came too slowly), 411 (no Content-Length), 413 (body over the
limit), 415 (not JSON), 400 (not parseable JSON), 422 (fields wrong, each named), 503
(no cluster observed yet). `GET /v1/health` (same token) lists the live reports.

It is a route of the process's HTTP server (http_server.py): a slow or hostile client
holds one connection for seconds at most and nothing of the reconcile loop; a report
only fires the loop's trigger.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from controller.adapters.bounded_json import JsonInputError, parse_json
from controller.core.model import ClusterSnapshot, Node, NodeState
from controller.core.outside_inputs import HealthReport, HealthState
from controller.runtime.health_store import HealthStore
from controller.runtime.http_replies import bearer_matches, problem
from controller.runtime.report_limits import ReportGate, ReportLimits, ReportRefusedError

PATH = "/v1/health"
BODY_SECONDS = 10.0

DEFAULT_MAX_BODY = 16 * 1024
DEFAULT_TTL_SECONDS = 600.0
MAX_TTL_SECONDS = 7 * 86_400.0
SOURCE = "webhook"


class HealthPost(BaseModel):
    """The body of POST /v1/health, validated strictly (no extra fields, no coercion)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    node: str = Field(min_length=1, max_length=200)
    state: Literal["ok", "degraded", "failed"]
    reason: str = Field("", max_length=500)
    ttl: float = Field(DEFAULT_TTL_SECONDS, gt=0, le=MAX_TTL_SECONDS)
    # When the monitor made the report (epoch seconds): the replay guard's (report_limits).
    at: float | None = Field(None, allow_inf_nan=False)


class _RequestError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        result: str = "invalid",
        retry_after: float = 0.0,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.extra = status, message, extra
        self.result = {401: "unauthorized", 503: "not-ready"}.get(status, result)
        self.retry_after = retry_after

    @classmethod
    def of(cls, refused: ReportRefusedError) -> _RequestError:
        return cls(refused.status, refused.message, refused.result, refused.retry_after)


class HealthApi:
    """The webhook's logic; `routes()` puts it on the process's HTTP server."""

    def __init__(
        self,
        *,
        token: str,
        store: HealthStore,
        latest: Callable[[], ClusterSnapshot | None],
        on_report: Callable[[HealthReport], None],
        clock: Callable[[], float],
        max_body: int = DEFAULT_MAX_BODY,
        role: Callable[[], str] = lambda: "leader",
        on_result: Callable[[str], None] = lambda _: None,
        limits: ReportLimits | None = None,
        say: Callable[[str], None] = lambda _: None,
    ) -> None:
        if not token:
            raise ValueError("the health webhook needs a token")
        self.token, self.store, self.latest, self.role = token, store, latest, role
        self.on_report, self.clock, self.max_body = on_report, clock, max_body
        self.on_result = on_result  # each post's result, for the metric
        self.gate = ReportGate(limits or ReportLimits())
        self.posts = PostLog(say)

    def routes(self) -> list[Route]:
        return [Route(PATH, self._serve, methods=["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"])]

    async def _serve(self, request: Request) -> Response:
        caller = request.client.host if request.client else "unknown"
        try:
            if request.method not in ("GET", "HEAD", "POST"):
                raise _RequestError(405, f"{request.method} is not allowed: POST or GET {PATH}")
            if request.method == "POST":
                try:  # before the token is even read: a flood costs a refusal each
                    self.gate.admit(caller, self.clock())
                except ReportRefusedError as refused:
                    raise _RequestError.of(refused) from None
            self.authorize(request.headers.get("authorization"))
            if request.method == "POST":
                taken = self.accept(await self._body(request), caller=caller)
                self.on_result("accepted")
                self.posts.said(caller, 202, "accepted", _taken_words(taken))
                return JSONResponse(taken, status_code=202)
            return JSONResponse(self.listing())
        except _RequestError as problem_:
            if request.method == "POST":
                self.on_result(problem_.result)
                self.posts.said(caller, problem_.status, problem_.result, problem_.message)
            headers = (
                {"Retry-After": str(math.ceil(problem_.retry_after))}
                if problem_.retry_after
                else None
            )
            answer = problem(problem_.status, problem_.message, **problem_.extra)
            answer.headers.update(headers or {})
            return answer

    async def _body(self, request: Request) -> bytes:
        """The body, once its declared length and type are acceptable; read with a cap and
        a deadline, so a slow or lying client holds one connection for seconds at most."""
        if "chunked" in request.headers.get("transfer-encoding", "").lower():
            raise _RequestError(411, "chunked bodies are not accepted: send Content-Length")
        raw = request.headers.get("content-length")
        if raw is None:
            raise _RequestError(411, "Content-Length is required")
        try:
            length = int(raw)
        except ValueError:
            raise _RequestError(400, "Content-Length is not a number") from None
        if length < 0:
            raise _RequestError(400, "Content-Length is negative")
        if length > self.max_body:
            raise _RequestError(413, f"body of {length} bytes is over the {self.max_body} limit")
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise _RequestError(415, "Content-Type must be application/json")
        body = bytearray()
        with anyio.move_on_after(BODY_SECONDS) as scope:
            try:
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > length:
                        raise _RequestError(400, "the body is longer than its Content-Length")
            except ClientDisconnect:  # gone, or cut by the server's request deadline
                raise _RequestError(400, "the client went away before its body arrived") from None
        if scope.cancelled_caught:
            raise _RequestError(408, f"the body did not arrive within {BODY_SECONDS:g} s")
        return bytes(body)

    # --- the API ------------------------------------------------------------------------

    def authorize(self, header: str | None) -> None:
        if not header:
            raise _RequestError(401, "missing bearer token (Authorization: Bearer TOKEN)")
        if not bearer_matches(header, self.token):
            raise _RequestError(401, "wrong bearer token")

    def accept(self, body: bytes, *, caller: str = "local") -> dict[str, Any]:
        try:
            data = parse_json(body, max_bytes=self.max_body)
        except JsonInputError as exc:
            raise _RequestError(400, f"the body is not valid JSON: {exc}") from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise _RequestError(400, f"the body has a number out of range: {exc}") from None
        if not isinstance(data, dict):
            raise _RequestError(422, "expected a JSON object {node, state, reason, ttl}")
        if isinstance(data.get("ttl"), int) and not isinstance(data.get("ttl"), bool):
            try:
                data["ttl"] = float(data["ttl"])
            except OverflowError:
                raise _RequestError(400, "ttl: a number out of range") from None
        try:
            post = HealthPost.model_validate(data)
        except ValidationError as exc:
            problems = [
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
            ]
            raise _RequestError(422, "; ".join(problems), problems=problems) from None
        snapshot = self.latest()
        if snapshot is None:
            raise _RequestError(503, "no cluster observed yet: try again in a moment")
        node = _resolve(snapshot, post.node)
        now = self.clock()
        state = HealthState(post.state)
        in_force = self.store.current(node.id, SOURCE, now)
        try:
            self.gate.check_at(node.id, post.at, now)
            self.gate.check_escalation(
                caller, node.id, state, in_force.state if in_force else HealthState.OK, now
            )
        except ReportRefusedError as refused:
            raise _RequestError.of(refused) from None
        report = HealthReport(node.id, state, SOURCE, now + post.ttl, post.reason)
        self.store.put(report)
        self.gate.taken(node.id, post.at)
        self.on_report(report)
        return {
            "node": node.id,
            "hostname": node.hostname,
            "state": report.state.value,
            "expires_at": report.expires_at,
            # A standby keeps the report for when it leads; only the leader acts on it.
            "role": self.role(),
        }

    def listing(self) -> dict[str, Any]:
        snapshot = self.latest()
        names = {n.id: n.hostname for n in snapshot.nodes} if snapshot else {}
        return {
            "reports": [
                {
                    "node": r.node_id,
                    "hostname": names.get(r.node_id, ""),
                    "state": r.state.value,
                    "reason": r.reason,
                    "expires_at": r.expires_at,
                }
                for r in self.store.live(self.clock())
            ]
        }


def _resolve(snapshot: ClusterSnapshot, name: str) -> Node:
    """The node a report names. A node that left and rejoined stays listed, down, next to
    its new self under the same hostname: the one Swarm does not call down is meant. Two
    live nodes of one name cannot be told apart: the report must name the ID."""
    if name in snapshot.node_by_id:
        return snapshot.node_by_id[name]
    named = [n for n in snapshot.nodes if n.hostname == name]
    live = [n for n in named if n.state is not NodeState.DOWN]
    if len(named) == 1:
        return named[0]
    if len(live) == 1:
        return live[0]
    if not named:
        raise _RequestError(
            404, f"unknown node {name!r}: not a hostname or ID of this swarm", "unknown-node"
        )
    ids = ", ".join(sorted(n.id for n in named))
    raise _RequestError(
        409,
        f"hostname {name!r} names {len(named)} nodes ({ids}), "
        f"{'none' if not live else len(live)} of them not down: post the node ID instead",
        "ambiguous-node",
    )


def _taken_words(taken: dict[str, Any]) -> str:
    return f"node {taken['hostname']} ({taken['node']}) {taken['state']}"


class PostLog:
    """One line per post: the caller's address and the outcome. A caller refused for
    posting too fast is said once, then counted, and the count said with its next post
    that is not refused so: a flood cannot flood the log."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self._quiet: dict[str, int] = {}  # caller -> rate-limited posts not said one by one

    def said(self, caller: str, status: int, result: str, words: str) -> None:
        flood = status == 429 and result == "rate-limited" and words.startswith("too many")
        if flood and caller in self._quiet:
            self._quiet[caller] += 1
            return
        more = self._quiet.pop(caller, 0) if not flood else 0
        if flood:
            self._quiet[caller] = 0
            while len(self._quiet) > 4096:
                del self._quiet[next(iter(self._quiet))]
        after = f" (after {more} more posts refused as too many)" if more else ""
        self._say(f"webhook: POST from {caller}: {status} {result}: {words}{after}")
