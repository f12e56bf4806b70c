"""The one ASGI app of the controller's HTTP server: probes, metrics, webhook, web view.

Every answer that is no page is JSON, errors included (`{"error": ...}`), so a monitor
or a script never has to parse an HTML error page.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from controller.runtime.http_replies import problem


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return problem(404, f"no such path {request.url.path}")
    if exc.status_code == 405:
        return problem(405, f"{request.method} is not allowed on {request.url.path}")
    return problem(exc.status_code, exc.detail)


def make_app(routes: Sequence[BaseRoute], *, home: str | None = None) -> Starlette:
    """One app of all the routes; `/` leads to `home` (the web view) when there is one."""
    every = list(routes)
    if home is not None:
        target = home

        async def to_home(request: Request) -> Response:
            return RedirectResponse(target, status_code=303)

        every.append(Route("/", to_home, methods=["GET", "HEAD"]))
    return Starlette(
        routes=every,
        exception_handlers={404: _http_error, 405: _http_error},
    )
