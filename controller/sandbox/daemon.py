"""One node's daemons: its own containerd and dockerd, inside the node's namespaces.

Each node runs a containerd of its own (passed to dockerd with `--containerd`), so dockerd
never attaches to a host containerd at /run/containerd. dockerd runs in the node's network
namespace (entered with `nsenter --net`, which leaves /sys alone) and in a UTS namespace of
its own whose hostname is the node's name. Both are started in their own session, so a
Ctrl-C at the terminal does not reach them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from controller.sandbox import mounts, processes
from controller.sandbox.netns import netns_path
from controller.sandbox.spec import SandboxError
from controller.sandbox.state import NodeState, SandboxState

SHUTDOWN_TIMEOUT_SECONDS = 2
START_TIMEOUT_SECONDS = 90.0
STOP_GRACE_SECONDS = SHUTDOWN_TIMEOUT_SECONDS + 10.0
SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOSTNAME_SCRIPT = '"$0" hostname "$1" && shift && exec "$@"'


def _daemon_env() -> dict[str, str]:
    path = os.environ.get("PATH", "")
    return {
        "PATH": f"{path}:{SBIN_PATH}" if path else SBIN_PATH,
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
    }


def containerd_config(node: NodeState) -> str:
    root = node.path
    return "\n".join(
        [
            "version = 2",
            f'root = "{root / "containerd" / "root"}"',
            f'state = "{root / "containerd" / "state"}"',
            'disabled_plugins = ["io.containerd.grpc.v1.cri", '
            '"io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", '
            '"io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]',
            "[grpc]",
            f'  address = "{node.containerd_socket}"',
            "[debug]",
            '  level = "warn"',
            "",
        ]
    )


def dockerd_args(state: SandboxState, node: NodeState, dockerd: str) -> list[str]:
    root = node.path
    args = [
        dockerd,
        "--config-file", str(root / "daemon.json"),
        "--data-root", str(root / "data"),
        "--exec-root", str(root / "exec"),
        "--host", node.docker_host,
        "--pidfile", str(root / "docker.pid"),
        "--containerd", str(node.containerd_socket),
        # cgroupfs on every host: under systemd, dockerd would otherwise want a slice name.
        "--exec-opt", "native.cgroupdriver=cgroupfs",
        "--cgroup-parent", node.cgroup_parent,
        "--storage-driver", state.storage_driver,
        "--shutdown-timeout", str(SHUTDOWN_TIMEOUT_SECONDS),
        "--log-level", "warn",
    ]  # fmt: skip
    for kind, value in sorted(node.generic_resources.items()):
        args += ["--node-generic-resource", f"{kind}={value}"]
    return args


def daemon_config(state: SandboxState, node: NodeState) -> dict[str, str]:
    """The node's daemon.json: its own, so a host /etc/docker/daemon.json never applies."""
    config: dict[str, str] = {}
    if state.dockerd_major and state.dockerd_major < 23:
        # dockerd before 23 writes an engine key to /etc/docker unless told otherwise;
        # later versions have no such key and reject the setting.
        config["deprecated-key-path"] = str(node.path / "key.json")
    return config


def prepare(state: SandboxState, node: NodeState) -> None:
    root = node.path
    for sub in ("data", "exec", "containerd"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "containerd.toml").write_text(containerd_config(node))
    (root / "daemon.json").write_text(json.dumps(daemon_config(state, node)) + "\n")


def _spawn(argv: list[str], log: Path) -> tuple[int, int]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_daemon_env(),
            start_new_session=True,
            close_fds=True,
        )
    started = processes.start_time(proc.pid)
    if started is None:
        raise SandboxError(f"{argv[0]} exited at once; see {log}")
    return proc.pid, started


