"""Docker API attrs -> model values. Pure converters; unknown shapes raise AttrsError.

Swarm's JSON has optional fields everywhere (and 20.10 and 26.1 differ in a few), so
every lookup here has a default; a missing *required* field is an AttrsError that the
observer turns into an `Unreadable` value rather than a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar

from controller.core.labels import operator_texts
from controller.core.model import (
    Availability,
    ClusterSnapshot,
    Node,
    NodeRole,
    NodeState,
    Resources,
    Service,
    ServiceMode,
    Task,
    TaskState,
    Unreadable,
)

Attrs = Mapping[str, Any]


class AttrsError(ValueError):
    """An object whose attrs do not have the shape the controller needs."""


def _get(attrs: Attrs, *path: str, default: Any = None) -> Any:
    value: Any = attrs
    for key in path:
        # Decoded JSON is dicts: test for dict first, as the Mapping check is slow.
        if not isinstance(value, dict) and not isinstance(value, Mapping):
            return default
        value = value.get(key)
        if value is None:
            return default
    return value


def _required(attrs: Attrs, *path: str) -> Any:
    value = _get(attrs, *path)
    if value is None:
        raise AttrsError(f"missing {'.'.join(path)}")
    return value


def _str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise AttrsError(f"{where} is not a map of strings")
    return dict(value)


_E = TypeVar("_E", NodeRole, Availability, NodeState, TaskState)
_R = TypeVar("_R")


def _enum(enum: type[_E], raw: Any, fallback: _E) -> _E:
    try:
        return enum(str(raw).lower())
    except ValueError:
        return fallback


def generic_resources_from_attrs(items: Any) -> dict[str, int]:
    """Discrete resources add up; named ones count one per name."""
    totals: dict[str, int] = {}
    for item in items or ():
        if not isinstance(item, Mapping):
            raise AttrsError("GenericResources entry is not an object")
        if discrete := item.get("DiscreteResourceSpec"):
            kind, amount = discrete.get("Kind"), int(discrete.get("Value", 0))
        elif named := item.get("NamedResourceSpec"):
            kind, amount = named.get("Kind"), 1
        else:
            continue
        if not isinstance(kind, str):
            raise AttrsError("GenericResources entry has no Kind")
        totals[kind] = totals.get(kind, 0) + amount
    return totals


def resources_from_attrs(attrs: Attrs | None) -> Resources:
    attrs = attrs or {}
    return Resources(
        nano_cpus=int(attrs.get("NanoCPUs") or 0),
        memory_bytes=int(attrs.get("MemoryBytes") or 0),
        generic=generic_resources_from_attrs(attrs.get("GenericResources")),
    )


def node_from_attrs(attrs: Attrs) -> Node:
    return Node(
        id=_required(attrs, "ID"),
        version=int(_required(attrs, "Version", "Index")),
        hostname=_get(attrs, "Description", "Hostname", default=""),
        role=_enum(NodeRole, _get(attrs, "Spec", "Role"), NodeRole.WORKER),
        availability=_enum(Availability, _get(attrs, "Spec", "Availability"), Availability.ACTIVE),
        state=_enum(NodeState, _get(attrs, "Status", "State"), NodeState.UNKNOWN),
        labels=_str_map(_get(attrs, "Spec", "Labels"), "Spec.Labels"),
        engine_labels=_str_map(
            _get(attrs, "Description", "Engine", "Labels"), "Description.Engine.Labels"
        ),
        addr=_get(attrs, "Status", "Addr", default=""),
        leader=bool(_get(attrs, "ManagerStatus", "Leader", default=False)),
        manager_reachable=_get(attrs, "ManagerStatus", "Reachability") == "reachable",
        capacity=resources_from_attrs(_get(attrs, "Description", "Resources")),
        platform_os=_get(attrs, "Description", "Platform", "OS", default=""),
        platform_arch=_get(attrs, "Description", "Platform", "Architecture", default=""),
        updated_at=timestamp_from_attrs(attrs.get("UpdatedAt")),
    )


def _mode_from_spec(spec: Attrs) -> tuple[ServiceMode, int | None]:
    mode = spec.get("Mode") or {}
    if "Replicated" in mode:
        return ServiceMode.REPLICATED, int((mode["Replicated"] or {}).get("Replicas", 1))
    if "Global" in mode:
        return ServiceMode.GLOBAL, None
    return ServiceMode.OTHER, None


def service_from_attrs(attrs: Attrs) -> Service:
    spec = _required(attrs, "Spec")
    template = spec.get("TaskTemplate") or {}
    mode, replicas = _mode_from_spec(spec)
    constraints = _get(template, "Placement", "Constraints", default=[])
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise AttrsError("TaskTemplate.Placement.Constraints is not a list of strings")
    labels = _str_map(spec.get("Labels"), "Spec.Labels")
    return Service(
        id=_required(attrs, "ID"),
        version=int(_required(attrs, "Version", "Index")),
        name=_required(spec, "Name"),
        labels=labels,
        mode=mode,
        replicas=replicas,
        constraints=tuple(constraints),
        reservations=resources_from_attrs(_get(template, "Resources", "Reservations")),
        update_order=_get(spec, "UpdateConfig", "Order", default="stop-first"),
        restart_condition=_get(template, "RestartPolicy", "Condition", default="any"),
        max_replicas_per_node=int(_get(template, "Placement", "MaxReplicas", default=0)),
        platforms=_platforms(_get(template, "Placement", "Platforms", default=[])),
        host_ports=_host_ports(_get(spec, "EndpointSpec", "Ports", default=[])),
        update_state=_get(attrs, "UpdateStatus", "State"),
        update_failure_action=_get(spec, "UpdateConfig", "FailureAction", default="pause"),
        stack=labels.get("com.docker.stack.namespace"),
        rollout_is_own=_rollout_is_own(attrs, spec),
        update_batch=_update_batch(spec.get("UpdateConfig")),
        local_data=_local_data(_get(template, "ContainerSpec", "Mounts", default=[])),
    )


def _update_batch(config: Any) -> int:
    """Service.update_batch from UpdateConfig. Without one SwarmKit applies its defaults
    (parallelism 1, failure action pause, max failure ratio 0)."""
    if config is None:
        return 1
    if not isinstance(config, Mapping):
        raise AttrsError("UpdateConfig is not an object")
    if config.get("FailureAction", "pause") == "continue" or config.get("MaxFailureRatio"):
        return 0
    return int(config.get("Parallelism") or 0)


def _rollout_is_own(attrs: Attrs, spec: Attrs) -> bool:
    """Whether the task template Swarm rolls out differs from the one before it only in
    the controller's constraints: then the rollout is one the controller's write started.
    A rollout changes only the template; labels and replica counts start none."""
    previous = attrs.get("PreviousSpec")
    if not attrs.get("UpdateStatus") or not isinstance(previous, Mapping):
        return False
    name = str(spec.get("Name", ""))
    now, before = _template_but_ours(spec, name), _template_but_ours(previous, name)
    return now is not None and now == before


def _template_but_ours(spec: Attrs, name: str) -> tuple[dict[str, Any], tuple[str, ...]] | None:
    """A spec's task template without its constraints, and its operator's constraints
    (each spec's own labels say which of its constraints are the controller's); None
    if it cannot be read."""
    template = dict(spec.get("TaskTemplate") or {})
    placement = dict(template.pop("Placement", None) or {})
    constraints = placement.pop("Constraints", None) or []
    if placement:
        template["Placement"] = placement
    labels = spec.get("Labels") or {}
    if not isinstance(constraints, list) or not isinstance(labels, Mapping):
        return None
    return template, operator_texts(name, labels, tuple(map(str, constraints)))


def _local_data(mounts: Any) -> tuple[str, ...]:
    """The mounts whose data lives on the task's node: a bind mount, or a named volume of
    the local driver (no driver named is the local one) that mounts no network share. An
    anonymous volume is new for every task wherever it runs, and tmpfs, npipe and cluster
    volumes are no node's."""
    if not isinstance(mounts, list) or not all(isinstance(m, Mapping) for m in mounts):
        raise AttrsError("TaskTemplate.ContainerSpec.Mounts is not a list of objects")
    found = []
    for mount in mounts:
        kind, source = mount.get("Type") or "volume", mount.get("Source") or ""
        if kind == "bind" and source:
            found.append(f"bind {source}")
        elif kind == "volume" and source:
            driver = _get(mount, "VolumeOptions", "DriverConfig", "Name", default=None)
            fs = _get(mount, "VolumeOptions", "DriverConfig", "Options", "type", default="")
            if driver in (None, "", "local") and str(fs).lower() not in _NOT_ON_THE_NODE:
                found.append(f"volume {source}")
    return tuple(found)


