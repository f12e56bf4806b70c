"""The chaos protocol: the registered triples, their arms, and the page that states them."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import chaos_protocol as protocol

PAGE = Path(__file__).resolve().parents[2] / "bench" / "chaos-protocol.md"


def test_each_triple_runs_swarm_alone_twice_and_the_controller_once() -> None:
    triples = protocol.registered()
    assert [t.seed for t in triples] == list(protocol.SEEDS)
    assert all(sorted(t.order) == sorted(protocol.ARMS) for t in triples)
    assert [t.arm(label) for label in protocol.ARMS for t in triples[:1]] == [
        "alone", "controller", "alone"]  # fmt: skip
    assert len({t.id for t in triples}) == len(triples)


def test_which_arm_starts_its_process_first_goes_round() -> None:
    first = Counter(t.order[0] for t in protocol.registered())
    assert set(first) == set(protocol.ARMS)
    assert max(first.values()) - min(first.values()) <= 1


def test_the_page_lists_the_registered_triples_and_the_constants() -> None:
    page = PAGE.read_text()
    assert protocol.registry_table() in page
    assert f"`{protocol.NAME}`" in page
    assert f"{protocol.MINUTES:g}-minute" in page
    assert f"log((controller + {protocol.OFFSET:g}) / (alone + {protocol.OFFSET:g}))" in page
