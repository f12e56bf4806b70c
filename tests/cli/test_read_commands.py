"""`plan` and `explain`: what they say and return when the policy or the engine fails
(what they print from a real swarm is tested on the sandbox)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli.main import main


@pytest.mark.parametrize("command", [["plan"], ["explain", "web"]])
def test_an_unreachable_engine_is_exit_1_naming_the_command_and_the_host(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    host = f"unix://{tmp_path}/nothing-listens-here.sock"
    monkeypatch.setenv("DOCKER_HOST", host)
    monkeypatch.delenv("PLACEMENT_POLICY", raising=False)
    assert main(command) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{command[0]}: cannot reach the Docker engine at {host}")


@pytest.mark.parametrize("command", [["plan"], ["explain", "web"]])
def test_a_bad_policy_is_exit_2_with_file_line_and_field_before_any_connection(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing-listens-here.sock")
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: placement/v1\ncontroller:\n  aggressiveness: 9\n")
    assert main([*command, "--policy", str(policy)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"{policy}:3:") and "controller.aggressiveness" in lines[0]
    assert lines[-1] == f"{command[0]}: the policy {policy} is invalid"
