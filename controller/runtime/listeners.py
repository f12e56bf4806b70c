"""Which routes each of the controller's listeners serves.

- `--http`: the probes, /metrics, the webhook (when there is one) and the web view.
- `--health-listen`, when it is another address: the probes, /metrics and the webhook,
  never the web view. Stacks publish or share the webhook's port with monitors; the view
  shows every node and service and stays on the address the operator chose for it.
- `--probe-socket`: /healthz and /readyz on a unix socket for the container
  healthcheck, a server of its own that no network client reaches or crowds out.

The two network listeners share one count of connections (http_guard.py): the caps are
the process's, whichever port a client fills.

Every listener is bound at construction, so a taken port or a bad certificate fails the
start at once.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from starlette.routing import BaseRoute

from controller.runtime.http_app import make_app
from controller.runtime.http_guard import PER_PEER, Admission
from controller.runtime.http_server import MAX_CONNECTIONS, HttpServer, TlsFiles
from controller.runtime.web_view import WebView

ANY_HOST = ("", "0.0.0.0", "::")


@dataclass(frozen=True)
class Listeners:
    main: HttpServer | None  # --http, else the webhook's own address
    webhook: HttpServer | None  # the webhook's address, when it is not --http's
    probe: HttpServer | None  # the unix socket

    def all(self) -> tuple[HttpServer, ...]:
        return tuple(s for s in (self.main, self.webhook, self.probe) if s is not None)

    def addresses(self) -> tuple[tuple[str, int], ...]:
        return tuple(a for s in (self.main, self.webhook) if s is not None for a in s.addresses)


def make_listeners(
    *,
    http: tuple[str, int] | None,
    webhook_address: tuple[str, int] | None,
    probe_socket: Path | None,
    probes: Sequence[BaseRoute],
    webhook: Sequence[BaseRoute],
    view: WebView | None,
    tls: TlsFiles | None,
) -> Listeners:
    shared = [*probes, *webhook]
    admission = Admission(per_peer=PER_PEER, max_connections=MAX_CONNECTIONS)
    main = extra = probe = None
    try:
        if http is not None:
            routes = [*shared, *(view.routes() if view is not None else ())]
            home = "/ui" if view is not None else None
            on_stop = view.close if view is not None else lambda: None
            main = HttpServer(
                [http], make_app(routes, home=home), tls=tls, on_stop=on_stop, admission=admission
            )
        # The same address twice is one listener (port 0 is a new port each time).
        if webhook_address is not None and (
            http is None or webhook_address != http or webhook_address[1] == 0
        ):
            extra = HttpServer([webhook_address], make_app(shared), tls=tls, admission=admission)
            if main is None:
                main, extra = extra, None
        if probe_socket is not None:
            probe = HttpServer([], make_app(list(probes)), unix=probe_socket)
    except BaseException:
        for server in (main, extra):
            if server is not None:
                server.close()
        raise
    return Listeners(main, extra, probe)


def login_url(listeners: Listeners, *, code: str, tls: bool) -> str | None:
    """Where a person logs in to the web view once, with a one-time code (never the
    token: a URL ends up in logs and browser histories)."""
    if listeners.main is None or not listeners.main.addresses:
        return None
    host, port = listeners.main.addresses[0]
    host = socket.gethostname() if host in ANY_HOST else host
    host = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{host}:{port}/ui/login?code={code}"
