"""Taking a sandbox apart so that nothing of it is left, and checking that nothing is.

Teardown works from the sandbox's name alone (the state file only adds PIDs), so it also
cleans up after an `up` that died half way. It is idempotent.
"""

from __future__ import annotations

import contextlib
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from controller.sandbox import daemon, mounts, netns, processes, typed_docker
from controller.sandbox.host import which
from controller.sandbox.spec import SandboxError, validate_name
from controller.sandbox.state import (
    NodeState,
    SandboxState,
    base_dir,
    cgroup_root,
    load_state,
    netns_pattern,
    sandbox_dir,
    sandbox_names,
)

LEAVE_TIMEOUT_SECONDS = 3
DAEMON_GRACE_SECONDS = 3.0


@dataclass
class Leftovers:
    """What of a sandbox still exists on the host."""

    processes: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return any(
            (self.processes, self.mounts, self.namespaces, self.links, self.cgroups, self.files)
        )

    def describe(self) -> str:
        parts = []
        for what in ("processes", "mounts", "namespaces", "links", "cgroups", "files"):
            items = getattr(self, what)
            if items:
                parts.append(f"{what}: {', '.join(items)}")
        return "; ".join(parts) or "nothing"


def _leave_swarm(nodes: list[NodeState]) -> None:
    """Best effort `swarm leave --force` on every live node, all at once."""

    def leave(node: NodeState) -> None:
        if not daemon.dockerd_running(node) or not daemon.ping(node.docker_socket):
            return
        with contextlib.suppress(SandboxError, OSError):
            api = typed_docker.api_client(node.docker_host, timeout=LEAVE_TIMEOUT_SECONDS)
            try:
                typed_docker.swarm_leave(api)
            finally:
                api.close()

    if nodes:
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            list(pool.map(leave, nodes))


def _sandbox_pids(name: str, directory: Path, namespaces: list[str]) -> list[int]:
    pids = set(processes.pids_naming_path(directory))
    pids.update(processes.pids_in_cgroup(cgroup_root(name)))
    inodes = [i for i in (processes.netns_inode(netns.netns_path(n)) for n in namespaces) if i]
    pids.update(processes.pids_in_netns(inodes))
    return sorted(pids)


def teardown_sandbox(name: str, *, leave_swarm: bool = True) -> Leftovers:
    """Remove sandbox `name` entirely; returns what could not be removed (normally nothing)."""
    validate_name(name)
    directory = sandbox_dir(name)
    state: SandboxState | None = None
    with contextlib.suppress(SandboxError):
        state = load_state(name)
    nodes = state.nodes if state else []
    ip_tool = (state.tools.get("ip") if state else None) or which("ip") or "ip"

    # The containers go first: nothing of theirs needs a graceful stop, and dockerd would
    # otherwise wait out each one's stop grace period.
    for node in nodes:
        daemon.kill_containers(node)
    # Leaving a swarm some of whose nodes are cut off only waits out timeouts.
    if leave_swarm and state and state.phase == "up" and not any(n.failure for n in nodes):
        _leave_swarm(nodes)

    # Then the daemons, so that they unmount what they mounted. A manager that cannot
    # reach every node may take many seconds over a clean shutdown: nothing of it is
    # kept, so it gets a short grace before SIGKILL.
    def stop(node: NodeState) -> None:
        # Whatever fails here, the sweep below still finds the processes.
        with contextlib.suppress(Exception):
            daemon.stop_dockerd(node, grace=DAEMON_GRACE_SECONDS)
        with contextlib.suppress(Exception):
            daemon.stop_containerd(node)

    if nodes:
        with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as pool:
            list(pool.map(stop, nodes))

    # Whatever is left (shims, containers, a daemon without a state file): by path, netns, cgroup.
    namespaces = netns.names_matching(netns_pattern(name))
    for _ in range(3):
        pids = _sandbox_pids(name, directory, namespaces)
        if not pids:
            break
        processes.terminate(pids, grace=2.0)

    if directory.is_dir():
        data_roots = sorted(directory.glob("node-*/data"))
        for data_root in data_roots:
            mounts.remove_shim_sockets(data_root.parent / "containerd.sock", data_root)
    mounts.unmount_under(directory)
    for ns_name in namespaces:
        with contextlib.suppress(SandboxError):
            netns.delete(ip_tool, ns_name)
    mounts.remove_cgroups(cgroup_root(name))

    left = find_leftovers(name)
    if not left.mounts and not left.processes and directory.exists():
        shutil.rmtree(directory, ignore_errors=True)
    if not [other for other in sandbox_names() if other != name]:
        mounts.remove_empty_runtime_dirs()
    return find_leftovers(name)


def find_leftovers(name: str) -> Leftovers:
    """Everything of sandbox `name` still on the host: processes, mounts, namespaces,
    links, cgroups and its directory."""
    directory = sandbox_dir(name)
    namespaces = netns.names_matching(netns_pattern(name))
    left = Leftovers()
    for pid in _sandbox_pids(name, directory, namespaces):
        if processes.is_running(pid):
            left.processes.append(f"{pid} ({' '.join(processes.cmdline(pid))[:120]})")
    left.mounts = mounts.mounts_under(directory)
    left.namespaces = namespaces
    left.links = [link for link in netns.root_links() if name in link and "sps" in link]
    left.cgroups = [str(p) for p in processes.cgroup_dirs(cgroup_root(name))]
    if directory.exists():
        left.files.append(str(directory))
    return left


def teardown_all() -> dict[str, Leftovers]:
    """Tear down every sandbox recorded under the base directory."""
    return {name: teardown_sandbox(name) for name in sandbox_names()}


def base_is_empty() -> bool:
    root = base_dir()
    if not root.is_dir():
        return True
    return not any(p.is_dir() and p.name != "image" for p in root.iterdir())
