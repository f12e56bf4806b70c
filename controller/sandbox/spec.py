"""What a sandbox swarm should look like, and the errors the sandbox raises."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,19}$")
# One /24 per sandbox; the cap keeps a typo from starting hundreds of engines.
MAX_NODES = 32
FAILURE_MODES = ("crash", "stop", "partition")
NODE_STATES = ("ready", "down", "unknown", "disconnected")


class SandboxError(Exception):
    """The sandbox could not do what was asked; the message says why."""


class SandboxUsageError(SandboxError):
    """Bad input or an unsuitable host: the caller must change something first."""


class HostNotReadyError(SandboxUsageError):
    """The host lacks root or a program the sandbox needs."""


class SandboxExistsError(SandboxUsageError):
    """A sandbox of that name is already up (or left half made)."""


class SandboxNotFoundError(SandboxUsageError):
    """No sandbox of that name is recorded."""


class UnknownNodeError(SandboxUsageError):
    """The sandbox has no node of that name."""


@dataclass(frozen=True)
class NodeSpec:
    """One node of the sandbox: a dockerd in its own network and UTS namespace."""

    hostname: str
    index: int
    manager: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    generic_resources: Mapping[str, int] = field(default_factory=dict)

    @property
    def role(self) -> str:
        return "manager" if self.manager else "worker"


@dataclass(frozen=True)
class SandboxSpec:
    """The shape of a sandbox swarm.

    `node_labels` and `generic_resources` are keyed by hostname (`node-1`...). Managers are
    the first `managers` nodes. `heartbeat_seconds=None` keeps Swarm's default (5 s).
    """

    name: str
    nodes: int = 3
    managers: int = 1
    node_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    generic_resources: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    heartbeat_seconds: float | None = None

    def __post_init__(self) -> None:
        validate_spec(self)

    @property
    def hostnames(self) -> list[str]:
        return [hostname_of(i) for i in range(1, self.nodes + 1)]

    def node_specs(self) -> list[NodeSpec]:
        return [
            NodeSpec(
                hostname=hostname_of(i),
                index=i,
                manager=i <= self.managers,
                labels=dict(self.node_labels.get(hostname_of(i), {})),
                generic_resources=dict(self.generic_resources.get(hostname_of(i), {})),
            )
            for i in range(1, self.nodes + 1)
        ]


def hostname_of(index: int) -> str:
    return f"node-{index}"


def validate_name(name: str) -> None:
    if not NAME_PATTERN.match(name):
        raise SandboxUsageError(
            f"invalid sandbox name {name!r}: use 1 to 20 lowercase letters, digits or '-', "
            "starting with a letter or digit"
        )


def validate_spec(spec: SandboxSpec) -> None:
    validate_name(spec.name)
    if not 1 <= spec.nodes <= MAX_NODES:
        raise SandboxUsageError(f"nodes must be between 1 and {MAX_NODES}, not {spec.nodes}")
    if spec.managers not in (1, 3):
        raise SandboxUsageError(f"managers must be 1 or 3, not {spec.managers}")
    if spec.managers > spec.nodes:
        raise SandboxUsageError(
            f"{spec.managers} managers need at least {spec.managers} nodes, not {spec.nodes}"
        )
    known = set(spec.hostnames)
    for what, table in (
        ("node label", spec.node_labels),
        ("generic resource", spec.generic_resources),
    ):
        for host in table:
            if host not in known:
                raise UnknownNodeError(
                    f"{what} for {host!r}, but sandbox {spec.name!r} has nodes "
                    f"{', '.join(spec.hostnames)}"
                )
    for host, resources in spec.generic_resources.items():
        for kind, value in resources.items():
            if not re.match(r"^[A-Za-z0-9_.-]+$", kind) or int(value) < 1:
                raise SandboxUsageError(
                    f"generic resource {kind}={value} on {host}: need a name and a positive count"
                )
    if spec.heartbeat_seconds is not None and not 0.1 <= spec.heartbeat_seconds <= 60:
        raise SandboxUsageError(
            f"heartbeat must be between 0.1 and 60 seconds, not {spec.heartbeat_seconds}"
        )


def parse_duration(text: str) -> float:
    """Parse `1s`, `500ms`, `2m` or a bare number of seconds."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m)?\s*", text)
    if not match:
        raise SandboxUsageError(f"invalid duration {text!r}: use e.g. 1s, 500ms or 2m")
    value = float(match.group(1))
    unit = match.group(2) or "s"
    return value * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


def parse_node_assignment(text: str) -> tuple[str, str, str]:
    """Parse `node-1:key=value` into its three parts."""
    match = re.fullmatch(r"([a-z0-9-]+):([^=\s]+)=(\S*)", text)
    if not match:
        raise SandboxUsageError(f"invalid {text!r}: expected NODE:KEY=VALUE, e.g. node-1:rack=r1")
    return match.group(1), match.group(2), match.group(3)
