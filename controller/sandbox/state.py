"""Where a sandbox lives on disk, and the state file that says what it started.

Everything a sandbox makes is named from its name: its directory under the base directory,
its network namespaces (`sps-<name>-sw`, `sps-<name>-node-N`) and its cgroup
(`/swarm-placement-<name>`). Teardown can therefore find all of it even without the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from controller.sandbox.spec import (
    SandboxError,
    SandboxNotFoundError,
    UnknownNodeError,
    validate_name,
)

DEFAULT_BASE_DIR = "/var/lib/swarm-placement-sandbox"
BASE_DIR_ENV = "SWARM_PLACEMENT_SANDBOX_DIR"
STATE_FILE = "state.json"
SUBNET_PREFIX = "172.31"
MAX_SOCKET_PATH = 100


def base_dir() -> Path:
    return Path(os.environ.get(BASE_DIR_ENV) or DEFAULT_BASE_DIR).absolute()


def sandbox_dir(name: str) -> Path:
    return base_dir() / name


def switch_netns_name(name: str) -> str:
    return f"sps-{name}-sw"


def node_netns_name(name: str, hostname: str) -> str:
    return f"sps-{name}-{hostname}"


def netns_pattern(name: str) -> re.Pattern[str]:
    """Matches exactly the namespaces of sandbox `name` (`-sw` and `-node-N`)."""
    return re.compile(rf"sps-{re.escape(name)}-(sw|node-[0-9]+)")


def cgroup_root(name: str) -> str:
    return f"/swarm-placement-{name}"


@dataclass
class NodeState:
    hostname: str
    index: int
    manager: bool
    ip: str
    netns: str
    switch_port: str
    dir: str
    labels: dict[str, str] = field(default_factory=dict)
    generic_resources: dict[str, int] = field(default_factory=dict)
    dockerd_pid: int | None = None
    dockerd_start: int | None = None
    containerd_pid: int | None = None
    containerd_start: int | None = None
    node_id: str | None = None
    failure: str | None = None

    @property
    def path(self) -> Path:
        return Path(self.dir)

    @property
    def docker_socket(self) -> Path:
        return self.path / "docker.sock"

    @property
    def containerd_socket(self) -> Path:
        return self.path / "containerd.sock"

    @property
    def docker_host(self) -> str:
        return f"unix://{self.docker_socket}"

    @property
    def cgroup_parent(self) -> str:
        return f"{cgroup_root(Path(self.dir).parent.name)}/{self.hostname}"


@dataclass
class SandboxState:
    name: str
    dir: str
    subnet_index: int
    switch_netns: str
    cgroup_root: str
    storage_driver: str = ""
    heartbeat_seconds: float | None = None
    image_id: str = ""
    phase: str = "creating"
    created_at: float = field(default_factory=time.time)
    dockerd_major: int = 0
    tools: dict[str, str] = field(default_factory=dict)
    nodes: list[NodeState] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return Path(self.dir)

    @property
    def subnet(self) -> str:
        return f"{SUBNET_PREFIX}.{self.subnet_index}.0/24"

    def node(self, hostname: str) -> NodeState:
        for node in self.nodes:
            if node.hostname == hostname:
                return node
        raise UnknownNodeError(
            f"sandbox {self.name!r} has no node {hostname!r}; its nodes are "
            f"{', '.join(n.hostname for n in self.nodes)}"
        )

    def save(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        target = self.path / STATE_FILE
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, target)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SandboxState:
        nodes = [NodeState(**node) for node in data.pop("nodes", [])]
        return cls(**data, nodes=nodes)


def load_state(name: str) -> SandboxState:
    validate_name(name)
    path = sandbox_dir(name) / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SandboxNotFoundError(
            f"no sandbox named {name!r} (nothing recorded in {path.parent})"
        ) from None
    except (OSError, ValueError) as exc:
        raise SandboxError(f"cannot read {path}: {exc}") from exc
    try:
        return SandboxState.from_dict(data)
    except TypeError as exc:
        raise SandboxError(f"{path} is not a sandbox state file: {exc}") from exc


def sandbox_names() -> list[str]:
    root = base_dir()
    if not root.is_dir():
        return []
    return sorted(p.parent.name for p in root.glob(f"*/{STATE_FILE}"))


@contextlib.contextmanager
def base_lock() -> Iterator[None]:
    """Serialise creating and removing sandboxes between processes."""
    root = base_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def allocate_subnet_index(name: str) -> int:
    """A /24 index not used by another recorded sandbox; call under base_lock."""
    used = set()
    for other in sandbox_names():
        if other == name:
            continue
        with contextlib.suppress(SandboxError):
            used.add(load_state(other).subnet_index)
    start = zlib.crc32(name.encode()) % 250
    for step in range(250):
        index = (start + step) % 250 + 1
        if index not in used:
            return index
    raise SandboxError("no free sandbox subnet: 250 sandboxes are recorded")


def check_socket_paths(name: str, hostnames: list[str]) -> None:
    longest = max(hostnames, key=len)
    probe = sandbox_dir(name) / longest / "containerd.sock.ttrpc"
    if len(str(probe)) > MAX_SOCKET_PATH:
        raise SandboxError(
            f"socket path {probe} is too long for a unix socket: "
            f"set {BASE_DIR_ENV} to a shorter directory"
        )
