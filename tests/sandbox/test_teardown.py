"""Teardown leaves nothing: no process, mount, namespace, link, cgroup or file of the sandbox.

The checks here read the host directly (/proc, /proc/mounts, /run/netns, `ip link`, the
cgroup hierarchies) rather than trusting the sandbox's own bookkeeping.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.sandbox import (
    Sandbox,
    SandboxError,
    SandboxExistsError,
    SandboxSpec,
    find_leftovers,
    teardown_sandbox,
)
from controller.sandbox import (
    swarm as swarm_module,
)
from controller.sandbox.mounts import shim_socket
from controller.sandbox.state import sandbox_dir

pytestmark = pytest.mark.swarm
MakeSandbox = Callable[..., Sandbox]


def _root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    return {line.split(":", 2)[1].strip() for line in out.stdout.splitlines()}


def _shim_sockets(sandbox: Sandbox) -> set[Path]:
    """The containerd shim sockets of the sandbox's containers (they live in /run)."""
    sockets = set()
    for node in sandbox.state.nodes:
        containers = node.path / "data" / "containers"
        for entry in containers.iterdir() if containers.is_dir() else []:
            sockets.add(shim_socket(node.containerd_socket, entry.name))
    return sockets


def assert_nothing_left(name: str, links_before: set[str], shim_sockets: set[Path]) -> None:
    directory = str(sandbox_dir(name)) + "/"
    cgroup = f"swarm-placement-{name}"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            cgroups = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        assert directory.encode() not in cmdline, f"process {pid} left: {cmdline!r}"
        assert f"/{cgroup}/" not in cgroups, f"process {pid} left in the cgroup"
    mounts = Path("/proc/mounts").read_text()
    assert directory not in mounts
    netns = os.listdir("/run/netns") if os.path.isdir("/run/netns") else []
    assert not [n for n in netns if n.startswith(f"sps-{name}-")]
    assert _root_links() <= links_before
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{cgroup}"))
    assert not Path("/sys/fs/cgroup", cgroup).exists()
    assert not sandbox_dir(name).exists()
    assert not [sock for sock in shim_sockets if sock.exists()]
    assert not find_leftovers(name)


def test_down_after_a_crash_and_a_partition_leaves_nothing(make_sandbox: MakeSandbox) -> None:
    links_before = _root_links()
    sandbox = make_sandbox(nodes=3)
    sandbox.create_service("sbx-leak", replicas=3)
    sandbox.wait_services_running(["sbx-leak"])
    # A SIGKILLed dockerd leaves its containerd, shims and containers running.
    sandbox.fail("node-2", "crash")
    sandbox.fail("node-3", "partition")
    assert Path("/proc/mounts").read_text().count(str(sandbox_dir(sandbox.name))) > 0
    shim_sockets = _shim_sockets(sandbox)
    assert [sock for sock in shim_sockets if sock.exists()]
    sandbox.down()
    assert_nothing_left(sandbox.name, links_before, shim_sockets)
    # Idempotent: a second teardown finds nothing and fails on nothing.
    assert not teardown_sandbox(sandbox.name)


def test_an_up_that_fails_half_way_removes_what_it_made(
    monkeypatch: pytest.MonkeyPatch,
    new_sandbox_name: Callable[[str], str],
) -> None:
    links_before = _root_links()

    def broken(state: object) -> None:
        raise SandboxError("join refused (injected)")

    monkeypatch.setattr(swarm_module, "form_swarm", broken)
    name = new_sandbox_name("half")
    with pytest.raises(SandboxError, match="injected"):
        Sandbox.up(SandboxSpec(name=name, nodes=2))
    assert_nothing_left(name, links_before, set())


def test_up_refuses_a_name_in_use_and_keeps_the_running_one(swarm: Sandbox) -> None:
    before = [(n.dockerd_pid, n.containerd_pid) for n in swarm.state.nodes]
    with pytest.raises(SandboxExistsError, match="already up"):
        Sandbox.up(SandboxSpec(name=swarm.name, nodes=1))
    after = [(n.dockerd_pid, n.containerd_pid) for n in Sandbox.load(swarm.name).state.nodes]
    assert after == before
    assert all(n["state"] == "ready" for n in swarm.node_info())
