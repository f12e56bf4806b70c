"""The file loader: exact error lines, all problems at once, positions, change detection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from controller.adapters.policy_file import (
    PolicyFileError,
    load_policy_file,
    load_policy_text,
    policy_file_changed,
)
from controller.policy import (
    Budgets,
    ControllerSettings,
    NodeGroup,
    QuarantineSettings,
    RebalanceMode,
    SteeringMode,
)

MANY_PROBLEMS = """\
apiVersion: placement/v2
defaults:
  managed: maybe
  prio: high
services:
  - match: {name: "db*"}
    priority: urgent
    failback: window 25:00-06:00
  - match: {}
    spread: row
  - priority: low
nodes:
  fault-domains: {site: site, rack: rack}
  groups:
    fast: {}
  quarantine:
    max-fraction: 2
controller:
  timezone: Mars/Olympus
  budgets: {actions-per-cycle: -1}
  resync-interval: 0
  colour: blue
"""


def errors_of(text: str, source: str = "policy.yaml") -> list[str]:
    with pytest.raises(PolicyFileError) as caught:
        load_policy_text(text, source=source)
    return caught.value.errors


def test_all_problems_at_once_in_file_order() -> None:
    assert errors_of(MANY_PROBLEMS) == [
        'policy.yaml:1:13: apiVersion = "placement/v2": expected placement/v1',
        'policy.yaml:3:12: defaults.managed = "maybe": expected true/false, yes/no or on/off',
        'policy.yaml:4:3: defaults.prio = "high": unknown field; did you mean priority?',
        'policy.yaml:7:15: services[0].priority = "urgent": expected high, medium, low, none '
        "or an integer from 0 to 3000",
        'policy.yaml:8:15: services[0].failback = "window 25:00-06:00": expected never, '
        "immediate or window HH:MM-HH:MM (24-hour times, start and end different)",
        "policy.yaml:9:12: services[1].match = {}: expected at least one of name, stack or "
        "labels (settings for every service belong in defaults)",
        'policy.yaml:10:13: services[1].spread = "row": expected a fault-domain level defined '
        "under nodes.fault-domains (site, rack), or none",
        "policy.yaml:11:5: services[2].match: missing; this field is required",
        "policy.yaml:15:11: nodes.groups.fast = {}: expected hostnames or labels to select the "
        "member nodes",
        "policy.yaml:17:19: nodes.quarantine.max-fraction = 2: expected a fraction above 0 and "
        "at most 1, such as 0.25 or 25%",
        'policy.yaml:19:13: controller.timezone = "Mars/Olympus": expected an IANA time zone '
        "name such as UTC or Europe/Paris",
        "policy.yaml:20:32: controller.budgets.actions-per-cycle = -1: expected an integer of "
        "at least 0",
        "policy.yaml:21:20: controller.resync-interval = 0: expected a duration above zero, "
        "such as 30s, 10m, 2h or 1h30m (plain numbers in the file: seconds)",
        'policy.yaml:22:3: controller.colour = "blue": unknown field; expected one of: budgets, '
        "resync-interval, rebalance-mode, rebalance-interval, aggressiveness, move-cooldown, "
        "steering, steering-max-exclusions, preemption-gap, health-panic-threshold, suspect-after, "
        "timezone",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ["p.yaml:1:1: the file is empty; expected a mapping with apiVersion: placement/v1"]),
        (
            "# only a comment\n",
            ["p.yaml:1:1: the file is empty; expected a mapping with apiVersion: placement/v1"],
        ),
        (
            "defaults: {}\n",
            ["p.yaml:1:1: apiVersion: missing; this field is required (apiVersion: placement/v1)"],
        ),
        (
            "- apiVersion: placement/v1\n",
            [
                'p.yaml:1:1: (document) = [{"apiVersion": "placement/v1"}]: expected a mapping '
                "with apiVersion: placement/v1"
            ],
        ),
        ("apiVersion: 1\n", ["p.yaml:1:13: apiVersion = 1: expected placement/v1"]),
        (
            "apiVersion: placement/v1\nextra: 1\n",
            [
                "p.yaml:2:1: extra = 1: unknown field; expected one of: apiVersion, defaults, "
                "services, nodes, controller"
            ],
        ),
        (
            "apiVersion: placement/v1\nservice: []\n",
            ["p.yaml:2:1: service = []: unknown field; did you mean services?"],
        ),
        (
            "apiVersion: placement/v1\nservices: {a: 1}\n",
            ['p.yaml:2:11: services = {"a": 1}: expected a list'],
        ),
        (
            "apiVersion: placement/v1\ncontroller: 5\n",
            ["p.yaml:2:13: controller = 5: expected a mapping"],
        ),
        (
            "apiVersion: placement/v1\nnodes:\n  groups:\n    g1: {hostnames: [a], labels: {gpu: "
            "true}}\n",
            [
                "p.yaml:4:40: nodes.groups.g1.labels.gpu = true: expected a string (quote values "
                'such as "true" or "1")'
            ],
        ),
        (
            "apiVersion: placement/v1\nnodes: {fault-domains: {a: x, b: x}}\n",
            [
                'p.yaml:2:24: nodes.fault-domains = {"a": "x", "b": "x"}: expected each level to '
                "read a different node label"
            ],
        ),
        (
            "apiVersion: placement/v1\ndefaults:\n  priority:\n",
            [
                "p.yaml:3:3: defaults.priority = null: expected high, medium, low, none or an "
                "integer from 0 to 3000 (high=3000, medium=2000, low=1000, none=0)"
            ],
        ),
        (
            "apiVersion: placement/v1\ndefaults: {managed: 2001-12-14}\n",
            ["p.yaml:2:21: defaults.managed = <date>: expected true/false, yes/no or on/off"],
        ),
    ],
)
def test_exact_messages(text: str, expected: list[str]) -> None:
    assert errors_of(text, "p.yaml") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "apiVersion: placement/v1\ndefaults: {a: [\n",
            "p.yaml:3:1: YAML syntax error: while parsing a flow node: expected the node content, "
            "but found '<stream end>'",
        ),
        (
            "apiVersion: placement/v1\napiVersion: placement/v1\n",
            "p.yaml:2:1: YAML syntax error: while constructing a mapping: found duplicate key "
            '"apiVersion" with value "placement/v1" (original value: "placement/v1")',
        ),
        (
            "apiVersion: placement/v1\n  bad: indent\n",
            "p.yaml:2:6: YAML syntax error: mapping values are not allowed here",
        ),
        ("a: *nowhere\n", "p.yaml:1:4: YAML syntax error: found undefined alias 'nowhere'"),
        (
            "a: 1\n---\nb: 2\n",
            "p.yaml:2:1: YAML syntax error: expected a single document in the stream: but found "
            "another document",
        ),
        ("a: \x01\n", "p.yaml:1:4: not readable as YAML: special characters are not allowed"),
    ],
)
def test_yaml_syntax_errors_name_the_position(text: str, expected: str) -> None:
    assert errors_of(text, "p.yaml") == [expected]


def test_not_utf8() -> None:
    with pytest.raises(PolicyFileError) as caught:
        load_policy_text(b"apiVersion: placement/v1\n# \xff\n", source="p.yaml")
    assert caught.value.errors == ["p.yaml:2:1: not UTF-8 text: invalid start byte"]


def test_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    errors = errors_of("\n".join(lines) + "\n")
    assert len(errors) == 1 and errors[0].endswith("too deep or too large for a policy file")


def test_deep_nesting_is_refused() -> None:
    deep = "apiVersion: placement/v1\ndefaults: " + "[" * 40 + "]" * 40 + "\n"
    assert errors_of(deep) == ["policy.yaml:2:43: too deep or too large for a policy file"]
    deeper = "apiVersion: placement/v1\ndefaults: " + "[" * 5000 + "]" * 5000 + "\n"
    assert errors_of(deeper) == ["policy.yaml:2:75: too deep or too large for a policy file"]
    blocks = "".join(" " * i + f"k{i}:\n" for i in range(1200))
    assert errors_of(blocks) == [
        "policy.yaml: not readable as YAML: maximum recursion depth exceeded"
    ]
    assert errors_of("a: " + "x" * (1 << 20)) == [
        "policy.yaml: larger than 1048576 bytes: not a policy file"
    ]


def test_self_referencing_alias_reads_as_null() -> None:
    # ruamel resolves an alias to a node still being built as null: no cycle reaches us.
    errors = errors_of("apiVersion: placement/v1\ndefaults: &d {priority: *d}\n")
    assert errors == [
        "policy.yaml:2:15: defaults.priority = null: expected high, medium, low, none or an "
        "integer from 0 to 3000 (high=3000, medium=2000, low=1000, none=0)"
    ]


def test_merge_keys_and_anchors_work() -> None:
    text = """\
