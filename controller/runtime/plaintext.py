"""Where a secret would cross the network in clear: said loudly at every start.

The metrics token, the webhook's token, the web view's token and session, and the
agents' secret are static bearer credentials: anyone who sees one on the wire can use it
until it is rotated. They are sealed by TLS (`--tls-cert-file`, `--agent-ca-file`) or
by an encrypted overlay network, which the controller cannot see from inside. Loopback
is no network; anything else without TLS is named, with the way to seal it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from controller.runtime.health_inputs import HealthConfig

SEAL = (
    "set --tls-cert-file and --tls-key-file (docs/operations-deploy.md, TLS), or be sure "
    "the overlay network is encrypted"
)


def is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a name, or every address (0.0.0.0): reachable from the network


def plaintext_secrets(
    *,
    http: tuple[str, int] | None,
    tls: bool,
    metrics_token: bool,
    ui: bool,
    health: HealthConfig | None,
) -> list[str]:
    """One sentence per secret that would travel in clear."""
    said: list[str] = []
    if http is not None and not tls and not is_loopback(http[0]):
        where = f"--http {http[0] or '0.0.0.0'}:{http[1]} speaks plain HTTP"
        if metrics_token:
            said.append(f"{where}: the metrics token crosses the network in clear; {SEAL}")
        if ui:
            said.append(
                f"{where}: the web view's token and session cookie cross the network in "
                f"clear; {SEAL}"
            )
    if health is None:
        return said
    hook = health.webhook
    if hook is not None and not tls and not is_loopback(hook[0]):
        said.append(
            f"--health-listen {hook[0] or '0.0.0.0'}:{hook[1]} speaks plain HTTP: the "
            f"webhook's token crosses the network in clear; {SEAL}"
        )
    said.extend(_agents(health))
    return said


def _agents(health: HealthConfig) -> Iterable[str]:
    if health.agent_service is not None and health.agent_ca is None:
        yield (
            f"the agents of {health.agent_service} are reached over plain HTTP: the agents' "
            "secret crosses the network in clear; give the agents a certificate and the "
            "controller --agent-ca-file (docs/operations-deploy.md, TLS)"
        )
    for _, address in health.agents:
        parts = urlsplit(address)
        if parts.scheme != "https" and not is_loopback(parts.hostname or ""):
            yield (
                f"the agent {address} is reached over plain HTTP: the agents' secret "
                "crosses the network in clear; list it as https:// with --agent-ca-file"
            )
