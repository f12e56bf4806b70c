"""Converter edge cases: odd timestamps, generic resources, unreadable objects."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.adapters.attrs import (
    AttrsError,
    generic_resources_from_attrs,
    service_from_attrs,
    snapshot_from_attrs,
    timestamp_from_attrs,
)
from controller.core.model import ServiceMode


def test_nanosecond_timestamps_are_read_to_the_microsecond() -> None:
    got = timestamp_from_attrs("2026-11-30T08:00:01.123456789Z")
    want = datetime(2026, 11, 30, 8, 0, 1, 123456, tzinfo=UTC).timestamp()
    assert got == pytest.approx(want)
    assert timestamp_from_attrs("2026-11-30T08:00:01Z") == pytest.approx(want - 0.123456)
    assert timestamp_from_attrs("") == 0.0
    with pytest.raises(AttrsError):
        timestamp_from_attrs("yesterday")


def test_generic_resources_add_discrete_and_count_named() -> None:
    items = [
        {"DiscreteResourceSpec": {"Kind": "slot", "Value": 2}},
        {"DiscreteResourceSpec": {"Kind": "slot", "Value": 1}},
        {"NamedResourceSpec": {"Kind": "gpu", "Value": "GPU-0"}},
        {"NamedResourceSpec": {"Kind": "gpu", "Value": "GPU-1"}},
    ]
    assert generic_resources_from_attrs(items) == {"slot": 3, "gpu": 2}


def test_job_services_are_read_but_marked_other() -> None:
    svc = service_from_attrs(
        {"ID": "s", "Version": {"Index": 2}, "Spec": {"Name": "j", "Mode": {"ReplicatedJob": {}}}}
    )
    assert svc.mode is ServiceMode.OTHER and svc.replicas is None


def test_unreadable_service_is_recorded_not_raised() -> None:
    good = {"ID": "a", "Version": {"Index": 1}, "Spec": {"Name": "good", "Mode": {"Global": {}}}}
    bad_labels = {"ID": "b", "Version": {"Index": 1}, "Spec": {"Name": "bad", "Labels": ["x"]}}
    no_version = {"ID": "c", "Spec": {"Name": "old"}}
    snap = snapshot_from_attrs(nodes=[], services=[good, bad_labels, no_version], tasks=[])
    assert [s.name for s in snap.services] == ["good"]
    assert {(u.name, u.kind) for u in snap.unreadable} == {("bad", "service"), ("old", "service")}
    reasons = {u.name: u.reason for u in snap.unreadable}
    assert "Spec.Labels" in reasons["bad"]
    assert "Version.Index" in reasons["old"]