apiVersion: placement/v1
services:
  - match: {name: a}
    <<: &common {priority: high, preemptible: false}
  - match: {name: b}
    <<: *common
    failback: &f immediate
"""
    policy = load_policy_text(text)
    assert [dict(rule.overrides) for rule in policy.rules][1]["priority"] == 3000


def test_full_file_builds_every_section() -> None:
    text = """\
apiVersion: placement/v1
nodes:
  fault-domains: {site: dc, rack: rack-label}
  groups:
    ssd: {hostnames: [n1, n2], labels: {disk: ssd}}
  quarantine: {failures: 5, period: 30m, duration: 1h, max-fraction: 0.5}
controller:
  budgets: {actions-per-cycle: 0, actions-per-node: "3", actions-per-service: 2}
  resync-interval: 30
  rebalance-mode: Periodic
  rebalance-interval: 1h
  aggressiveness: 5
  move-cooldown: 0s
  steering: Strict
  preemption-gap: "1"
  timezone: Europe/Paris
"""
    policy = load_policy_text(text)
    assert dict(policy.fault_domains) == {"site": "dc", "rack": "rack-label"}
    assert policy.groups == {
        "ssd": NodeGroup(name="ssd", hostnames=("n1", "n2"), labels=(("disk", "ssd"),))
    }
    assert policy.quarantine == QuarantineSettings(5, 1800.0, 3600.0, 0.5)
    assert policy.controller == ControllerSettings(
        budgets=Budgets(0, 3, 2),
        resync_interval_seconds=30.0,
        rebalance_mode=RebalanceMode.PERIODIC,
        rebalance_interval_seconds=3600.0,
        aggressiveness=5,
        move_cooldown_seconds=0.0,
        steering=SteeringMode.STRICT,
        preemption_gap=1,
        timezone="Europe/Paris",
    )


@pytest.mark.parametrize(
    ("yaml", "expected"),
    [
        ("controller: {aggressiveness: 0}", "expected an integer of at least 1 and at most 5"),
        ("controller: {aggressiveness: 6}", "expected an integer of at least 1 and at most 5"),
        ("controller: {rebalance-mode: sometimes}", "expected off, on-join or periodic"),
        ("controller: {steering: loose}", "expected standby, strict or open"),
        ("controller: {preemption-gap: 0}", "expected an integer of at least 1 and at most 3000"),
        ("controller: {preemption-gap: high}", "expected an integer of at least 1 and at most"),
        ("controller: {timezone: ../etc/passwd}", "expected an IANA time zone name"),
        ("controller: {timezone: ''}", "expected an IANA time zone name"),
        ("nodes: {quarantine: {failures: 0}}", "expected an integer of at least 1"),
        ("nodes: {quarantine: {period: 0}}", "expected a duration above zero"),
        ("nodes: {quarantine: {max-fraction: 0%}}", "expected a fraction above 0 and at most 1"),
        ("nodes: {quarantine: {max-fraction: 101%}}", "expected a fraction above 0 and at most 1"),
        ("nodes: {groups: {g: {hostnames: 'a b'}}}", "expected a list of names"),
        ("nodes: {fault-domains: {rack: 'has space'}}", "expected a label key"),
        ("services: [{match: {name: 5}}]", "expected a string"),
        ("services: [{match: {labels: {'': x}}}]", "expected a label key"),
    ],
)
def test_other_file_fields_reject_bad_values(yaml: str, expected: str) -> None:
    [error] = errors_of(f"apiVersion: placement/v1\n{yaml}\n")
    assert expected in error, error


@pytest.mark.parametrize(
    ("value", "shown"),
    [("0", "0"), ("1.5", "1.5"), ("0%", '"0%"'), ("a third", '"a third"'), ("-0.3", "-0.3")],
)
def test_a_bad_health_panic_threshold_names_file_line_and_field(value: str, shown: str) -> None:
    text = f"apiVersion: placement/v1\ncontroller:\n  health-panic-threshold: {value}\n"
    assert errors_of(text, source="p.yaml") == [
        f"p.yaml:3:27: controller.health-panic-threshold = {shown}: expected a fraction above "
        "0 and at most 1, such as 0.25 or 25%"
    ]


def test_the_health_panic_threshold_is_a_third_by_default_and_takes_a_percentage() -> None:
    assert ControllerSettings().health_panic_threshold == 0.34
    text = "apiVersion: placement/v1\ncontroller: {health-panic-threshold: 50%}\n"
    assert load_policy_text(text).controller.health_panic_threshold == 0.5


def test_empty_sections_are_absent() -> None:
    text = "apiVersion: placement/v1\ndefaults:\nservices:\nnodes:\ncontroller:\n"
    assert load_policy_text(text).rules == ()


def test_loaded_policy_and_change_detection(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("apiVersion: placement/v1\n")
    loaded = load_policy_file(path)
    assert loaded.path == str(path)
    assert len(loaded.sha256) == 64
    assert not policy_file_changed(loaded)
    # Same content, new mtime: stat moved, the hash did not.
    os.utime(path, ns=(loaded.stamp.mtime_ns + 10**9, loaded.stamp.mtime_ns + 10**9))
    assert not policy_file_changed(loaded)
    path.write_text("apiVersion: placement/v1\ndefaults: {managed: true}\n")
    assert policy_file_changed(loaded)
    path.unlink()
    assert policy_file_changed(loaded)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError) as caught:
        load_policy_file(tmp_path / "missing.yaml")
    assert caught.value.errors == [
        f"{tmp_path / 'missing.yaml'}: cannot read: No such file or directory"
    ]


def test_a_node_group_is_the_union_of_its_selectors() -> None:
    text = (
        "apiVersion: placement/v1\n"
        "nodes: {groups: {fast: {hostnames: [n1], labels: {disk: ssd, net: 100g}}}}\n"
    )
    group = load_policy_text(text).groups["fast"]
    assert group.contains(hostname="n1", labels={})
    assert group.contains(hostname="n2", labels={"disk": "ssd"})
    assert group.contains(hostname="n3", labels={"net": "100g", "disk": "hdd"})
    assert not group.contains(hostname="n4", labels={"disk": "hdd"})
