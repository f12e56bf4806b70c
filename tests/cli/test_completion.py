"""Shell completion (argcomplete) offers commands, options and their choices, and the
help lists the commands by group."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from controller.cli.main import GROUPS, main


def _complete(line: str) -> list[str]:
    """What the shell would be offered: the program run as bash's hook runs it, words on
    fd 8 (argcomplete's protocol), its debug stream (fd 9) discarded."""
    env = {**os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line))}
    done = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m controller 8>&1 9>/dev/null'],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return sorted(w.strip() for w in done.stdout.split("\v") if w.strip())


def test_commands_and_their_options_complete() -> None:
    assert _complete("swarm-placement st") == ["start", "status"]
    assert _complete("swarm-placement status -o ") == ["json", "table", "yaml"]
    assert "--dry-run" in _complete("swarm-placement run --d")


def test_the_script_is_printed_for_each_shell(capsys: pytest.CaptureFixture[str]) -> None:
    for shell in ("bash", "zsh", "fish"):
        assert main(["completion", shell]) == 0
        assert "swarm-placement" in capsys.readouterr().out


def test_the_help_lists_every_command_once_by_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    text = capsys.readouterr().out
    operator, sandbox = text.index("\ncommands:"), text.index("\nsandbox swarm and image")
    assert operator < text.index("\n  run ") < text.index("\n  status ") < sandbox
    assert text.index("\n  sandbox ") > sandbox and text.index("\n  image ") > sandbox
    for _, names in GROUPS:
        for name in names:
            assert text.count(f"\n  {name} ") == 1, name