# The local driver's `type` options that mount a network share (the same data from any
# node) or memory (no data to keep).
_NOT_ON_THE_NODE = frozenset({"nfs", "nfs4", "cifs", "smb3", "tmpfs"})


def _platforms(items: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(items, list) or not all(isinstance(p, Mapping) for p in items):
        raise AttrsError("TaskTemplate.Placement.Platforms is not a list of objects")
    return tuple((str(p.get("OS") or ""), str(p.get("Architecture") or "")) for p in items)


def _host_ports(items: Any) -> tuple[str, ...]:
    """Published ports in host mode, as `port/protocol` (ingress ports take no node's)."""
    if not isinstance(items, list) or not all(isinstance(p, Mapping) for p in items):
        raise AttrsError("EndpointSpec.Ports is not a list of objects")
    return tuple(
        sorted(
            f"{int(p['PublishedPort'])}/{p.get('Protocol') or 'tcp'}"
            for p in items
            if p.get("PublishMode") == "host" and p.get("PublishedPort")
        )
    )


def timestamp_from_attrs(raw: Any) -> float:
    """Docker's RFC 3339 with nanoseconds -> epoch seconds (microsecond precision)."""
    if not isinstance(raw, str) or not raw:
        return 0.0
    text = raw.replace("Z", "+00:00")
    if "." in text:
        head, rest = text.split(".", 1)
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits) :]
        text = f"{head}.{digits[:6]}{zone}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError as exc:
        raise AttrsError(f"bad timestamp {raw!r}") from exc


