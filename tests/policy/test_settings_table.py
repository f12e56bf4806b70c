"""Every per-service setting, good and bad, as a label and in the file."""

from __future__ import annotations

from typing import Any

import pytest

from controller.adapters.policy_file import PolicyFileError, load_policy_text
from controller.policy import (
    SETTING_NAMES,
    AntiAffinityMode,
    DataMode,
    FailbackMode,
    FailbackWindow,
    FailoverMode,
    FailoverThreshold,
    Policy,
    resolve_service,
)

# (setting, label value, expected ServiceSettings fields)
GOOD: list[tuple[str, str, dict[str, Any]]] = [
    ("managed", "true", {"managed": True}),
    ("managed", "YES", {"managed": True}),
    ("managed", "On", {"managed": True}),
    ("managed", "false", {"managed": False}),
    ("managed", "no", {"managed": False}),
    ("managed", "OFF", {"managed": False}),
    ("priority", "high", {"priority": 3000}),
    ("priority", "Medium", {"priority": 2000}),
    ("priority", "low", {"priority": 1000}),
    ("priority", "none", {"priority": 0}),
    ("priority", "2500", {"priority": 2500}),
    ("priority", "0", {"priority": 0}),
    ("priority", "3000", {"priority": 3000}),
    ("preferred-nodes", "node-2,node-3", {"preferred_nodes": ("node-2", "node-3")}),
    ("preferred-nodes", " node-3 , node-2 ", {"preferred_nodes": ("node-3", "node-2")}),
    ("preferred-nodes", "", {"preferred_nodes": ()}),
    (
        "preferred-nodes",
        "k3x9abcdefghijklmnopqrstu",
        {"preferred_nodes": ("k3x9abcdefghijklmnopqrstu",)},
    ),
    ("possible-nodes", "storage", {"possible_nodes": ("storage",)}),
    ("possible-nodes", "a.example.com,b_2", {"possible_nodes": ("a.example.com", "b_2")}),
    ("failback", "never", {"failback": FailbackMode.NEVER, "failback_window": None}),
    ("failback", "Immediate", {"failback": FailbackMode.IMMEDIATE, "failback_window": None}),
    (
        "failback",
        "window 22:00-06:00",
        {"failback": FailbackMode.WINDOW, "failback_window": FailbackWindow(1320, 360)},
    ),
    (
        "failback",
        "WINDOW 1:05 - 5:30",
        {"failback": FailbackMode.WINDOW, "failback_window": FailbackWindow(65, 330)},
    ),
    ("failback-delay", "30s", {"failback_delay_seconds": 30.0}),
    ("failback-delay", "10m", {"failback_delay_seconds": 600.0}),
    ("failback-delay", "2h", {"failback_delay_seconds": 7200.0}),
    ("failback-delay", "1h30m", {"failback_delay_seconds": 5400.0}),
    ("failback-delay", "1.5h", {"failback_delay_seconds": 5400.0}),
    ("failback-delay", "0s", {"failback_delay_seconds": 0.0}),
    ("anti-affinity", "frontend", {"anti_affinity": ("frontend",)}),
    ("anti-affinity", "frontend,cache", {"anti_affinity": ("frontend", "cache")}),
    ("anti-affinity-mode", "hard", {"anti_affinity_mode": AntiAffinityMode.HARD}),
    ("anti-affinity-mode", "SOFT", {"anti_affinity_mode": AntiAffinityMode.SOFT}),
    ("spread", "rack", {"spread": "rack"}),
    ("spread", "site", {"spread": "site"}),
    ("spread", "none", {"spread": None}),
    ("preemptible", "no", {"preemptible": False}),
    ("preemptible", "yes", {"preemptible": True}),
    ("max-unavailable", "0", {"max_unavailable": 0}),
    ("max-unavailable", "3", {"max_unavailable": 3}),
    ("failover-threshold", "3/10m", {"failover_threshold": FailoverThreshold(3, 600.0)}),
    ("failover-threshold", "1/30s", {"failover_threshold": FailoverThreshold(1, 30.0)}),
    ("failover-threshold", "5 / 1h", {"failover_threshold": FailoverThreshold(5, 3600.0)}),
    ("failover-threshold", "none", {"failover_threshold": None}),
    ("rebalance", "on", {"rebalance": True}),
    ("rebalance", "off", {"rebalance": False}),
    ("failover-mode", "speculative", {"failover_mode": FailoverMode.SPECULATIVE}),
    ("failover-mode", "Confirmed", {"failover_mode": FailoverMode.CONFIRMED}),
    ("failover-mode", "auto", {"failover_mode": FailoverMode.AUTO}),
    ("data", "shared", {"data": DataMode.SHARED}),
    ("data", "Local", {"data": DataMode.LOCAL}),
    ("data", "auto", {"data": DataMode.AUTO}),
]

