"""Finding the suite and the mirror for debootstrap from this machine's own files."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.sandbox.debian_base import (
    MIRROR_ENV,
    SUITE_ENV,
    apt_mirror,
    host_suite,
    suite_for,
)
from controller.sandbox.spec import SandboxError


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SUITE_ENV, raising=False)
    monkeypatch.delenv(MIRROR_ENV, raising=False)


def test_the_suite_is_the_hosts_codename(tmp_path: Path) -> None:
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Debian GNU/Linux 13"\nVERSION_CODENAME=trixie\n')
    assert host_suite(release) == "trixie"
    release.write_text("ID=something\n")
    with pytest.raises(SandboxError, match=SUITE_ENV):
        host_suite(release)


def test_the_suite_follows_the_python_the_wheels_are_built_with(tmp_path: Path) -> None:
    release = tmp_path / "os-release"
    release.write_text("ID=debian\nVERSION_CODENAME=trixie\n")
    assert suite_for("3.11", release) == "bookworm"
    assert suite_for("3.13", release) == "trixie"
    assert suite_for("3.12", release) == "trixie"  # none has it: the host's own
    release.write_text("ID=ubuntu\nVERSION_CODENAME=noble\n")
    assert suite_for("3.11", release) == "noble"


def test_a_one_line_source_gives_the_mirror_of_the_suite(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb http://security.example/debian-security bookworm-security main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main contrib\n"
    )
    assert apt_mirror("bookworm", tmp_path) == "http://mirror.example/debian"


def test_a_deb822_source_gives_the_mirror_of_the_suite(tmp_path: Path) -> None:
    listing = tmp_path / "sources.list.d"
    listing.mkdir()
    (listing / "debian.sources").write_text(
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: trixie\nComponents: main\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\n"
        "Suites: trixie trixie-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
    assert apt_mirror("trixie", tmp_path) == "http://mirror.example/debian"
    with pytest.raises(SandboxError, match=MIRROR_ENV):
        apt_mirror("bookworm", tmp_path)


def test_the_environment_overrides_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SUITE_ENV, "bookworm")
    monkeypatch.setenv(MIRROR_ENV, "http://local.example/debian")
    assert suite_for("3.11", tmp_path / "missing") == "bookworm"
    assert apt_mirror("bookworm", tmp_path) == "http://local.example/debian"
