"""The mirror decoded once, when its value is made, and written as one patch of the
config's labels: what a bad stored value becomes, and what a write leaves."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.actions import SetMirror, describe
from controller.core.apply import apply_actions
from controller.core.mirror import (
    DOWNS_PREFIX,
    ENTRY_PREFIX,
    MOVES_PREFIX,
    OVERRIDDEN_PREFIX,
    Mirror,
    Move,
    ServiceCopy,
)

from .builders import snapshot

GOOD_COPY = ServiceCopy(labels={"swarm-placement.excluded": "n2"}, constraints=("a==b",))
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "raw",
    [
        "{not json",
        "[]",
        "null",
        '{"labels":{"a":1},"constraints":[]}',  # a label that is not text
        '{"labels":{},"constraints":[1]}',
        '{"labels":{}}',  # no constraints
        '{"labels":null,"constraints":[]}',
        DEEP,
    ],
)
def test_a_copy_that_does_not_decode_is_unreadable_with_its_reason(raw: str) -> None:
    mirror = Mirror(entries={"s-bad": raw, "s-good": GOOD_COPY.encode()})
    assert mirror.copies == {"s-good": GOOD_COPY}
    assert mirror.unreadable_copies["s-bad"].startswith("unreadable copy in the mirror: ")
    assert len(mirror.unreadable_copies["s-bad"]) < 300


@pytest.mark.parametrize(
    "raw",
    [
        '{"at":true}',  # a flag is no time
        '{"at":-1}',
        '{"at":NaN}',
        '{"at":Infinity}',
        '{"at":1e400}',
        '{"at":"1"}',
        "{}",
        '{"at":1,"left":null}',
        '{"at":1,"left":["n1"]}',  # where it left, but not when
        '{"at":1,"left":["n1"],"left-at":-3}',
        '{"at":1,"left":[1],"left-at":2}',
        DEEP,
    ],
)
def test_a_move_that_does_not_decode_is_dropped(raw: str) -> None:
    mirror = Mirror(moves={"s-bad": raw, "s-good": Move(at=5.0, left=(("n1",), 6.0)).encode()})
    assert mirror.service_moves == {"s-good": Move(at=5.0, left=(("n1",), 6.0))}


def test_a_move_reads_what_it_always_read() -> None:
    # Unknown keys, and a left-at without a left, were always ignored.
    mirror = Mirror(moves={"a": '{"at":1,"x":{"y":[2]}}', "b": '{"at":2,"left-at":"x"}'})
    assert mirror.service_moves == {"a": Move(at=1.0), "b": Move(at=2.0)}


def _patch() -> SetMirror:
    return SetMirror(
        config_id="cfg",
        version=5,
        save={
            ENTRY_PREFIX + "s-new": GOOD_COPY.encode(),
            DOWNS_PREFIX + "n3": "30.000",
            MOVES_PREFIX + "s-new": Move(at=7.0).encode(),
            OVERRIDDEN_PREFIX + "s-new": "12.000",
        },
        drop=(ENTRY_PREFIX + "s-old", DOWNS_PREFIX + "n1", OVERRIDDEN_PREFIX + "s-old"),
    )


def test_a_patch_is_applied_to_the_labels_and_read_back_by_section() -> None:
    before = Mirror(
        config_id="cfg",
        version=5,
        entries={"s-old": GOOD_COPY.encode(), "s-kept": GOOD_COPY.encode()},
        downs={"n1": "10.000", "n2": "20.000"},
        overridden={"s-old": "3.000"},
    )
    after = apply_actions(replace(snapshot([], []), mirror=before), (_patch(),)).mirror
    assert after is not None
    assert after.version == 6
    assert set(after.entries) == {"s-kept", "s-new"}
    assert after.node_downs == {"n2": (20.0,), "n3": (30.0,)}
    assert after.service_moves == {"s-new": Move(at=7.0)}
    assert dict(after.overridden) == {"s-new": "12.000"}
    assert Mirror.from_labels("cfg", 6, after.labels()) == after


def test_a_patch_is_described_by_section_as_before() -> None:
    assert describe(_patch()) == (
        "mirror: save 1 service copy(ies), drop 1; save 1 node's downs, drop 1; "
        "save 1 service's last move, drop 0; save 1 record scaled over, drop 1"
    )
    assert _patch().saved(DOWNS_PREFIX) == {"n3": "30.000"}
    assert _patch().dropped(ENTRY_PREFIX) == ("s-old",)