# (setting, label value, start of what was expected)
BAD: list[tuple[str, str, str]] = [
    ("managed", "maybe", "expected true/false, yes/no or on/off"),
    ("managed", "1", "expected true/false"),
    ("managed", "", "expected true/false"),
    ("priority", "urgent", "expected high, medium, low, none or an integer from 0 to 3000"),
    ("priority", "3001", "expected high, medium"),
    ("priority", "-1", "expected high, medium"),
    ("priority", "1.5", "expected high, medium"),
    ("preferred-nodes", "a,,b", "expected a list of names"),
    (
        "preferred-nodes",
        "a,a",
        "expected a list of names (in a label: comma-separated, e.g. node-2,node-3); 'a' is "
        "listed twice",
    ),
    ("preferred-nodes", "bad name", "expected a list of names"),
    ("possible-nodes", "-leading", "expected a list of names"),
    ("failback", "sometimes", "expected never, immediate or window HH:MM-HH:MM"),
    ("failback", "window 22:00-22:00", "expected never, immediate or window"),
    ("failback", "window 24:00-01:00", "expected never, immediate or window"),
    ("failback", "window 10:60-11:00", "expected never, immediate or window"),
    ("failback", "window", "expected never, immediate or window"),
    ("failback-delay", "30", "expected a duration such as 30s, 10m, 2h or 1h30m"),
    ("failback-delay", "-5s", "expected a duration"),
    ("failback-delay", "10d", "expected a duration"),
    ("failback-delay", "5m1h", "expected a duration"),
    ("failback-delay", "s", "expected a duration"),
    ("anti-affinity", "a b", "expected a list of names"),
    ("anti-affinity-mode", "strict", "expected soft or hard"),
    (
        "spread",
        "row",
        "expected a fault-domain level defined under nodes.fault-domains (site, rack, chassis), "
        "or none",
    ),
    ("spread", "", "expected a fault-domain level"),
    ("preemptible", "perhaps", "expected true/false"),
    ("max-unavailable", "-1", "expected an integer of at least 0"),
    ("max-unavailable", "one", "expected an integer of at least 0"),
    ("failover-threshold", "3", "expected FAILURES/PERIOD such as 3/10m"),
    ("failover-threshold", "0/10m", "expected FAILURES/PERIOD"),
    ("failover-threshold", "3/10", "expected FAILURES/PERIOD"),
    ("failover-threshold", "3/0s", "expected FAILURES/PERIOD"),
    ("rebalance", "sometimes", "expected true/false"),
    ("failover-mode", "eager", "expected confirmed, speculative or auto"),
    ("data", "nfs", "expected auto, local or shared"),
    ("data", "", "expected auto, local or shared"),
]

# (setting, YAML value as written in the file, expected fields): native YAML forms.
FILE_NATIVE: list[tuple[str, str, dict[str, Any]]] = [
    ("managed", "true", {"managed": True}),
    ("managed", "yes", {"managed": True}),  # YAML 1.2: a string, read as a boolean word
    ("priority", "2500", {"priority": 2500}),
    ("preferred-nodes", "[node-2, node-3]", {"preferred_nodes": ("node-2", "node-3")}),
    ("preferred-nodes", "[]", {"preferred_nodes": ()}),
    ("preferred-nodes", "node-2, node-3", {"preferred_nodes": ("node-2", "node-3")}),
    ("failback-delay", "30", {"failback_delay_seconds": 30.0}),
    ("failback-delay", "2.5", {"failback_delay_seconds": 2.5}),
    ("failback-delay", "0", {"failback_delay_seconds": 0.0}),
    ("max-unavailable", "2", {"max_unavailable": 2}),
    ("anti-affinity", "[frontend]", {"anti_affinity": ("frontend",)}),
    ("failback", "window 22:00-06:00", {"failback_window": FailbackWindow(1320, 360)}),
]

