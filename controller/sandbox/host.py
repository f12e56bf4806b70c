"""What the host must offer: root, the programs the sandbox runs, a storage driver."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from controller.sandbox.spec import HostNotReadyError, SandboxError

# Program -> the Debian package that ships it.
REQUIRED_PROGRAMS = {
    "dockerd": "docker.io",
    "containerd": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "runc": "runc",
    "nsenter": "util-linux",
    "unshare": "util-linux",
    "ip": "iproute2",
    "busybox": "busybox-static",
}
EXTRA_SEARCH_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
PT_INTERP = 3


@dataclass(frozen=True)
class Tools:
    """Absolute paths of the programs the sandbox runs."""

    dockerd: str
    containerd: str
    nsenter: str
    unshare: str
    ip: str
    busybox: str


def which(program: str) -> str | None:
    """Find a program on PATH, then in the usual sbin directories."""
    path = os.environ.get("PATH", "")
    search = os.pathsep.join([path, *EXTRA_SEARCH_DIRS])
    return shutil.which(program, path=search)


def effective_uid() -> int:
    return os.geteuid()


def check_host() -> Tools:
    """Return the tools, or raise HostNotReadyError naming what to install."""
    if effective_uid() != 0:
        raise HostNotReadyError(
            "the sandbox must run as root: it starts dockerd in network namespaces "
            "(try: sudo swarm-placement sandbox ...)"
        )
    found: dict[str, str] = {}
    missing: dict[str, list[str]] = {}
    for program, package in REQUIRED_PROGRAMS.items():
        location = which(program)
        if location is None:
            missing.setdefault(package, []).append(program)
        else:
            found[program] = location
    if "busybox" in found and not is_static_executable(found["busybox"]):
        missing.setdefault("busybox-static", []).append(f"a static busybox ({found['busybox']})")
    if missing:
        programs = ", ".join(p for progs in missing.values() for p in progs)
        packages = " ".join(sorted(missing))
        raise HostNotReadyError(
            f"missing {programs}: install the Debian package(s) with 'apt-get install {packages}'"
        )
    return Tools(
        dockerd=found["dockerd"],
        containerd=found["containerd"],
        nsenter=found["nsenter"],
        unshare=found["unshare"],
        ip=found["ip"],
        busybox=found["busybox"],
    )


def is_static_executable(path: str) -> bool:
    """True when the ELF file has no program interpreter (needs no libc in the image)."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(64)
            if header[:4] != b"\x7fELF":
                return False
            is64 = header[4] == 2
            order = "<" if header[5] == 1 else ">"
            if is64:
                phoff, phentsize, phnum = (
                    struct.unpack_from(order + "Q", header, 32)[0],
                    *struct.unpack_from(order + "HH", header, 54),
                )
            else:
                phoff, phentsize, phnum = (
                    struct.unpack_from(order + "I", header, 28)[0],
                    *struct.unpack_from(order + "HH", header, 42),
                )
            for i in range(phnum):
                handle.seek(phoff + i * phentsize)
                (p_type,) = struct.unpack(order + "I", handle.read(4))
                if p_type == PT_INTERP:
                    return False
            return True
    except OSError:
        return False


def dockerd_major_version(dockerd: str) -> int:
    """The major version of dockerd (20 for 20.10.24, 26 for 26.1.5)."""
    try:
        out = subprocess.run(
            [dockerd, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"cannot run {dockerd} --version: {exc}") from exc
    match = re.search(r"version (\d+)\.", out)
    if not match:
        raise SandboxError(f"cannot read the dockerd version from {out.strip()!r}")
    return int(match.group(1))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def mount(source: str, target: str, fstype: str, options: str) -> None:
    libc = _libc()
    result = libc.mount(
        source.encode(), target.encode(), fstype.encode(), ctypes.c_ulong(0), options.encode()
    )
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), target)


def umount(target: str, *, lazy: bool = False) -> None:
    mnt_detach = 2
    libc = _libc()
    if libc.umount2(target.encode(), mnt_detach if lazy else 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), target)


def choose_storage_driver(base: Path) -> str:
    """overlay2 when an overlay mount works on the sandbox's filesystem, else vfs.

    overlay2 starts a container without copying its image; vfs copies the whole image for
    every container, which is slower and larger but works on any filesystem.
    """
    forced = os.environ.get("SWARM_PLACEMENT_SANDBOX_STORAGE_DRIVER")
    if forced:
        return forced
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".overlay-probe-", dir=base) as tmp:
        root = Path(tmp)
        for sub in ("lower", "upper", "work", "merged"):
            (root / sub).mkdir()
        (root / "lower" / "f").write_text("x")
        options = f"lowerdir={root / 'lower'},upperdir={root / 'upper'},workdir={root / 'work'}"
        try:
            mount("overlay", str(root / "merged"), "overlay", options)
        except OSError:
            return "vfs"
        try:
            ok = (root / "merged" / "f").read_text() == "x"
        finally:
            umount(str(root / "merged"), lazy=True)
        return "overlay2" if ok else "vfs"
