"""Placement plugins, the way Docker finds and talks to its own plugins.

Discovery (docs/plugin-protocol.md): in each plugin directory, `NAME.sock` or
`NAME/NAME.sock` (a unix socket), `NAME.spec` (one line: `unix:///path` or
`tcp://host:port`) or `NAME.json` (`{"Name": ..., "Addr": ...}`). A plugin is used once
`POST /Plugin.Activate` answers `{"Implements": [..., "PlacementDriver", ...]}`.

Calls: `POST /PlacementDriver.Filter`, `.Score` and `.Health`, each with the nodes and
(for the first two) the managed services. Answers are validated strictly: an answer that
does not parse is the plugin failing, like a timeout or an `{"Err": "..."}`.
"""

from __future__ import annotations

import math
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from controller.adapters.bounded_json import parse_json
from controller.adapters.errors import RetryableError
from controller.adapters.json_client import Endpoint, HttpJsonError, call_json
from controller.core.model import ClusterSnapshot, Node, Service
from controller.core.outside_inputs import HealthReport, HealthState, PluginVeto

DEFAULT_PLUGIN_DIRS = ("/run/docker/plugins", "/etc/docker/plugins", "/usr/lib/docker/plugins")
INTERFACE = "PlacementDriver"
CONTENT_TYPE = "application/vnd.docker.plugins.v1.2+json"
MAX_TTL_SECONDS = 86_400.0
DEFAULT_TTL_SECONDS = 30.0
MAX_SPEC_BYTES = 64 * 1024  # a plugin's .json file: its name and address
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


class PluginError(RetryableError, RuntimeError):
    """The plugin could not be reached or answered something unusable."""


@dataclass(frozen=True, slots=True)
class PluginRef:
    name: str
    endpoint: Endpoint
    found_at: str  # the file it was discovered from


class _Answer(BaseModel):
    # Plugins may add fields of their own; the ones we read must have the right type.
    model_config = ConfigDict(extra="ignore", strict=True)


class ActivateAnswer(_Answer):
    Implements: list[str]


class VetoItem(_Answer):
    Service: str = Field(min_length=1, max_length=200)
    Node: str = Field(min_length=1, max_length=200)
    Reason: str = Field("", max_length=1000)


class FilterAnswer(_Answer):
    Vetoes: list[VetoItem] = Field(default_factory=list, max_length=100_000)


class ScoreItem(_Answer):
    Service: str = Field(min_length=1, max_length=200)
    Node: str = Field(min_length=1, max_length=200)
    Score: float

    @field_validator("Score", mode="before")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("Score must be a finite number")
        return value


class ScoreAnswer(_Answer):
    Scores: list[ScoreItem] = Field(default_factory=list, max_length=100_000)