FILE_NATIVE_BAD: list[tuple[str, str, str]] = [
    ("managed", "1", "expected true/false"),
    ("managed", "", "expected true/false"),  # null
    ("priority", "1.5", "expected high, medium"),
    ("priority", "true", "expected high, medium"),
    ("preferred-nodes", "{a: 1}", "expected a list of names"),
    ("preferred-nodes", "[a, [b]]", "expected a list of names"),
    ("failback-delay", "-1", "expected a duration"),
    ("failback-delay", ".inf", "expected a duration"),
    ("failback-delay", "true", "expected a duration"),
    ("max-unavailable", "true", "expected an integer of at least 0"),
    ("max-unavailable", "1.0", "expected an integer of at least 0"),
    ("spread", "5", "expected a fault-domain level"),
    ("failover-threshold", "3", "expected FAILURES/PERIOD"),
    ("data", "true", "expected auto, local or shared"),
    ("data", "[local]", "expected auto, local or shared"),
]


def _from_label(setting: str, value: str) -> Any:
    return resolve_service(
        Policy.default(),
        service_name="svc",
        service_id="id-1",
        labels={f"placement.{setting}": value},
    )


def _from_file(setting: str, yaml_value: str) -> Any:
    text = f"apiVersion: placement/v1\ndefaults:\n  {setting}: {yaml_value}\n"
    policy = load_policy_text(text, source="p.yaml")
    return resolve_service(policy, service_name="svc", service_id="id-1", labels={})


def test_tables_cover_every_setting() -> None:
    assert {row[0] for row in GOOD} == set(SETTING_NAMES)
    assert {row[0] for row in BAD} | {"possible-nodes"} >= set(SETTING_NAMES)


@pytest.mark.parametrize(("setting", "value", "expected"), GOOD)
def test_good_label(setting: str, value: str, expected: dict[str, Any]) -> None:
    resolved = _from_label(setting, value)
    assert resolved.errors == ()
    for field, want in expected.items():
        assert getattr(resolved.settings, field) == want
        assert resolved.sources[field] == f"label placement.{setting}"


@pytest.mark.parametrize(("setting", "value", "expected"), GOOD)
def test_good_value_as_quoted_file_string(
    setting: str, value: str, expected: dict[str, Any]
) -> None:
    quoted = '"' + value + '"'
    resolved = _from_file(setting, quoted)
    for field, want in expected.items():
        assert getattr(resolved.settings, field) == want
        assert resolved.sources[field] == "file:defaults"


@pytest.mark.parametrize(("setting", "value", "expected"), BAD)
def test_bad_label(setting: str, value: str, expected: str) -> None:
    resolved = _from_label(setting, value)
    assert len(resolved.errors) == 1
    prefix = f'service svc: label placement.{setting}="{value}": '
    assert resolved.errors[0].startswith(prefix + expected), resolved.errors[0]


@pytest.mark.parametrize(("setting", "value", "expected"), BAD)
def test_bad_value_as_quoted_file_string(setting: str, value: str, expected: str) -> None:
    with pytest.raises(PolicyFileError) as caught:
        _from_file(setting, '"' + value + '"')
    [error] = caught.value.errors
    assert error.startswith(
        f'p.yaml:3:{len(setting) + 5}: defaults.{setting} = "{value}": {expected}'
    )


@pytest.mark.parametrize(("setting", "yaml_value", "expected"), FILE_NATIVE)
def test_good_native_file_value(setting: str, yaml_value: str, expected: dict[str, Any]) -> None:
    resolved = _from_file(setting, yaml_value)
    for field, want in expected.items():
        assert getattr(resolved.settings, field) == want


@pytest.mark.parametrize(("setting", "yaml_value", "expected"), FILE_NATIVE_BAD)
def test_bad_native_file_value(setting: str, yaml_value: str, expected: str) -> None:
    with pytest.raises(PolicyFileError) as caught:
        _from_file(setting, yaml_value)
    [error] = caught.value.errors
    assert error.startswith("p.yaml:3:"), error
    assert f"defaults.{setting} = " in error and f": {expected}" in error, error


def test_spread_checks_levels_declared_in_the_same_file() -> None:
    text = (
        "apiVersion: placement/v1\n"
        "defaults: {spread: row}\n"
        "nodes:\n"
        "  fault-domains: {room: room-label, row: row-label}\n"
    )
    policy = load_policy_text(text)
    assert policy.fault_domain_levels == ("room", "row")
    resolved = resolve_service(policy, service_name="s", service_id="i", labels={})
    assert resolved.settings.spread == "row"
    bad = resolve_service(
        policy, service_name="s", service_id="i", labels={"placement.spread": "rack"}
    )
    assert "(room, row)" in bad.errors[0]
