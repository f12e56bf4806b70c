"""PLACEMENT_* variables behind the command-line options: read, converted and refused
like the options themselves, and only by the command that has them."""

from __future__ import annotations

import argparse

import pytest

from controller.cli.main import main
from controller.cli.run_cmd import register as register_run


def parse_run(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="swarm-placement")
    register_run(parser.add_subparsers())
    return parser.parse_args(["run", *argv])


def test_variables_fill_in_for_options_and_options_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLACEMENT_AGENT_PORT", "9999")
    monkeypatch.setenv("PLACEMENT_DRY_RUN", "yes")
    monkeypatch.setenv("PLACEMENT_TRACE_EXPORTER", "console")
    monkeypatch.setenv("PLACEMENT_LEASE_LIFETIME", "6")
    args = parse_run()
    assert (args.agent_port, args.dry_run, args.trace_exporter) == (9999, True, "console")
    assert args.lease_lifetime == 6.0
    args = parse_run("--agent-port", "1234", "--trace-exporter", "otlp")
    assert (args.agent_port, args.trace_exporter) == (1234, "otlp")
    monkeypatch.setenv("PLACEMENT_DRY_RUN", "off")
    assert parse_run().dry_run is False
    assert parse_run("--dry-run").dry_run is True


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("PLACEMENT_AGENT_PORT", "abc", "argument --agent-port: expected a port number, got 'abc'"),
        ("PLACEMENT_DRY_RUN", "treu", "$PLACEMENT_DRY_RUN='treu': expected true or false"),
        ("PLACEMENT_TRACE_EXPORTER", "jaeger", "expected none or console or otlp, got 'jaeger'"),
        ("PLACEMENT_RESYNC", "soon", "argument --resync: expected seconds, got 'soon'"),
    ],
)
def test_a_bad_variable_stops_its_command_with_a_message_naming_it(
    variable: str,
    value: str,
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as exited:
        main(["run", "--once"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert says in err and variable in err


def test_a_bad_variable_of_one_command_leaves_the_others_alone(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PLACEMENT_AGENT_PORT", "abc")
    monkeypatch.setenv("PLACEMENT_AGENT_USAGE", "proc")
    assert main(["policy", "schema"]) == 0
    assert '"apiVersion"' in capsys.readouterr().out
