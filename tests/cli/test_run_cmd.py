"""`run`'s lease options: a config name every replica shares, and the old setting refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli.main import main
from controller.cli.run_cmd import _service_options
from controller.runtime.lease_keeper import LeaseConfig

from .test_env_options import parse_run


def test_a_lease_name_makes_a_lease_on_that_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLACEMENT_LEASE_NAME", "placement_controller-lease")
    options = _service_options(parse_run("--lease-holder", "t1@node-1", "--lease-lifetime", "6"))
    assert options["lease"] == LeaseConfig(
        name="placement_controller-lease", holder="t1@node-1", lifetime=6.0
    )
    assert "lease" not in _service_options(parse_run("--lease-name", "x", "--once", "--dry-run"))


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        # A stack file of the version that kept the lease on the service: running on
        # without a lease beside replicas that hold one could make two writers.
        ((), {"PLACEMENT_LEASE_SERVICE": "placement_controller"}, "--lease-service"),
        (("--lease-service", "placement_controller"), {}, "set --lease-name"),
        (("--lease-name", "bad name"), {}, "is no Docker config name"),
        (("--lease-name", "x" * 65), {}, "is no Docker config name"),
        (("--lease-name", "ctl-lease", "--once"), {}, "--once cannot keep a lease"),
    ],
)
def test_a_lease_it_cannot_keep_stops_run_before_it_connects(
    argv: tuple[str, ...],
    env: dict[str, str],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # nothing listens: never reached
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["run", *argv]) == 2
    assert says in capsys.readouterr().err


def test_a_bounded_run_that_never_reached_the_engine_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert main(["run", "--for", "1"]) == 1
    assert "run: never reached the Docker engine" in capsys.readouterr().err
