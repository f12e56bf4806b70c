"""Mounts and cgroups the sandbox's daemons leave behind, found by the sandbox's own paths."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
from pathlib import Path

from controller.sandbox.host import umount
from controller.sandbox.processes import cgroup_dirs

SHIM_SOCKET_DIR = Path("/run/containerd/s")
MOBY_NAMESPACE = "moby"


def _unescape(field: str) -> str:
    """Undo the octal escapes of /proc/self/mountinfo (space, tab, newline, backslash)."""
    out = []
    i = 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below `path`, deepest first."""
    prefix = str(path).rstrip("/")
    points = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        point = _unescape(fields[4])
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return sorted(set(points), key=lambda p: (p.count("/"), len(p)), reverse=True)


def unmount_under(path: Path) -> list[str]:
    """Unmount everything below `path`, deepest first; lazily when busy.

    Returns the mount points that could not be removed.
    """
    for _ in range(5):
        points = mounts_under(path)
        if not points:
            return []
        for point in points:
            try:
                umount(point)
            except OSError as exc:
                if exc.errno in (errno.EINVAL, errno.ENOENT):
                    continue
                with contextlib.suppress(OSError):
                    umount(point, lazy=True)
    return mounts_under(path)


def remove_cgroups(root: str) -> list[str]:
    """Remove cgroup `root` and its children in every hierarchy, deepest first.

    Returns the directories that remain (a process still in them).
    """
    left = []
    for top in cgroup_dirs(root):
        dirs = sorted(
            (p for p in top.rglob("*") if p.is_dir()),
            key=lambda p: len(p.parts),
            reverse=True,
        )
        for directory in [*dirs, top]:
            try:
                directory.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                left.append(str(directory))
    return left


def shim_socket(containerd_socket: Path, container_id: str) -> Path:
    """Where containerd (1.6, 1.7) puts the socket of a container's runc shim."""
    digest = hashlib.sha256(
        os.path.join(str(containerd_socket), MOBY_NAMESPACE, container_id).encode()
    ).hexdigest()
    return SHIM_SOCKET_DIR / digest


def remove_shim_sockets(containerd_socket: Path, data_root: Path) -> None:
    """Remove the shim sockets of this node's containers, which a killed shim leaves."""
    containers = data_root / "containers"
    if not containers.is_dir():
        return
    for entry in containers.iterdir():
        with contextlib.suppress(OSError):
            shim_socket(containerd_socket, entry.name).unlink(missing_ok=True)


def remove_empty_runtime_dirs() -> None:
    """Remove the empty /run directories dockerd and containerd create on first start.

    Call only when no other sandbox is recorded. Nothing is removed while a daemon of the
    host itself runs, and only empty directories are ever removed.
    """
    if Path("/run/docker.pid").exists() or Path("/run/docker.sock").exists():
        return
    if Path("/run/containerd/containerd.sock").exists():
        return
    for directory in ("/run/containerd/s", "/run/containerd", "/run/docker/plugins", "/run/docker"):
        with contextlib.suppress(OSError):
            os.rmdir(directory)