def start_containerd(state: SandboxState, node: NodeState) -> None:
    node.containerd_socket.unlink(missing_ok=True)
    argv = [
        state.tools["nsenter"],
        f"--net={netns_path(node.netns)}",
        state.tools["containerd"],
        "--config", str(node.path / "containerd.toml"),
    ]  # fmt: skip
    node.containerd_pid, node.containerd_start = _spawn(argv, node.path / "containerd.log")


def start_dockerd(state: SandboxState, node: NodeState) -> None:
    node.docker_socket.unlink(missing_ok=True)
    argv = [
        state.tools["nsenter"],
        f"--net={netns_path(node.netns)}",
        state.tools["unshare"],
        "--uts",
        "/bin/sh", "-c", HOSTNAME_SCRIPT, state.tools["busybox"], node.hostname,
        *dockerd_args(state, node, state.tools["dockerd"]),
    ]  # fmt: skip
    node.dockerd_pid, node.dockerd_start = _spawn(argv, node.path / "dockerd.log")


def containerd_running(node: NodeState) -> bool:
    return processes.is_running(node.containerd_pid, node.containerd_start)


def dockerd_running(node: NodeState) -> bool:
    return processes.is_running(node.dockerd_pid, node.dockerd_start)


def _log_tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def wait_containerd(node: NodeState, *, timeout: float = START_TIMEOUT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not containerd_running(node):
            raise SandboxError(
                f"containerd of {node.hostname} exited:\n{_log_tail(node.path / 'containerd.log')}"
            )
        if _connects(node.containerd_socket):
            return
        time.sleep(0.02)
    raise SandboxError(f"containerd of {node.hostname} did not answer in {timeout:.0f} s")


def wait_dockerd(node: NodeState, *, timeout: float = START_TIMEOUT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not dockerd_running(node):
            raise SandboxError(
                f"dockerd of {node.hostname} exited:\n{_log_tail(node.path / 'dockerd.log')}"
            )
        if ping(node.docker_socket):
            return
        time.sleep(0.05)
    raise SandboxError(f"dockerd of {node.hostname} did not answer in {timeout:.0f} s")


def _connects(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def ping(path: Path, *, timeout: float = 2.0) -> bool:
    """True when the Docker API on unix socket `path` answers /_ping."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            reply = sock.recv(64)
        except OSError:
            return False
    return reply.startswith(b"HTTP/1.") and b" 200 " in reply[:16]


def kill_dockerd(node: NodeState) -> None:
    """SIGKILL the node's dockerd, as a crash would; containerd and containers stay."""
    if dockerd_running(node):
        processes.kill([node.dockerd_pid or 0])


def stop_dockerd(node: NodeState, *, grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM the node's dockerd and wait for a clean exit (SIGKILL after `grace`)."""
    if dockerd_running(node):
        processes.terminate([node.dockerd_pid or 0], grace=grace)


def stop_containerd(node: NodeState) -> None:
    if containerd_running(node):
        processes.terminate([node.containerd_pid or 0], grace=5.0)


def kill_containers(node: NodeState) -> None:
    """SIGKILL the processes of the node's containers (found by its cgroup)."""
    pids = processes.pids_in_cgroup(node.cgroup_parent)
    if pids:
        processes.kill(pids)


def node_leftover_pids(node: NodeState) -> list[int]:
    """Every process of the node: by its directory, namespace or cgroup."""
    pids = set(processes.pids_naming_path(node.path))
    pids.update(processes.pids_in_cgroup(node.cgroup_parent))
    inode = processes.netns_inode(netns_path(node.netns))
    if inode is not None:
        pids.update(processes.pids_in_netns([inode]))
    return sorted(pids)


def clean_node(node: NodeState) -> None:
    """Remove what a dead containerd left: shims, containers, mounts, shim sockets."""
    stop_dockerd(node)
    stop_containerd(node)
    leftovers = node_leftover_pids(node)
    if leftovers:
        processes.kill(leftovers)
    mounts.remove_shim_sockets(node.containerd_socket, node.path / "data")
    mounts.unmount_under(node.path)
