"""The schedule addresses every fault to a node, and every arm warms up to one starting
placement drawn from the seed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_app import SERVICES, replicas_of, stack_file
from chaos_schedule import MANAGERS, NODES, make_schedule, start_placement


def test_the_start_placement_is_the_seed_s_and_one_swarm_spreads_evenly() -> None:
    replicas = replicas_of("A")
    assert start_placement(101, replicas) == start_placement(101, replicas)
    drawn = [start_placement(seed, replicas) for seed in range(100, 140)]
    assert len({json.dumps(d) for d in drawn}) > 30
    for placement in drawn:
        for name, nodes in placement.items():
            assert replicas[name] % len(nodes) == 0  # an even spread is the only one
            assert set(nodes) <= set(NODES)
    # Lumpy starts are among them: every task of a service on one node.
    assert any(len(p["web"]) == 1 for p in drawn)


def test_the_warm_up_stack_keeps_each_service_to_its_nodes() -> None:
    pins = {"db": ("node-2",), "api": ("node-1", "node-4")}
    stack = json.loads(stack_file("sha256:x", "A", pins))["services"]
    assert stack["db"]["deploy"]["placement"]["constraints"] == [
        "node.hostname!=node-1", "node.hostname!=node-3", "node.hostname!=node-4"
    ]  # fmt: skip
    assert stack["api"]["deploy"]["placement"]["constraints"] == [
        "node.hostname!=node-2", "node.hostname!=node-3"
    ]  # fmt: skip
    assert "placement" not in stack["web"]["deploy"]
    plain = json.loads(stack_file("sha256:x", "A"))["services"]
    assert all("placement" not in plain[s.name]["deploy"] for s in SERVICES)


def test_a_manager_crash_names_a_manager() -> None:
    for seed in range(1, 40):
        for e in make_schedule(seed, 4.0):
            if e.kind == "crash-manager":
                assert e.node in MANAGERS
            if e.kind in ("crash", "cut", "restore", "heal"):
                assert e.node in NODES
