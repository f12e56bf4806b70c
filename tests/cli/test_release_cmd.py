"""`swarm-placement release`: arguments, output and exit codes (the writes: tests/adapters)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.adapters.engine import DockerUnavailableError, NotAManagerError
from controller.cli import release_cmd
from controller.cli.main import main
from controller.core.labels import steering_constraint
from controller.core.model import Service
from tests.adapters.test_release import FakeSwarm
from tests.core.builders import node, service, snapshot


class _Client:
    def close(self) -> None:
        pass


def engine(
    monkeypatch: pytest.MonkeyPatch, *services: Service, leases: tuple[str, ...] = ()
) -> FakeSwarm:
    swarm = FakeSwarm(snapshot([node(1, manager=True)], services))
    monkeypatch.setattr(release_cmd, "connect", _Client)
    monkeypatch.setattr(release_cmd, "live_leases", lambda client, now: list(leases))
    monkeypatch.setattr(release_cmd, "check_manager", lambda client: None)
    monkeypatch.setattr(release_cmd, "DockerSwarm", lambda client: swarm)
    return swarm


WEB = service(
    "web",
    labels={"placement.managed": "false", "swarm-placement.adopted": "true"},
    constraints=[steering_constraint("web")],
)


def test_release_prints_one_line_per_write_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    swarm = engine(monkeypatch, WEB)
    assert main(["release", "web"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("[release] service web: release - ")
    assert swarm.service("web").constraints == ()
    assert main(["release", "web"]) == 0  # nothing left to take back
    assert capsys.readouterr().out == "release: nothing of the controller's on service web\n"


def test_dry_run_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    swarm = engine(monkeypatch, WEB)
    assert main(["release", "--all", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("dry run: [release] service web: release")
    assert swarm.written == []


def test_something_left_behind_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine(
        monkeypatch,
        service("web", constraints=[steering_constraint("web")], update_state="updating"),
    )
    assert main(["release", "web"]) == 1
    captured = capsys.readouterr()
    assert "service web: wait" in captured.out
    assert "not everything was released" in captured.err


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["release"], 2), (["release", "web", "--all"], 2)],
)
def test_a_service_or_all_and_not_both(argv: list[str], code: int) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == code


def test_an_unknown_service_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine(monkeypatch)
    assert main(["release", "nope"]) == 2
    assert "no service named 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("error", "code"),
    [(NotAManagerError("a swarm worker"), 2), (DockerUnavailableError("cannot reach"), 1)],
)
def test_engine_trouble(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: Exception,
    code: int,
) -> None:
    def fail(*args: Any) -> None:
        raise error

    monkeypatch.setattr(release_cmd, "connect", _Client)
    monkeypatch.setattr(release_cmd, "check_manager", fail)
    assert main(["release", "--all"]) == code
    assert str(error) in capsys.readouterr().err


def test_all_refuses_while_a_controller_holds_its_lease(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    swarm = engine(monkeypatch, WEB, leases=("config p-lease: held by a",))
    assert main(["release", "--all"]) == 1
    assert "remove its stack first" in capsys.readouterr().err
    assert swarm.written == []
    assert main(["release", "--all", "--dry-run"]) == 0  # looking is fine
    assert main(["release", "web"]) == 0  # one service: the operator's call, with a note
    assert "a controller holds a lease" in capsys.readouterr().err
