"""Shared real-swarm fixtures.

`swarm` is one 3-node sandbox swarm for the whole session (node-1 the manager, heartbeat
1 s, racks r1/r1/r2 as node labels, `slot=2` generic resources on every node). Tests that
need another shape use `make_sandbox(...)`, which removes its sandboxes after the test.
Tests on a real swarm are marked `@pytest.mark.swarm`.

Without root or the programs the sandbox runs, these tests skip with the reason; with
`CI=true` they fail instead, so a CI run cannot pass without having run them. When the
session ends, every sandbox it made must have left nothing behind (processes, mounts,
namespaces, links, cgroups, files), or the session fails. Sandboxes of sessions that died
(`t-<pid>` with no such process) are removed before the first one is made.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.sandbox import Sandbox, SandboxSpec, find_leftovers, teardown_sandbox
from controller.sandbox.host import check_host
from controller.sandbox.processes import is_running
from controller.sandbox.spec import HostNotReadyError
from controller.sandbox.state import sandbox_names

SESSION_SANDBOXES: list[str] = []
_counter = itertools.count(1)

SWARM_LABELS = {"node-1": {"rack": "r1"}, "node-2": {"rack": "r1"}, "node-3": {"rack": "r2"}}
SWARM_RESOURCES = {f"node-{i}": {"slot": 2} for i in (1, 2, 3)}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def require_swarm_host() -> None:
    """Skip (or, in CI, fail) when this host cannot run a sandbox swarm."""
    try:
        tools = check_host()
    except HostNotReadyError as exc:
        if in_ci():
            pytest.fail(f"CI must run the real-swarm tests, but: {exc}", pytrace=False)
        pytest.skip(f"no sandbox swarm here: {exc}")
    _check_engine(tools.dockerd)
    _remove_orphaned_test_sandboxes()


def _check_engine(dockerd: str) -> None:
    """With PLACEMENT_EXPECT_ENGINE (`./dev test`'s second-engine run), the sandbox must
    run that dockerd version: a PATH that fell back to the system's would prove nothing."""
    expected = os.environ.get("PLACEMENT_EXPECT_ENGINE")
    if not expected:
        return
    out = subprocess.run([dockerd, "--version"], capture_output=True, text=True, check=False)
    if f"version {expected}" not in out.stdout:
        pytest.fail(f"expected dockerd {expected}, but {dockerd} is {out.stdout.strip()!r}")


def _engine_of(sandbox: Sandbox) -> str:
    client = sandbox.client()
    try:
        return str(client.version()["Version"])
    finally:
        client.close()


_orphans_checked = False


def _remove_orphaned_test_sandboxes() -> None:
    """Remove `t-<pid>...` sandboxes whose test session is gone (killed, say, mid-run)."""
    global _orphans_checked  # noqa: PLW0603
    if _orphans_checked:
        return
    _orphans_checked = True
    for name in sandbox_names():
        match = re.fullmatch(r"t-([0-9]+)(-.*)?", name)
        if match and not is_running(int(match.group(1))):
            teardown_sandbox(name)


def sandbox_name(tag: str = "") -> str:
    """A fresh sandbox name for this session: `t-<pid>` plus a counter."""
    name = f"t-{os.getpid()}" + (f"-{tag}{next(_counter)}" if tag else "")
    SESSION_SANDBOXES.append(name)
    return name


@pytest.fixture(scope="session")
def swarm() -> Iterator[Sandbox]:
    """One 3-node sandbox swarm shared by the session."""
    require_swarm_host()
    spec = SandboxSpec(
        name=sandbox_name(),
        nodes=3,
        managers=1,
        node_labels=SWARM_LABELS,
        generic_resources=SWARM_RESOURCES,
        heartbeat_seconds=1.0,
    )
    sandbox = Sandbox.up(spec)
    try:
        expected = os.environ.get("PLACEMENT_EXPECT_ENGINE")
        assert not expected or _engine_of(sandbox).startswith(expected), _engine_of(sandbox)
        yield sandbox
    finally:
        sandbox.down()


MakeSandbox = Callable[..., Sandbox]


@pytest.fixture
def new_sandbox_name() -> Iterator[Callable[[str], str]]:
    """Names for sandboxes a test brings up itself; each is torn down after the test."""
    require_swarm_host()
    made: list[str] = []

    def new(tag: str) -> str:
        name = sandbox_name(tag)
        made.append(name)
        return name

    yield new
    for name in made:
        teardown_sandbox(name)


@pytest.fixture
def make_sandbox() -> Iterator[MakeSandbox]:
    """Factory for sandboxes of other shapes: `make_sandbox(nodes=8, managers=3, ...)`.

    Keyword arguments are those of SandboxSpec except `name`; each sandbox is removed
    when the test ends, and its removal must leave nothing.
    """
    require_swarm_host()
    made: list[str] = []

    def make(**kwargs: Any) -> Sandbox:
        kwargs.setdefault("heartbeat_seconds", 1.0)
        name = sandbox_name("s")
        made.append(name)
        return Sandbox.up(SandboxSpec(name=name, **kwargs))

    yield make
    problems = []
    for name in made:
        left = teardown_sandbox(name)
        if left:
            problems.append(f"{name}: {left.describe()}")
    assert not problems, f"sandbox teardown left things behind: {problems}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every sandbox of the session must be gone without a trace."""
    leaks = []
    for name in SESSION_SANDBOXES:
        left = find_leftovers(name)
        if left:
            leaks.append(f"{name}: {left.describe()}")
            teardown_sandbox(name)
    if leaks:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "sandbox leak check failed: " + "; ".join(leaks)
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
