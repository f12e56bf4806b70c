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


def test_a_bare_command_prints_help_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert capsys.readouterr().out.startswith("usage: swarm-placement")


@pytest.mark.parametrize(("managed", "code"), [(True, 2), (False, 0)])
def test_plan_exit_code_says_whether_there_would_be_writes(
    managed: bool, code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from controller.cli import plan_cmd  # noqa: PLC0415
    from controller.core.memory import Memory  # noqa: PLC0415
    from controller.core.plan import plan  # noqa: PLC0415
    from controller.policy import Policy  # noqa: PLC0415
    from controller.runtime.dry_run import DryRun  # noqa: PLC0415
    from tests.core.builders import MANAGED, node, running, service, snapshot  # noqa: PLC0415

    web = service("web", replicas=1, labels=MANAGED if managed else {})
    snap = snapshot([node(1, manager=True)], [web], [running(web, 1, 1)])
    planned = plan(snapshot=snap, policy=Policy.default(), memory=Memory(), now=100.0)
    assert bool(planned.actions) is managed  # adopting web is a write
    dry = DryRun(snapshot=snap, plan=planned, now=100.0)
    monkeypatch.setattr(plan_cmd, "dry_plan", lambda policy, command: dry)
    monkeypatch.delenv("PLACEMENT_POLICY", raising=False)
    assert main(["plan", "--exit-code"]) == code
    assert main(["plan"]) == 0  # without the flag: 0 either way
    capsys.readouterr()