def task_from_attrs(attrs: Attrs) -> Task:
    return Task(
        id=_required(attrs, "ID"),
        service_id=_required(attrs, "ServiceID"),
        node_id=attrs.get("NodeID") or "",
        slot=int(attrs.get("Slot") or 0),
        desired_state=_enum(TaskState, attrs.get("DesiredState"), TaskState.OTHER),
        state=_enum(TaskState, _get(attrs, "Status", "State"), TaskState.OTHER),
        error=_get(attrs, "Status", "Err", default=""),
        updated_at=timestamp_from_attrs(_get(attrs, "Status", "Timestamp")),
    )


class ByVersion(Generic[_R]):
    """A converter that remembers the last cycle's model values: Swarm gives an object a new
    `Version.Index` on every change it stores, so an ID at the same version converts to
    the same value, and most of a settled swarm's tasks and services are unchanged
    between two cycles. Not for nodes: a manager fills in their `ManagerStatus` (leader,
    reachability) as it answers, without a new version."""

    def __init__(self, convert: Callable[[Attrs], _R]) -> None:
        self._convert = convert
        self._last: dict[tuple[str, int], _R] = {}
        self._seen: dict[tuple[str, int], _R] = {}

    def __call__(self, attrs: Attrs) -> _R:
        # Called for every task of every cycle: plain lookups, no `_get`.
        version = attrs.get("Version")
        index = version.get("Index") if isinstance(version, dict) else None
        object_id = attrs.get("ID")
        if not isinstance(index, int) or not isinstance(object_id, str):
            return self._convert(attrs)
        key = (object_id, index)
        value = self._last.get(key)
        if value is None:
            value = self._convert(attrs)
        self._seen[key] = value
        return value

    def next_cycle(self) -> None:
        """Keep only what this cycle saw, so the memory follows the swarm's size."""
        self._last, self._seen = self._seen, {}


def _name_of(attrs: Attrs) -> str:
    name = _get(attrs, "Spec", "Name") or _get(attrs, "Description", "Hostname")
    return str(name or attrs.get("ID") or "?")


def _convert_all(
    kind: str,
    items: list[Attrs],
    convert: Callable[[Attrs], _R],
    unreadable: list[Unreadable],
) -> list[_R]:
    """Convert each item; one that does not convert is recorded, never guessed at."""
    values: list[_R] = []
    for attrs in items:
        try:
            values.append(convert(attrs))
        except (AttrsError, TypeError, ValueError) as exc:
            unreadable.append(Unreadable(kind, str(attrs.get("ID", "")), _name_of(attrs), str(exc)))
    return values


def snapshot_from_attrs(
    *,
    nodes: list[Attrs],
    services: list[Attrs],
    tasks: list[Attrs],
    convert_task: Callable[[Attrs], Task] = task_from_attrs,
    convert_service: Callable[[Attrs], Service] = service_from_attrs,
) -> ClusterSnapshot:
    """Convert everything that converts; record the rest as unreadable, never guess."""
    unreadable: list[Unreadable] = []
    node_values = _convert_all("node", nodes, node_from_attrs, unreadable)
    service_values = _convert_all("service", services, convert_service, unreadable)
    # A task that does not convert is simply re-read on the next poll.
    task_values = _convert_all("task", tasks, convert_task, [])
    # Desired READY: a replacement the restart supervisor holds back for the restart delay.
    return ClusterSnapshot(
        nodes=tuple(sorted(node_values, key=lambda n: n.hostname)),
        services=tuple(sorted(service_values, key=lambda s: s.name)),
        tasks=tuple(t for t in task_values if t.desired_state is not TaskState.READY),
        unreadable=tuple(unreadable),
        delayed=tuple(t for t in task_values if t.desired_state is TaskState.READY),
    )
