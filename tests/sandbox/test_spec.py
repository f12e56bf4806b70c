"""The sandbox's pure parts: specs, parsing, naming, and the helpers teardown relies on."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from controller.sandbox import SandboxSpec, SandboxUsageError, UnknownNodeError
from controller.sandbox.host import is_static_executable
from controller.sandbox.mounts import _unescape, mounts_under, shim_socket
from controller.sandbox.samples import rack_labels, with_rack_labels
from controller.sandbox.spec import parse_duration, parse_node_assignment
from controller.sandbox.state import (
    BASE_DIR_ENV,
    allocate_subnet_index,
    netns_pattern,
    sandbox_dir,
)
from controller.sandbox.swarm import service_spec


def test_node_specs_put_managers_first_with_their_labels_and_resources() -> None:
    spec = SandboxSpec(
        name="t1",
        nodes=4,
        managers=3,
        node_labels={"node-1": {"rack": "r1"}},
        generic_resources={"node-2": {"slot": 2}},
    )
    nodes = spec.node_specs()
    assert [n.hostname for n in nodes] == ["node-1", "node-2", "node-3", "node-4"]
    assert [n.role for n in nodes] == ["manager", "manager", "manager", "worker"]
    assert nodes[0].labels == {"rack": "r1"}
    assert nodes[1].generic_resources == {"slot": 2}
    assert nodes[3].labels == {}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "Bad Name"}, "invalid sandbox name"),
        ({"name": "t", "nodes": 0}, "nodes must be"),
        ({"name": "t", "nodes": 3, "managers": 2}, "managers must be 1 or 3"),
        ({"name": "t", "nodes": 2, "managers": 3}, "need at least 3 nodes"),
        ({"name": "t", "node_labels": {"node-9": {"a": "b"}}}, "node-9"),
        ({"name": "t", "generic_resources": {"node-1": {"slot": 0}}}, "positive count"),
        ({"name": "t", "heartbeat_seconds": 0.0}, "heartbeat"),
    ],
)
def test_bad_specs_are_refused_with_a_message(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SandboxUsageError, match=message):
        SandboxSpec(**kwargs)  # type: ignore[arg-type]


def test_a_label_for_a_missing_node_is_an_unknown_node() -> None:
    with pytest.raises(UnknownNodeError):
        SandboxSpec(name="t", nodes=3, node_labels={"node-4": {"rack": "r1"}})


@pytest.mark.parametrize(
    ("text", "seconds"), [("1s", 1.0), ("500ms", 0.5), ("2m", 120.0), ("1.5", 1.5)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_bad_duration_and_assignment() -> None:
    with pytest.raises(SandboxUsageError):
        parse_duration("soon")
    with pytest.raises(SandboxUsageError, match="NODE:KEY=VALUE"):
        parse_node_assignment("node-1-rack-r1")
    assert parse_node_assignment("node-2:slot=2") == ("node-2", "slot", "2")


def test_netns_pattern_matches_only_its_own_sandbox() -> None:
    pattern = netns_pattern("t")
    assert pattern.fullmatch("sps-t-sw")
    assert pattern.fullmatch("sps-t-node-12")
    assert not pattern.fullmatch("sps-t-1-sw")
    assert not pattern.fullmatch("sps-t-node-node-1")
    assert not netns_pattern("t-1").fullmatch("sps-t-node-1")


def test_base_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(BASE_DIR_ENV, str(tmp_path))
    assert sandbox_dir("x") == tmp_path / "x"
    index = allocate_subnet_index("x")
    assert 1 <= index <= 250


def test_rack_labels_pair_nodes_and_caller_labels_win() -> None:
    assert rack_labels(3) == {
        "node-1": {"rack": "r1"},
        "node-2": {"rack": "r1"},
        "node-3": {"rack": "r2"},
    }
    merged = with_rack_labels(2, {"node-2": {"rack": "r9", "disk": "ssd"}})
    assert merged["node-2"] == {"rack": "r9", "disk": "ssd"}


def test_service_spec_runs_the_image_by_id_with_reservations_and_restart_delay() -> None:
    template = service_spec(
        image_id="sha256:abc",
        command=("sleep", "1"),
        constraints=("node.role==worker",),
        reserve_generic={"slot": 1},
        restart_delay_seconds=0.5,
        stop_grace_seconds=1.0,
    )
    assert template["ContainerSpec"] == {
        "Image": "sha256:abc",
        "Command": ["sleep", "1"],
        "StopGracePeriod": 1_000_000_000,
    }
    assert template["Placement"] == {"Constraints": ["node.role==worker"]}
    generic = template["Resources"]["Reservations"]["GenericResources"]
    assert generic == [{"DiscreteResourceSpec": {"Kind": "slot", "Value": 1}}]
    assert template["RestartPolicy"]["Delay"] == 500_000_000


def test_shim_socket_is_containerds_hash_of_address_namespace_and_id() -> None:
    sock = Path("/x/containerd.sock")
    expected = hashlib.sha256(b"/x/containerd.sock/moby/abc").hexdigest()
    assert shim_socket(sock, "abc") == Path("/run/containerd/s") / expected


def test_mountinfo_escapes_are_undone() -> None:
    assert _unescape(r"/a\040b") == "/a b"
    assert _unescape("/plain") == "/plain"


def test_mounts_under_a_fresh_directory_is_empty(tmp_path: Path) -> None:
    assert mounts_under(tmp_path) == []


def test_a_dynamically_linked_program_is_not_static() -> None:
    shell = os.path.realpath("/bin/sh")  # Debian's dash: an ELF with an interpreter
    assert Path(shell).read_bytes()[:4] == b"\x7fELF"
    assert not is_static_executable(shell)
    assert not is_static_executable(__file__)


@pytest.mark.skipif(not os.path.exists("/bin/busybox"), reason="no busybox here")
def test_busybox_static_is_static() -> None:
    assert is_static_executable(os.path.realpath("/bin/busybox"))
