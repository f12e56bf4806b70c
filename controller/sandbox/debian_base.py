"""A Python base image with no registry: a Debian root filesystem made here by debootstrap.

debootstrap fetches Debian's own packages from the mirror this machine's apt already uses
(read from /etc/apt/sources.list*, so no mirror is named anywhere in the project) and
builds a minimal root with python3 and its venv module. The result is cached as a tarball
under the sandbox base directory, one per suite: about a minute to make, then reused.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from controller.sandbox.image import cache_dir
from controller.sandbox.mounts import unmount_under
from controller.sandbox.spec import SandboxError

PACKAGES = ("python3", "python3-venv", "ca-certificates")
# Nothing the image needs at run time: package caches and lists, documentation, locales.
EXCLUDES = (
    "./var/cache/apt/archives/*.deb",
    "./var/lib/apt/lists/*",
    "./usr/share/doc/*",
    "./usr/share/man/*",
    "./usr/share/info/*",
    "./usr/share/locale/*",
)
SUITE_ENV = "SWARM_PLACEMENT_DEBIAN_SUITE"
MIRROR_ENV = "SWARM_PLACEMENT_DEBIAN_MIRROR"
DEBOOTSTRAP_TIMEOUT_SECONDS = 900


@dataclass(frozen=True)
class BaseRootfs:
    tarball: Path
    suite: str
    python: str  # "3.11": the wheels must be built for this version
    seconds: float  # what making it took now (0 when it came from the cache)


# Debian releases by their python3: wheels made by this host's Python load in the image
# only when both run the same version.
DEBIAN_SUITE_OF_PYTHON = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
OS_RELEASE = Path("/etc/os-release")


def host_suite(os_release: Path = OS_RELEASE) -> str:
    """This machine's release codename (bookworm, trixie...): its mirror surely has it."""
    try:
        text = os_release.read_text()
    except OSError as exc:
        raise SandboxError(f"cannot read {os_release}: {exc}; set {SUITE_ENV}") from exc
    match = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?$", text, re.MULTILINE)
    if not match:
        raise SandboxError(f"{os_release} names no VERSION_CODENAME; set {SUITE_ENV}")
    return match.group(1)


def suite_for(python: str, os_release: Path = OS_RELEASE) -> str:
    """The release to bootstrap: the Debian one whose python3 is `python` (so this host's
    wheels load in it), else this host's own release."""
    if os.environ.get(SUITE_ENV):
        return os.environ[SUITE_ENV]
    host = host_suite(os_release)
    is_debian = re.search(r"^ID=\"?debian\"?$", os_release.read_text(), re.MULTILINE)
    return DEBIAN_SUITE_OF_PYTHON.get(python, host) if is_debian else host


def _one_line_entries(text: str) -> list[tuple[str, str, list[str]]]:
    entries = []
    for line in text.splitlines():
        words = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0]).split()
        if len(words) >= 4 and words[0] == "deb":
            entries.append((words[1], words[2], words[3:]))
    return entries


def _deb822_entries(text: str) -> list[tuple[str, str, list[str]]]:
    entries = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, list[str]] = {}
        for line in stanza.splitlines():
            key, sep, value = line.partition(":")
            if sep and not line.startswith((" ", "#")):
                fields[key.strip().lower()] = value.split()
        if "deb" not in fields.get("types", []) or fields.get("enabled") == ["no"]:
            continue
        for uri in fields.get("uris", []):
            for suite in fields.get("suites", []):
                entries.append((uri, suite, fields.get("components", [])))
    return entries


def apt_mirror(suite: str, etc_apt: Path = Path("/etc/apt")) -> str:
    """The first mirror apt is configured with that serves `suite` with `main`."""
    if os.environ.get(MIRROR_ENV):
        return os.environ[MIRROR_ENV]
    files = [etc_apt / "sources.list", *sorted((etc_apt / "sources.list.d").glob("*"))]
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        parse = _deb822_entries if path.suffix == ".sources" else _one_line_entries
        for uri, entry_suite, components in parse(text):
            if entry_suite == suite and "main" in components:
                return uri
    raise SandboxError(
        f"apt has no mirror for {suite} main in {etc_apt}/sources.list*: set {MIRROR_ENV}"
    )


def _python_of(root: Path) -> str:
    target = os.readlink(root / "usr" / "bin" / "python3")
    match = re.fullmatch(r"(?:.*/)?python(3\.[0-9]+)", target)
    if not match:
        raise SandboxError(f"cannot tell the Python version of the root: python3 -> {target}")
    return match.group(1)


def base_rootfs(*, python: str) -> BaseRootfs:
    """The cached root filesystem tarball with Python `python`, made when missing."""
    suite = suite_for(python)
    stem = cache_dir() / f"debian-{suite}-python"
    tarball, version = stem.with_suffix(".tar"), stem.with_suffix(".python")
    if tarball.is_file() and version.is_file():
        return BaseRootfs(tarball, suite, version.read_text().strip(), 0.0)
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise SandboxError("debootstrap is not installed: apt-get install debootstrap")
    # The host's own mirror serves the other releases of its distribution too.
    mirror = apt_mirror(host_suite())
    cache_dir().mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=".debootstrap-", dir=cache_dir()) as tmp:
        root = Path(tmp) / "root"
        try:
            _run(
                [debootstrap, "--variant=minbase", f"--include={','.join(PACKAGES)}",
                 suite, str(root), mirror],
                what=f"debootstrap {suite}",
                timeout=DEBOOTSTRAP_TIMEOUT_SECONDS,
            )  # fmt: skip
            python = _python_of(root)
            partial = tarball.with_suffix(".tar.tmp")
            excludes = [f"--exclude={pattern}" for pattern in EXCLUDES]
            _run(
                ["tar", "-C", str(root), "--numeric-owner", *excludes, "-cf", str(partial), "."],
                what="tar the root filesystem",
                timeout=300,
            )
            os.replace(partial, tarball)
            version.write_text(python + "\n")
        finally:
            unmount_under(Path(tmp))  # a failed debootstrap may leave /proc mounted
    return BaseRootfs(tarball, suite, python, time.monotonic() - started)


def _run(argv: list[str], *, what: str, timeout: float) -> None:
    try:
        result = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"{what} failed: {exc}") from exc
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-8:])
        raise SandboxError(f"{what} failed (exit {result.returncode}):\n{tail}")
