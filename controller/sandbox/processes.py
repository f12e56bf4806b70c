"""Finding and ending the sandbox's own processes, and only those.

A process belongs to a sandbox when its recorded PID still has its recorded start time,
when its command line names the sandbox's directory, when it lives in one of the sandbox's
network namespaces, or when it sits in the sandbox's cgroup. Nothing is ever chosen by
program name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[19])


def is_running(pid: int | None, started: int | None = None) -> bool:
    """True if `pid` runs (not a zombie) and, when given, started at `started`."""
    if pid is None or pid <= 0:
        return False
    _reap(pid)
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    rest = stat[stat.rfind(")") + 2 :].split()
    if rest[0] in ("Z", "X"):
        return False
    return started is None or int(rest[19]) == started


def _reap(pid: int) -> None:
    """Collect the exit status of our own child so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _protected() -> set[int]:
    """This process and its ancestors: never signalled whatever their command line says."""
    pids = {0, 1}
    pid = os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            stat = (PROC / str(pid) / "stat").read_text()
            pid = int(stat[stat.rfind(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def _all_pids() -> list[int]:
    return [int(p.name) for p in PROC.iterdir() if p.name.isdigit()]


def cmdline(pid: int) -> list[str]:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def pids_naming_path(path: Path) -> list[int]:
    """Processes whose command line names something inside directory `path`."""
    needle = (str(path).rstrip("/") + "/").encode()
    found = []
    for pid in _all_pids():
        try:
            raw = (PROC / str(pid) / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in raw.replace(b"\0", b" "):
            found.append(pid)
    return [pid for pid in found if pid not in _protected()]


def netns_inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def pids_in_netns(inodes: Iterable[int]) -> list[int]:
    """Processes whose network namespace is one of `inodes`."""
    wanted = {f"net:[{inode}]" for inode in inodes}
    if not wanted:
        return []
    found = []
    for pid in _all_pids():
        try:
            link = os.readlink(PROC / str(pid) / "ns" / "net")
        except OSError:
            continue
        if link in wanted:
            found.append(pid)
    return [pid for pid in found if pid not in _protected()]


def cgroup_mounts() -> list[Path]:
    """Mount points of every cgroup (v1 controllers and the v2 unified tree)."""
    points = []
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split()
        if len(parts) >= 3 and parts[2] in ("cgroup", "cgroup2"):
            points.append(Path(parts[1].replace("\\040", " ")))
    return points


def cgroup_dirs(root: str) -> list[Path]:
    """The directories of cgroup `root` (e.g. /swarm-placement-dev) in every hierarchy."""
    relative = root.strip("/")
    return [m / relative for m in cgroup_mounts() if (m / relative).is_dir()]


def pids_in_cgroup(root: str) -> list[int]:
    found: set[int] = set()
    for top in cgroup_dirs(root):
        # os.walk, not rglob: a container exiting mid-walk removes its cgroup, which
        # rglob raises on (seen tearing down a 20-node sandbox); os.walk skips it.
        for directory, _, files in os.walk(top):
            if "cgroup.procs" not in files:
                continue
            with contextlib.suppress(OSError, ValueError):
                text = (Path(directory) / "cgroup.procs").read_text()
                found.update(int(x) for x in text.split())
    return sorted(found - _protected())


def terminate(pids: Iterable[int], *, grace: float) -> list[int]:
    """SIGTERM, then SIGKILL whatever still runs after `grace` seconds.

    Returns the PIDs that still run after the SIGKILL (normally none).
    """
    targets = [pid for pid in set(pids) if pid not in _protected()]
    _signal_all(targets, signal.SIGTERM)
    remaining = wait_gone(targets, timeout=grace)
    if remaining:
        _signal_all(remaining, signal.SIGKILL)
        remaining = wait_gone(remaining, timeout=10.0)
    return remaining


def kill(pids: Iterable[int]) -> list[int]:
    """SIGKILL at once; returns the PIDs still running after a short wait."""
    targets = [pid for pid in set(pids) if pid not in _protected()]
    _signal_all(targets, signal.SIGKILL)
    return wait_gone(targets, timeout=10.0)


def _signal_all(pids: Iterable[int], signum: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def wait_gone(pids: Iterable[int], *, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    remaining = [pid for pid in pids if is_running(pid)]
    while remaining and time.monotonic() < deadline:
        time.sleep(0.05)
        remaining = [pid for pid in remaining if is_running(pid)]
    return remaining
