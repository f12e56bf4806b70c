"""`swarm-placement policy check | schema | show`, with a fake Docker client for `show`."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from controller.adapters import docker_read, engine
from controller.cli import policy_cmd
from controller.policy import render_policy_schema

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = (
    "0 service rule(s), 0 default(s), 0 node group(s), fault domains site>rack>chassis, "
    "time zone UTC"
)


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="swarm-placement")
    policy_cmd.register(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    code: int = args.handler(args)
    return code


def test_check_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: placement/v1\n")
    assert run("policy", "check", str(path)) == 0
    out, err = capsys.readouterr()
    assert out == f"{path}: ok ({SUMMARY})\n"
    assert err == ""


def test_check_reports_every_problem_of_every_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("apiVersion: placement/v1\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: placement/v1\ndefaults: {priority: x, spread: row}\n")
    assert run("policy", "check", str(bad), str(good), str(tmp_path / "none.yaml")) == 2
    out, err = capsys.readouterr()
    assert out == f"{good}: ok ({SUMMARY})\n"
    assert err.splitlines() == [
        f'{bad}:2:22: defaults.priority = "x": expected high, medium, low, none or an integer '
        "from 0 to 3000",
        f'{bad}:2:33: defaults.spread = "row": expected a fault-domain level defined under '
        "nodes.fault-domains (site, rack, chassis), or none",
        f"{tmp_path / 'none.yaml'}: cannot read: No such file or directory",
    ]


def test_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("policy", "schema") == 0
    assert capsys.readouterr().out == render_policy_schema()


def test_policy_without_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("policy") == 2
    assert "check" in capsys.readouterr().err


class FakeApi:
    def __init__(self, services: dict[str, dict[str, Any]]) -> None:
        self.services = services

    def inspect_service(self, name: str) -> dict[str, Any]:
        if name not in self.services:
            raise docker.errors.NotFound("no such service")
        return self.services[name]


class FakeClient:
    def __init__(self, services: dict[str, dict[str, Any]]) -> None:
        self.api = FakeApi(services)
        self.closed = False

    def close(self) -> None:
        self.closed = True


SERVICES = {
    "db": {
        "ID": "svc123",
        "Spec": {
            "Name": "db",
            "Labels": {
                "placement.preferred-nodes": "node-2,node-3",
                "placement.failback": "immediate",
                "com.docker.stack.namespace": "prod",
            },
        },
    },
    "broken": {
        "ID": "svc999",
        "Spec": {"Name": "broken", "Labels": {"placement.priority": "urgent"}},
    },
}


@pytest.fixture
def fake_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "connect", lambda: FakeClient(SERVICES))
    monkeypatch.delenv("PLACEMENT_POLICY", raising=False)


def test_show_merges_file_and_labels(fake_docker: None, capsys: pytest.CaptureFixture[str]) -> None:
    policy = ROOT / "policies" / "example.yaml"
    assert run("policy", "show", "--service", "db", "--policy", str(policy)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "service db (id svc123)"
    assert out[1] == f"policy: {policy}"
    rows = {row[0]: row[1:] for row in (re.split(r"\s{2,}", line) for line in out[4:])}
    assert rows["managed"] == ["true", "file:defaults"]
    assert rows["preferred-nodes"] == ["node-2,node-3", "label placement.preferred-nodes"]
    assert rows["failback"] == ["immediate", "label placement.failback"]
    assert rows["failback-delay"] == ["30s", "file:defaults"]
    assert rows["priority"] == ["medium (2000)", "default"]


def test_show_without_a_policy_uses_the_defaults(
    fake_docker: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("policy", "show", "db") == 0
    out = capsys.readouterr().out
    assert "policy: none (built-in defaults)" in out
    assert "managed" in out and "default" in out


def test_show_reports_label_errors(fake_docker: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("policy", "show", "broken") == 1
    out, err = capsys.readouterr()
    assert "unmanaged until they are fixed" in out
    assert 'label placement.priority="urgent": expected high' in err


def test_show_unknown_service(fake_docker: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("policy", "show", "nope") == 1
    assert capsys.readouterr().err == "swarm-placement policy show: no service named 'nope'\n"


def test_show_with_a_bad_policy_file(
    fake_docker: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: nope\n")
    assert run("policy", "show", "db", "--policy", str(path)) == 2
    assert capsys.readouterr().err == f'{path}:1:13: apiVersion = "nope": expected placement/v1\n'


def test_inspect_service_labels_tolerates_missing_labels() -> None:
    client = FakeClient({"x": {"ID": "1", "Spec": {"Name": "x"}}})
    assert docker_read.inspect_service_labels(client, "x") == ("1", "x", {})


def test_check_and_schema_never_import_docker() -> None:
    code = (
        "import sys, argparse\n"
        "from controller.cli import policy_cmd\n"
        "p = argparse.ArgumentParser(); policy_cmd.register(p.add_subparsers())\n"
        "a = p.parse_args(['policy', 'check', 'policies/example.yaml']); a.handler(a)\n"
        "assert 'docker' not in sys.modules, 'docker was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True)


def test_check_reads_standard_input_for_a_dash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io  # noqa: PLC0415

    monkeypatch.setattr(sys, "stdin", io.StringIO("apiVersion: placement/v1\n"))
    assert run("policy", "check", "-") == 0
    assert capsys.readouterr().out == f"<stdin>: ok ({SUMMARY})\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO("apiVersion: placement/v1\nbogus: 1\n"))
    assert run("policy", "check", "-") == 2
    assert capsys.readouterr().err.startswith("<stdin>:2:")


def test_show_prints_the_same_settings_as_json(
    fake_docker: None, capsys: pytest.CaptureFixture[str]
) -> None:
    import json  # noqa: PLC0415

    policy = ROOT / "policies" / "example.yaml"
    assert run("policy", "show", "db", "--policy", str(policy), "-o", "json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["service"] == {"id": "svc123", "name": "db"}
    settings = {s["setting"]: (s["value"], s["source"]) for s in document["settings"]}
    assert settings["failback"] == ("immediate", "label placement.failback")
    assert document["errors"] == []