class HealthItem(_Answer):
    Node: str = Field(min_length=1, max_length=200)
    State: Literal["ok", "degraded", "failed"]
    Reason: str = Field("", max_length=1000)
    TTL: float = Field(DEFAULT_TTL_SECONDS, gt=0, le=MAX_TTL_SECONDS)

    @field_validator("TTL", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class HealthAnswer(_Answer):
    Nodes: list[HealthItem] = Field(default_factory=list, max_length=100_000)


# --- discovery ----------------------------------------------------------------------------


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except OSError:
        return False


def _from_spec(path: Path) -> Endpoint:
    text = path.read_text(errors="replace").strip()
    if not text or "\n" in text:
        raise PluginError(f"{path}: expected one line with unix:// or tcp:// address")
    return Endpoint(text)


def _from_json(path: Path) -> Endpoint:
    with path.open("rb") as file:
        data = parse_json(file.read(MAX_SPEC_BYTES + 1), max_bytes=MAX_SPEC_BYTES)
    if not isinstance(data, dict) or not isinstance(data.get("Addr"), str):
        raise PluginError(f"{path}: expected a JSON object with Addr")
    if data.get("TLSConfig"):
        raise PluginError(f"{path}: TLS plugins are not supported")
    return Endpoint(data["Addr"])


def discover_plugins(dirs: Iterable[str | Path]) -> tuple[list[PluginRef], list[str]]:
    """Plugins found in the directories (the first of a name wins), and problems."""
    found: dict[str, PluginRef] = {}
    problems: list[str] = []
    for directory in map(Path, dirs):
        if not directory.is_dir():
            continue
        for entry in sorted(directory.iterdir()):
            name, suffix = entry.stem, entry.suffix
            if name in found:
                continue
            if not _NAME.fullmatch(name):
                continue  # not a name a plugin can have (it becomes part of a label key)
            try:
                if suffix == ".sock" and _is_socket(entry):
                    endpoint = Endpoint(f"unix://{entry}")
                elif entry.is_dir() and _is_socket(entry / f"{entry.name}.sock"):
                    name, endpoint = entry.name, Endpoint(f"unix://{entry / entry.name}.sock")
                elif suffix == ".spec":
                    endpoint = _from_spec(entry)
                elif suffix == ".json":
                    endpoint = _from_json(entry)
                else:
                    continue
            except (OSError, ValueError, PluginError) as exc:
                problems.append(f"plugin {name}: {exc}")
                continue
            found[name] = PluginRef(name, endpoint, str(entry))
    return list(found.values()), problems


# --- calls --------------------------------------------------------------------------------


def node_payload(node: Node) -> dict[str, Any]:
    return {
        "ID": node.id,
        "Hostname": node.hostname,
        "Role": node.role.value,
        "Availability": node.availability.value,
        "State": node.state.value,
        "Addr": node.addr,
        "Labels": dict(node.labels),
    }


def service_payload(service: Service) -> dict[str, Any]:
    return {
        "ID": service.id,
        "Name": service.name,
        "Labels": dict(service.labels),
        "Constraints": list(service.constraints),
        "Replicas": service.replicas,
    }


def _call(ref: PluginRef, method: str, body: Any, timeout: float) -> dict[str, Any]:
    try:
        return call_json(
            ref.endpoint, "POST", f"/{method}", body, timeout=timeout, content_type=CONTENT_TYPE
        )
    except HttpJsonError as exc:
        raise PluginError(f"{method}: {exc}") from exc


def _parse(model: type[_Answer], method: str, answer: Mapping[str, Any]) -> Any:
    try:
        return model.model_validate(dict(answer))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the answer"
        raise PluginError(f"{method} answered garbage: {where}: {first['msg']}") from None


def activate(ref: PluginRef, *, timeout: float) -> bool:
    """True if the plugin implements PlacementDriver."""
    answer = _parse(ActivateAnswer, "Plugin.Activate", _call(ref, "Plugin.Activate", {}, timeout))
    return INTERFACE in answer.Implements


class _Names:
    """Answers may name services and nodes by ID or by name/hostname."""

    def __init__(self, snapshot: ClusterSnapshot, services: Iterable[Service]) -> None:
        self.services = {s.id: s.id for s in services} | {s.name: s.id for s in services}
        self.nodes = {n.id: n.id for n in snapshot.nodes} | {
            n.hostname: n.id for n in snapshot.nodes
        }


def filter_nodes(
    ref: PluginRef, snapshot: ClusterSnapshot, services: tuple[Service, ...], *, timeout: float
) -> tuple[PluginVeto, ...]:
    body = {
        "Services": [service_payload(s) for s in services],
        "Nodes": [node_payload(n) for n in snapshot.nodes],
    }
    method = f"{INTERFACE}.Filter"
    answer = _parse(FilterAnswer, method, _call(ref, method, body, timeout))
    names = _Names(snapshot, services)
    return tuple(
        PluginVeto(ref.name, names.services[v.Service], names.nodes[v.Node], v.Reason)
        for v in answer.Vetoes
        if v.Service in names.services and v.Node in names.nodes
    )


def score_nodes(
    ref: PluginRef, snapshot: ClusterSnapshot, services: tuple[Service, ...], *, timeout: float
) -> dict[str, dict[str, float]]:
    body = {
        "Services": [service_payload(s) for s in services],
        "Nodes": [node_payload(n) for n in snapshot.nodes],
    }
    method = f"{INTERFACE}.Score"
    answer = _parse(ScoreAnswer, method, _call(ref, method, body, timeout))
    names = _Names(snapshot, services)
    out: dict[str, dict[str, float]] = {}
    for item in answer.Scores:
        if item.Service in names.services and item.Node in names.nodes:
            out.setdefault(names.services[item.Service], {})[names.nodes[item.Node]] = item.Score
    return out


def node_health(
    ref: PluginRef, snapshot: ClusterSnapshot, *, now: float, timeout: float
) -> tuple[HealthReport, ...]:
    method = f"{INTERFACE}.Health"
    body = {"Nodes": [node_payload(n) for n in snapshot.nodes]}
    answer = _parse(HealthAnswer, method, _call(ref, method, body, timeout))
    names = _Names(snapshot, ())
    return tuple(
        HealthReport(
            names.nodes[item.Node],
            HealthState(item.State),
            f"plugin.{ref.name}",
            now + item.TTL,
            item.Reason,
        )
        for item in answer.Nodes
        if item.Node in names.nodes
    )
