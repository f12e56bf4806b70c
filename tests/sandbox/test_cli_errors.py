"""`swarm-placement sandbox` refuses bad input with one clear message and exit code 2."""

from __future__ import annotations

import pytest

from controller.cli.main import main
from controller.sandbox import Sandbox, host


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["sandbox", *argv])
    captured = capsys.readouterr()
    return code, captured.err


def test_not_root_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(host, "effective_uid", lambda: 1000)
    for argv in (("up", "--name", "nr"), ("down", "--name", "nr"), ("status", "--name", "nr")):
        code, err = _run(capsys, *argv)
        assert code == 2, argv
        assert "root" in err
        assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("program", "package"),
    [
        ("dockerd", "docker.io"),
        ("nsenter", "util-linux"),
        ("ip", "iproute2"),
        ("busybox", "busybox-static"),
        ("containerd", "containerd"),
    ],
)
def test_a_missing_program_names_its_debian_package(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    program: str,
    package: str,
) -> None:
    monkeypatch.setattr(host, "effective_uid", lambda: 0)
    real_which = host.which
    monkeypatch.setattr(host, "which", lambda name: None if name == program else real_which(name))
    code, err = _run(capsys, "up", "--name", "missing")
    assert code == 2
    assert program in err
    assert f"apt-get install {package}" in err


@pytest.mark.parametrize(
    "argv",
    [
        ("up", "--name", "Not A Name"),
        ("up", "--name", "x", "--nodes", "99"),
        ("up", "--name", "x", "--label", "node-1-rack"),
        ("up", "--name", "x", "--label", "node-7:rack=r1"),
        ("up", "--name", "x", "--resource", "node-1:slot=two"),
        ("up", "--name", "x", "--heartbeat", "soon"),
        ("status", "--name", "never-made"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    code, err = _run(capsys, *argv)
    assert code == 2
    assert err.startswith("sandbox: ")


def test_argparse_rejects_unknown_modes_and_manager_counts() -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["sandbox", "fail", "node-1", "--mode", "melt"])
    assert excinfo.value.code == 2
    with pytest.raises(SystemExit) as excinfo:
        main(["sandbox", "up", "--managers", "2"])
    assert excinfo.value.code == 2


@pytest.mark.swarm
def test_up_of_a_running_name_is_refused_and_leaves_it_running(
    swarm: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    pids = [(n.dockerd_pid, n.containerd_pid) for n in swarm.state.nodes]
    code, err = _run(capsys, "up", "--name", swarm.name)
    assert code == 2
    assert "already up" in err
    code, err = _run(capsys, "run", "--name", swarm.name, "--", "status")
    assert code == 2
    assert "already up" in err
    assert [(n.dockerd_pid, n.containerd_pid) for n in Sandbox.load(swarm.name).state.nodes] == pids
    assert all(n["state"] == "ready" for n in swarm.node_info())


@pytest.mark.swarm
def test_failing_a_node_the_sandbox_does_not_have(
    swarm: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(capsys, "fail", "node-9", "--name", swarm.name)
    assert code == 2
    assert "node-9" in err
    assert "node-1, node-2, node-3" in err
    code, err = _run(capsys, "restore", "node-0", "--name", swarm.name)
    assert code == 2
