"""The chaos protocol: the registered pairs, their orders, and the page that states them."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import chaos_protocol as protocol

PAGE = Path(__file__).resolve().parents[2] / "bench" / "chaos-protocol.md"


def test_sixteen_a_b_pairs_each_with_a_dry_run_arm_and_eight_a_a_pairs() -> None:
    pairs = protocol.registered()
    ab = [p for p in pairs if p.kind == "AB"]
    aa = [p for p in pairs if p.kind == "AA"]
    assert [p.seed for p in ab] == list(protocol.AB_SEEDS) and len(ab) >= 16
    assert [p.seed for p in aa] == list(protocol.AA_SEEDS)
    assert all(sorted(p.order) == ["alone", "controller", "dry-run"] for p in ab)
    assert all(p.order == ("first", "second") for p in aa)
    assert len({p.id for p in pairs}) == len(pairs)


def test_the_a_b_order_alternates_abba_and_the_dry_run_arm_moves_round() -> None:
    ab = [p for p in protocol.registered() if p.kind == "AB"]
    a_first = [p.order.index("alone") < p.order.index("controller") for p in ab]
    assert a_first[:8] == [True, False, False, True, True, False, False, True]
    assert a_first.count(True) == a_first.count(False)
    where = Counter(p.order.index("dry-run") for p in ab)
    assert max(where.values()) - min(where.values()) <= 1


def test_the_page_lists_the_registered_pairs_and_the_constants() -> None:
    page = PAGE.read_text()
    assert protocol.registry_table() in page
    assert f"`{protocol.NAME}`" in page
    assert f"{protocol.MINUTES:g} minutes" in page
    assert f"log((controller + {protocol.OFFSET:g}) / (alone + {protocol.OFFSET:g}))" in page
