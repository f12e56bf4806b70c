"""The controller's own image on the sandbox, built with no registry reachable.

1. The base: the Debian root filesystem of `debian_base`, imported on one node.
2. Wheels: `pip wheel` of the project and its dependencies on this host, for the Python
   of the base (the same Debian release, so the same version).
3. The build: deploy/Dockerfile with that base, installing from the wheels only, with no
   network at all.
4. Save once and load into every node: the same image ID everywhere, so a service created
   by that ID never tries to pull.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.sandbox import typed_docker
from controller.sandbox.debian_base import base_rootfs
from controller.sandbox.image import cache_dir
from controller.sandbox.spec import SandboxError

BASE_REPOSITORY = "swarm-placement/debian-python"
IMAGE_REFERENCE = "swarm-placement:sandbox"
BASE_CHANGES = ("ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
BUILD_TIMEOUT_SECONDS = 900
PIP_TIMEOUT_SECONDS = 600
STALE_SAVE_SECONDS = 3600.0


@dataclass
class BuiltImage:
    image_id: str
    reference: str
    tarball: Path
    seconds: dict[str, float] = field(default_factory=dict)  # step -> wall time

    def timings(self) -> str:
        return ", ".join(f"{step} {secs:.1f} s" for step, secs in self.seconds.items())


def repo_root() -> Path:
    """The source tree this package runs from (it holds deploy/Dockerfile)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "deploy" / "Dockerfile").is_file():
        raise SandboxError(f"no deploy/Dockerfile under {root}: build from a source checkout")
    return root


def build_wheels(repo: Path, dest: Path, *, python_version: str) -> list[Path]:
    """Wheels of the project (with its otlp extra) and every dependency, into `dest`."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if here != python_version:
        raise SandboxError(
            f"the base image has Python {python_version} but this host runs {here}: wheels "
            "with compiled parts would not load there; run with a matching Python"
        )
    argv = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(dest)]
    try:
        result = subprocess.run(
            [*argv, f"{repo}[otlp]"],
            check=False,
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT_SECONDS,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"pip wheel failed: {exc}") from exc
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-8:])
        raise SandboxError(f"pip wheel failed (exit {result.returncode}):\n{tail}")
    return sorted(dest.glob("*.whl"))


def context_tar(dockerfile: Path, wheels: Iterable[Path]) -> bytes:
    """The build context: the Dockerfile and wheels/, nothing else."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(dockerfile, arcname="Dockerfile")
        for wheel in wheels:
            tar.add(wheel, arcname=f"wheels/{wheel.name}")
    return buffer.getvalue()


def _stream_build(api: Any, context: bytes, buildargs: dict[str, str]) -> None:
    lines: list[str] = []
    chunks = typed_docker._call(
        "docker build",
        lambda: api.build(
            fileobj=io.BytesIO(context),
            custom_context=True,
            tag=IMAGE_REFERENCE,
            buildargs=buildargs,
            network_mode="none",
            rm=True,
            forcerm=True,
            decode=True,
        ),
    )
    for chunk in chunks:
        if "stream" in chunk:
            lines.extend(str(chunk["stream"]).splitlines())
        if "error" in chunk:
            tail = "\n".join([*lines[-10:], str(chunk["error"])])
            raise SandboxError(f"docker build of deploy/Dockerfile failed:\n{tail}")


def build_controller_image(docker_host: str, *, repo: Path | None = None) -> BuiltImage:
    """Build the image on the node at `docker_host` and save it; returns its ID."""
    repo = repo or repo_root()
    seconds: dict[str, float] = {}
    mark = time.monotonic()

    def lap(step: str) -> None:
        nonlocal mark
        now = time.monotonic()
        seconds[step] = now - mark
        mark = now

    base = base_rootfs(python=f"{sys.version_info.major}.{sys.version_info.minor}")
    lap("debootstrap" if base.seconds else "base (cached)")
    base_ref = f"{BASE_REPOSITORY}:{base.suite}"
    api = typed_docker.api_client(docker_host, timeout=BUILD_TIMEOUT_SECONDS)
    try:
        typed_docker._call(
            "docker import",
            lambda: api.import_image(
                src=str(base.tarball),
                repository=BASE_REPOSITORY,
                tag=base.suite,
                changes=list(BASE_CHANGES),
            ),
        )
        lap("import")
        with tempfile.TemporaryDirectory(prefix=".wheels-", dir=cache_dir()) as tmp:
            wheels = build_wheels(repo, Path(tmp), python_version=base.python)
            lap("wheels")
            context = context_tar(repo / "deploy" / "Dockerfile", wheels)
        _stream_build(
            api,
            context,
            {
                "BASE": base_ref,
                "PIP_OPTIONS": "--no-index --find-links=/src/wheels",
                "REQUIREMENT": "swarm-placement[otlp]",
            },
        )
        image_id = typed_docker.image_id(api, IMAGE_REFERENCE)
        lap("build")
        tarball = cache_dir() / f"swarm-placement-{image_id.removeprefix('sha256:')[:16]}.tar"
        if not tarball.is_file():
            partial = tarball.with_suffix(".tar.tmp")
            with open(partial, "wb") as out:
                for chunk in typed_docker.save_image(api, IMAGE_REFERENCE):
                    out.write(chunk)
            partial.replace(tarball)
        _prune_saved(keep=tarball)
        lap("save")
    finally:
        api.close()
    return BuiltImage(image_id, IMAGE_REFERENCE, tarball, seconds)


def load_into(docker_hosts: Iterable[str], built: BuiltImage) -> float:
    """Load the saved image into every node (in parallel); returns the seconds it took."""
    started = time.monotonic()

    def load(host: str) -> None:
        api = typed_docker.api_client(host, timeout=BUILD_TIMEOUT_SECONDS)
        try:
            if _has_image(api, built.image_id):
                return
            with open(built.tarball, "rb") as data:
                typed_docker.load_image(api, data)
            got = typed_docker.image_id(api, built.image_id)
        finally:
            api.close()
        if got != built.image_id:
            raise SandboxError(f"{host}: loaded image has ID {got}, expected {built.image_id}")

    hosts = list(docker_hosts)
    with ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
        list(pool.map(load, hosts))
    built.seconds["load"] = time.monotonic() - started
    return built.seconds["load"]


def _prune_saved(*, keep: Path) -> None:
    """Drop images saved by earlier builds: each is 160 MB. Only those older than an hour
    go, so a build running beside this one still finds its own."""
    cutoff = time.time() - STALE_SAVE_SECONDS
    for old in cache_dir().glob("swarm-placement-*.tar"):
        with contextlib.suppress(OSError):  # another build removed it first
            if old != keep and old.stat().st_mtime < cutoff:
                old.unlink()


def _has_image(api: Any, image_id: str) -> bool:
    try:
        return typed_docker.image_id(api, image_id) == image_id
    except SandboxError:
        return False
