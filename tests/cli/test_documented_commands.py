"""The commands the README and the operations guide show exist, with the options shown,
and the policy errors the reference shows are what `policy check` prints."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from controller.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    found = {flag for a in parser._actions for flag in a.option_strings}
    for sub in _subcommands(parser).values():
        found |= _options(sub)
    return found


def _shown() -> list[tuple[str, str]]:
    """(where, command line) for every `swarm-placement ...` in the README and guides."""
    lines = []
    for name in ("README.md", "docs/operations.md", "docs/operations-deploy.md"):
        for line in (ROOT / name).read_text().splitlines():
            for found in re.findall(r"swarm-placement ((?:[a-z-]+)(?: [^`|\n]*)?)", line):
                lines.append((name, found.strip()))
    return lines


def test_every_documented_command_and_option_exists() -> None:
    commands = _subcommands(build_parser())
    shown = _shown()
    assert len(shown) > 20
    problems = []
    for where, line in shown:
        words = line.split()
        if words[0] not in commands:
            if words[0] in ("probe", "agent", "sandbox", "image") or not words[0].islower():
                continue
            problems.append(f"{where}: no command {words[0]!r} in {line!r}")
            continue
        known = _options(commands[words[0]])
        problems += [
            f"{where}: {words[0]} has no option {flag} ({line!r})"
            for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", line)
            if flag not in known and flag not in ("-", "--")
        ]
    assert problems == []


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "apiVersion: placement/v1\nservices:\n  - match: {name: db}\n    priority: urgent\n",
            'services[0].priority = "urgent": expected high, medium, low, none or an integer '
            "from 0 to 3000",
        ),
        (
            "apiVersion: placement/v1\ndefaults:\n  prio: high\n",
            'defaults.prio = "high": unknown field; did you mean priority?',
        ),
        (
            "apiVersion: placement/v1\nservices:\n  - match: {name: a}\n  - match: {name: b}\n"
            "  - managed: true\n",
            "services[2].match: missing; this field is required",
        ),
    ],
)
def test_the_error_lines_the_reference_shows_are_what_check_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, shown: str
) -> None:
    reference = (ROOT / "docs/policy-reference.md").read_text()
    assert shown in reference, "the reference no longer shows this line"
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    assert main(["policy", "check", str(path)]) != 0
    printed = capsys.readouterr().err
    assert re.search(rf"^{re.escape(str(path))}:\d+:\d+: {re.escape(shown)}$", printed, re.M), (
        printed
    )
