"""What the controller says once as it starts: the line of what runs, how and where, the
web view's one-time login link, and the warnings for secrets that would cross in clear."""

from __future__ import annotations

import ipaddress

from controller import __version__
from controller.adapters.engine import ENGINE_ERRORS, EngineClient, engine_version
from controller.adapters.errors import RetryableError
from controller.runtime.listeners import Listeners, login_url
from controller.runtime.plaintext import plaintext_secrets
from controller.runtime.run_config import RunConfig
from controller.runtime.web_view import WebView

# What reading the engine's version may raise at the start: said, never fatal.
STARTUP_ERRORS: tuple[type[Exception], ...] = (RetryableError, *ENGINE_ERRORS)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def login_line(config: RunConfig, view: WebView | None, listeners: Listeners) -> str | None:
    """A one-time login link, said once: when the controller made its token itself,
    or when the view listens on loopback only (`./dev run`), where the log is the
    person's own terminal. Never the token."""
    if view is None or view.access.token is None:
        return None
    main = listeners.main
    local = main is not None and all(_loopback(host) for host, _ in main.addresses)
    if config.ui_token is not None and not local:
        return None
    code = view.access.login_code()
    url = login_url(listeners, code=code, tls=config.tls is not None)
    if url is None:
        return None
    made = "no --ui-token-file given, " if config.ui_token is None else ""
    return f"web view: {made}log in once within 10 minutes at {url}"


def _engine_version(client: EngineClient) -> str:
    try:
        return engine_version(client)
    except STARTUP_ERRORS as exc:
        return f"unknown ({exc})"


def started_fields(
    config: RunConfig, policy_digest: str, client: EngineClient, listeners: Listeners
) -> dict[str, str]:
    """What runs, how and where: the fields of the first log line."""
    lease = config.lease
    scheme = "https" if config.tls is not None else "http"
    listen = listeners.addresses()
    return {
        "version": __version__,
        "policy": str(config.policy_path or "(built-in defaults)"),
        "policy_sha256": policy_digest,
        "engine": _engine_version(client),
        "mode": "dry-run" if config.dry_run else "writes",
        "lease": (
            f"{lease.name} as {lease.holder}, lifetime {lease.lifetime:g} s"
            if lease is not None
            else "none: a single instance"
        ),
        "listen": " ".join(f"{scheme}://{h}:{p}" for h, p in listen) or "none",
    }


def plaintext_warnings(config: RunConfig) -> list[str]:
    """A sentence for each secret or health word the configuration sends in clear."""
    return plaintext_secrets(
        http=config.http,
        tls=config.tls is not None,
        metrics_token=config.metrics_token is not None,
        ui=config.ui,
        health=config.health,
    )
