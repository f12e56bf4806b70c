"""What changed between two policies, in one line, for the reload log.

Names are the file's own paths (`controller.resync-interval`, `services[2].priority`) and
values are printed in file syntax, so an operator can find each change in the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from enum import Enum

from controller.policy.policy_model import Policy, ServiceRule
from controller.policy.service_spec import format_setting, kebab
from controller.policy.settings import NodeGroup
from controller.policy.value_syntax import format_duration

MAX_CHANGES_SHOWN = 8
_UNSET = "unset"


def file_name(field_name: str) -> str:
    """The file's name of a resolved field: `move_cooldown_seconds` -> `move-cooldown`."""
    return kebab(field_name.removesuffix("_seconds"))


def _format_field(name: str, value: object) -> str:
    if name.endswith("_seconds") and isinstance(value, int | float):
        return format_duration(value)
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _dataclass_changes(prefix: str, old: object, new: object) -> list[str]:
    changes: list[str] = []
    for item in fields(old):  # type: ignore[arg-type]
        before, after = getattr(old, item.name), getattr(new, item.name)
        path = f"{prefix}.{file_name(item.name)}"
        if before == after:
            continue
        if is_dataclass(before):
            changes += _dataclass_changes(path, before, after)
        else:
            before_text = _format_field(item.name, before)
            after_text = _format_field(item.name, after)
            changes.append(f"{path} {before_text} -> {after_text}")
    return changes


def _override_changes(
    prefix: str, old: Mapping[str, object], new: Mapping[str, object]
) -> list[str]:
    changes = []
    for name in [*old, *(name for name in new if name not in old)]:
        before = format_setting(name, old[name]) if name in old else _UNSET
        after = format_setting(name, new[name]) if name in new else _UNSET
        if before != after:
            changes.append(f"{prefix}.{name} {before} -> {after}")
    return changes


def _rule_changes(old: tuple[ServiceRule, ...], new: tuple[ServiceRule, ...]) -> list[str]:
    changes = []
    for index in range(max(len(old), len(new))):
        path = f"services[{index}]"
        if index >= len(old):
            changes.append(f"{path} added (match {new[index].match.describe()})")
        elif index >= len(new):
            changes.append(f"{path} removed (match {old[index].match.describe()})")
        else:
            before, after = old[index], new[index]
            if before.match != after.match:
                changes.append(
                    f"{path}.match {before.match.describe()} -> {after.match.describe()}"
                )
            changes += _override_changes(path, before.overrides, after.overrides)
    return changes


def _describe_group(group: NodeGroup) -> str:
    members = list(group.hostnames) + [f"{key}={value}" for key, value in group.labels]
    return ",".join(members)


def _group_changes(old: Mapping[str, NodeGroup], new: Mapping[str, NodeGroup]) -> list[str]:
    changes = []
    for name in [*old, *(name for name in new if name not in old)]:
        path = f"nodes.groups.{name}"
        if name not in new:
            changes.append(f"{path} removed")
        elif name not in old:
            changes.append(f"{path} added ({_describe_group(new[name])})")
        elif old[name] != new[name]:
            changes.append(f"{path} {_describe_group(old[name])} -> {_describe_group(new[name])}")
    return changes


def _format_levels(levels: Mapping[str, str]) -> str:
    return ",".join(f"{level}={label}" for level, label in levels.items()) or "none"


def policy_changes(old: Policy, new: Policy) -> list[str]:
    """Every difference, one phrase each, in file order."""
    changes = _override_changes("defaults", old.defaults, new.defaults)
    changes += _rule_changes(old.rules, new.rules)
    if tuple(old.fault_domains.items()) != tuple(new.fault_domains.items()):
        before, after = _format_levels(old.fault_domains), _format_levels(new.fault_domains)
        changes.append(f"nodes.fault-domains {before} -> {after}")
    changes += _group_changes(old.groups, new.groups)
    changes += _dataclass_changes("nodes.quarantine", old.quarantine, new.quarantine)
    changes += _dataclass_changes("controller", old.controller, new.controller)
    return changes


def summarize_policy_change(old: Policy, new: Policy) -> str:
    """A one-line summary such as `defaults.priority medium (2000) -> high (3000)`."""
    changes = policy_changes(old, new)
    if not changes:
        return "no change"
    shown = changes[:MAX_CHANGES_SHOWN]
    more = len(changes) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more else "")
