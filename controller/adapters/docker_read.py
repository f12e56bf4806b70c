"""Read-only look-ups for the command line: one service's ID, name and labels.

Only the low-level API is used (`client.api`), and only to read: the high-level objects
rebuild specs on write and are never used by this project.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import docker.errors

from controller.adapters.errors import TerminalError


class ServiceNotFoundError(TerminalError, LookupError):
    """No service has that name or ID."""


class ServiceLabels(NamedTuple):
    id: str
    name: str
    labels: dict[str, str]


def inspect_service_labels(client: Any, name: str) -> ServiceLabels:
    """The service's ID, name and service-level labels (`Spec.Labels`) by name or ID."""
    try:
        attrs: dict[str, Any] = client.api.inspect_service(name)
    except docker.errors.NotFound:
        raise ServiceNotFoundError(f"no service named {name!r}") from None
    spec = attrs.get("Spec") or {}
    labels = spec.get("Labels") or {}
    return ServiceLabels(
        id=str(attrs.get("ID", "")),
        name=str(spec.get("Name", name)),
        labels={str(key): str(value) for key, value in labels.items()},
    )
