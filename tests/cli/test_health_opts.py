"""`swarm-placement run` health options: what they build, and what they refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli.health_opts import health_config
from controller.cli.main import build_parser, main


def _config(*argv: str):  # type: ignore[no-untyped-def]
    return health_config(build_parser().parse_args(["run", *argv]))


def test_nothing_asked_nothing_built_but_liveness() -> None:
    # Liveness is on by default: it turns itself off where no node's address answers.
    config = _config()
    assert config is not None and config.liveness
    assert config.webhook is None and not config.plugin_dirs and not config.agents
    assert _config("--no-liveness") is None


@pytest.mark.parametrize(("value", "on"), [("false", False), ("0", False), ("true", True)])
def test_the_variable_turns_liveness_off_or_on(
    monkeypatch: pytest.MonkeyPatch, value: str, on: bool
) -> None:
    monkeypatch.setenv("PLACEMENT_LIVENESS", value)
    config = _config()
    assert (config is not None and config.liveness) is on


def test_everything_asked(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("tok-0123456789abcdef\n")
    (tmp_path / "secret").write_text("sec-0123456789abcdef")
    config = _config(
        "--health-listen",
        "127.0.0.1:9465",
        "--health-token-file",
        str(tmp_path / "token"),
        "--plugins",
        "--plugin-dirs",
        f"{tmp_path}:/nowhere",
        "--agents",
        "node-1=http://a:9810, n2=http://b:9810",
        "--agent-secret-file",
        str(tmp_path / "secret"),
    )
    assert config.webhook == ("127.0.0.1", 9465) and config.webhook_token == "tok-0123456789abcdef"
    assert config.plugin_dirs == (str(tmp_path), "/nowhere")
    assert config.plugin_deadline == 1.0, "one deadline for all plugins, 1 s by default"
    assert config.agents == (("node-1", "http://a:9810"), ("n2", "http://b:9810"))
    assert config.agent_secret == "sec-0123456789abcdef"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--health-listen", ":9465"], "needs --health-token-file"),
        (["--health-listen", "nine", "--health-token-file", "/x"], "invalid address"),
        (["--health-listen", ":9465", "--health-token-file", "/nonexistent"], "cannot read"),
        (["--agents", "node-1=http://a:1"], "needs --agent-secret-file"),
        (["--agents", "http://a:1"], "names no node: list each agent as NODE=URL"),
        (["--agent-service", "agents"], "needs --agent-secret-file"),
        (["--plugins", "--plugin-timeout", "0"], "above 0"),
        (["--plugins", "--plugin-deadline", "0"], "--plugin-deadline must be above 0"),
    ],
)
def test_wrong_options_are_refused(argv: list[str], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        _config(*argv)


def test_a_plain_http_agent_is_refused_when_the_agents_have_a_ca(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("sec-0123456789abcdef")
    (tmp_path / "ca.pem").write_text("a CA")
    with pytest.raises(ValueError, match="lists http://b:9810: the agents' secret would go in"):
        _config(
            "--agents", "node-1=https://a:9810,node-2=http://b:9810",
            "--agent-secret-file", str(tmp_path / "secret"),
            "--agent-ca-file", str(tmp_path / "ca.pem"),
        )  # fmt: skip


def test_run_reports_them_as_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--health-listen", ":9465"]) == 2
    assert "--health-listen needs --health-token-file" in capsys.readouterr().err


def test_the_agent_refuses_to_start_without_a_secret(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent"]) == 2
    assert "--secret-file is required" in capsys.readouterr().err


def test_a_token_shorter_than_16_characters_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("short-token\n")
    with pytest.raises(ValueError, match="has 11 characters, fewer than 16"):
        _config("--health-listen", "127.0.0.1:9465", "--health-token-file", str(tmp_path / "token"))
