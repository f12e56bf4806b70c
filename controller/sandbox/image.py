"""The sandbox's only image: a busybox-static root filesystem, identical on every node.

No registry can be reached, so the image is built from the host's static busybox with
`docker import`, saved once to a tarball cached under the base directory, and loaded into
every node. Loading the same tarball gives the same image ID everywhere, and services are
created by that ID, so no node ever tries to pull.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

from controller.sandbox import typed_docker
from controller.sandbox.spec import SandboxError
from controller.sandbox.state import base_dir

IMAGE_REPOSITORY = "swarm-placement/busybox"
IMAGE_TAG = "sandbox"
IMAGE_CHANGES = ("ENV PATH=/bin", 'CMD ["sh"]')


def cache_dir() -> Path:
    return base_dir() / "image"


def _busybox_digest(busybox: str) -> str:
    digest = hashlib.sha256()
    with open(busybox, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def rootfs_tar(busybox: str) -> bytes:
    """A root filesystem with /bin/busybox and a symlink per applet, reproducibly built."""
    try:
        listing = subprocess.run(
            [busybox, "--list"], capture_output=True, text=True, check=True, timeout=30
        ).stdout.split()
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"cannot list the applets of {busybox}: {exc}") from exc
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for directory, mode in (("bin", 0o755), ("etc", 0o755), ("root", 0o700), ("tmp", 0o1777)):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = mode
            tar.addfile(info)
        data = Path(busybox).read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size = len(data)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in sorted(set(listing) - {"busybox"}):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type = tarfile.SYMTYPE
            link.linkname = "busybox"
            link.mode = 0o777
            tar.addfile(link)
    return buffer.getvalue()


@contextlib.contextmanager
def _cache_lock() -> Iterator[None]:
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / ".lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def cached_image(busybox: str) -> tuple[Path, str] | None:
    """The cached tarball and its image ID for this busybox, if built before."""
    stem = cache_dir() / f"busybox-{_busybox_digest(busybox)}"
    tarball, id_file = stem.with_suffix(".tar"), stem.with_suffix(".id")
    if tarball.is_file() and id_file.is_file():
        image_id = id_file.read_text().strip()
        if image_id.startswith("sha256:"):
            return tarball, image_id
    return None


def forget_cached_image(busybox: str) -> None:
    """Drop a cached tarball that did not load, so the next build starts afresh."""
    with _cache_lock():
        stem = cache_dir() / f"busybox-{_busybox_digest(busybox)}"
        for suffix in (".tar", ".id"):
            stem.with_suffix(suffix).unlink(missing_ok=True)


def build_image(busybox: str, docker_host: str) -> tuple[Path, str]:
    """Import the image on one node and save it to the cache; returns (tarball, ID)."""
    with _cache_lock():
        found = cached_image(busybox)
        if found:
            return found
        stem = cache_dir() / f"busybox-{_busybox_digest(busybox)}"
        reference = f"{IMAGE_REPOSITORY}:{IMAGE_TAG}"
        api = typed_docker.api_client(docker_host)
        try:
            typed_docker.import_image(
                api,
                rootfs_tar(busybox),
                repository=IMAGE_REPOSITORY,
                tag=IMAGE_TAG,
                changes=IMAGE_CHANGES,
            )
            image_id = typed_docker.image_id(api, reference)
            tmp = stem.with_suffix(".tar.tmp")
            with open(tmp, "wb") as out:
                for chunk in typed_docker.save_image(api, reference):
                    out.write(chunk)
            os.replace(tmp, stem.with_suffix(".tar"))
            stem.with_suffix(".id").write_text(image_id + "\n")
        finally:
            api.close()
        return stem.with_suffix(".tar"), image_id


def load_image(tarball: Path, image_id: str, docker_host: str) -> None:
    """Load the cached image into one node and check it has the expected ID."""
    api = typed_docker.api_client(docker_host)
    try:
        with open(tarball, "rb") as data:
            typed_docker.load_image(api, data)
        got = typed_docker.image_id(api, image_id)
    finally:
        api.close()
    if got != image_id:
        raise SandboxError(f"loaded image has ID {got}, expected {image_id}")
