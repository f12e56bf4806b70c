"""Cluster snapshots on disk: what `observe` reads, recorded as the Docker API returned it.

A snapshot file holds the raw attrs of every node, service and task Swarm wants running
(the same three calls the controller makes), plus the swarm's dispatcher heartbeat (for
how fast a simulated node is marked down). Join tokens and other secrets are not read.

Loading is strict: every entry must convert as the controller would convert it, and a
problem names the file, the entry and the field, e.g.
`snap.json: tasks[3] (task x1y2): missing ServiceID`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker

from controller.adapters.attrs import (
    Attrs,
    AttrsError,
    node_from_attrs,
    service_from_attrs,
    snapshot_from_attrs,
    task_from_attrs,
    timestamp_from_attrs,
)
from controller.adapters.bounded_json import nesting_depth
from controller.adapters.engine import _call
from controller.adapters.errors import TerminalError
from controller.core.model import ClusterSnapshot

FORMAT = "swarm-placement/snapshot-v1"
MAX_BYTES = 512 << 20
MAX_DEPTH = 64
NS = 1e9


class SnapshotFileError(TerminalError):
    """The file cannot be used; `errors` has one line per problem."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("\n".join(errors))


@dataclass(frozen=True)
class LoadedSnapshot:
    snapshot: ClusterSnapshot
    taken_at: float  # epoch seconds
    heartbeat_seconds: float | None  # None: not recorded
    # Per service id, from the raw specs (the core model does not carry them).
    restart_delay: Mapping[str, float] = field(default_factory=dict)
    update_monitor: Mapping[str, float] = field(default_factory=dict)
    update_parallelism: Mapping[str, int] = field(default_factory=dict)


def record_cluster(client: docker.DockerClient) -> dict[str, Any]:
    """Read the cluster as the controller observes it, as one JSON-ready document."""
    nodes = _call(client.api.nodes)
    services = _call(client.api.services)
    tasks = _call(lambda: client.api.tasks(filters={"desired-state": ["running", "ready"]}))
    swarm = _call(client.api.inspect_swarm)
    period = ((swarm.get("Spec") or {}).get("Dispatcher") or {}).get("HeartbeatPeriod")
    return {
        "format": FORMAT,
        "taken_at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "swarm": {"heartbeat_seconds": period / NS if period else None},
        "nodes": nodes,
        "services": services,
        "tasks": tasks,
    }


def save_snapshot(path: Path, document: Mapping[str, Any]) -> None:
    text = json.dumps(document, indent=1, sort_keys=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)


def _entries(document: Mapping[str, Any], key: str, where: str, errors: list[str]) -> list[Attrs]:
    value = document.get(key)
    if not isinstance(value, list):
        errors.append(f"{where}: {key}: expected a list of objects, found {_kind(value)}")
        return []
    out = []
    for index, item in enumerate(value):
        if isinstance(item, Mapping):
            out.append(item)
        else:
            errors.append(f"{where}: {key}[{index}]: expected an object, found {_kind(item)}")
    return out


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__


def _check(
    items: list[Attrs], key: str, convert: Callable[[Attrs], object], where: str
) -> list[str]:
    errors = []
    for index, attrs in enumerate(items):
        try:
            convert(attrs)
        except (AttrsError, TypeError, ValueError) as exc:
            label = attrs.get("ID") or "no ID"
            errors.append(f"{where}: {key}[{index}] ({key[:-1]} {label}): {exc}")
    return errors


def load_snapshot(path: Path) -> LoadedSnapshot:
    where = str(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise SnapshotFileError([f"{where}: larger than {MAX_BYTES >> 20} MiB"])
        text = path.read_text(encoding="utf-8")
        # Docker's attrs nest about ten deep; the limit keeps a crafted file a clear error.
        if nesting_depth(text.encode("utf-8", "surrogatepass")) > MAX_DEPTH:
            raise SnapshotFileError([f"{where}: nested deeper than {MAX_DEPTH}: not a snapshot"])
        document = json.loads(text)
    except OSError as exc:
        raise SnapshotFileError([f"{where}: cannot read: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError as exc:
        raise SnapshotFileError([f"{where}: not UTF-8 text: {exc.reason}"]) from None
    except json.JSONDecodeError as exc:
        raise SnapshotFileError(
            [f"{where}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}"]
        ) from None
    if not isinstance(document, Mapping):
        raise SnapshotFileError([f"{where}: expected a JSON object, found {_kind(document)}"])
    if document.get("format") != FORMAT:
        raise SnapshotFileError(
            [
                f"{where}: format is {document.get('format')!r}; expected {FORMAT!r} "
                "(made by `swarm-placement snapshot save`)"
            ]
        )
    errors: list[str] = []
    nodes = _entries(document, "nodes", where, errors)
    services = _entries(document, "services", where, errors)
    tasks = _entries(document, "tasks", where, errors)
    errors += _check(nodes, "nodes", node_from_attrs, where)
    errors += _check(services, "services", service_from_attrs, where)
    errors += _check(tasks, "tasks", task_from_attrs, where)
    try:
        taken_at = timestamp_from_attrs(document.get("taken_at")) or time.time()
    except AttrsError as exc:
        errors.append(f"{where}: taken_at: {exc}")
        taken_at = 0.0
    heartbeat = (document.get("swarm") or {}).get("heartbeat_seconds")
    if heartbeat is not None and (not isinstance(heartbeat, int | float) or heartbeat <= 0):
        errors.append(f"{where}: swarm.heartbeat_seconds: expected a positive number of seconds")
    if errors:
        raise SnapshotFileError(errors)
    return LoadedSnapshot(
        snapshot=snapshot_from_attrs(nodes=nodes, services=services, tasks=tasks),
        taken_at=taken_at,
        heartbeat_seconds=float(heartbeat) if heartbeat else None,
        restart_delay=_per_service(services, ("Spec", "TaskTemplate", "RestartPolicy", "Delay")),
        update_monitor=_per_service(services, ("Spec", "UpdateConfig", "Monitor")),
        update_parallelism={
            k: int(v)
            for k, v in _per_service(services, ("Spec", "UpdateConfig", "Parallelism"), 1).items()
        },
    )


def _per_service(services: list[Attrs], path: tuple[str, ...], scale: float = NS) -> dict[str, Any]:
    """Service id -> the value at `path` (nanoseconds to seconds unless `scale` is 1)."""
    out: dict[str, Any] = {}
    for attrs in services:
        value: Any = attrs
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            out[str(attrs["ID"])] = value / scale
    return out
