"""Per-service resolution: built-in defaults < file defaults < matching rules < labels.

Labels are read on every cycle and an operator can break them at any time, so resolution
never raises: a service with bad labels keeps its last good labels (over the current
file), and one that never had good labels is treated as unmanaged until they are fixed.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from controller.policy.policy_model import Policy
from controller.policy.policy_model import frozen_mapping as _frozen
from controller.policy.problems import problems_from, render_value
from controller.policy.rule_settings import RuleSetting, parse_settings
from controller.policy.service_spec import (
    SETTING_NAMES,
    ServiceSettingsSpec,
    format_setting,
    merge_layers,
    resolved_fields,
    setting_value,
    spec_value,
)
from controller.policy.settings import ServiceSettings

LABEL_PREFIX = "placement."
T = TypeVar("T")


def label_key(setting: str) -> str:
    """The service label that sets one setting: `placement.preferred-nodes`."""
    return LABEL_PREFIX + setting


LABEL_KEYS: tuple[str, ...] = tuple(label_key(name) for name in SETTING_NAMES)
UNMANAGED_BY_ERRORS = "label errors, no earlier good labels: unmanaged until they are fixed"


@dataclass(frozen=True, slots=True)
class LabelProblem:
    key: str
    value: str
    message: str

    def describe(self, service_name: str) -> str:
        return (
            f"service {service_name}: label {self.key}={render_value(self.value)}: {self.message}"
        )


def placement_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The `placement.*` labels; every other label is not ours and is ignored."""
    return {key: value for key, value in labels.items() if key.startswith(LABEL_PREFIX)}


Layer = tuple[str, Mapping[str, object]]  # (source, setting name -> parsed value)


def parse_placement_labels(
    labels: Mapping[str, str],
    *,
    levels: Collection[str],
    note: str = "",
    declared: tuple[RuleSetting[Any], ...] = (),
) -> tuple[list[Layer], tuple[LabelProblem, ...]]:
    """Parse `placement.*` labels into one layer each, named for the label as read
    (`label placement.preferred-nodes`, then `note`); any problem rejects them all.
    `declared`: the settings the rules declare, known besides the built-in ones."""
    ours = placement_labels(labels)
    problems: list[LabelProblem] = []
    known: dict[str, object] = {}
    theirs: dict[str, object] = {}  # the rules' declared settings
    keys: dict[str, str] = {}  # setting name -> its label key
    declared_names = [s.name for s in declared]
    for key, value in ours.items():
        name = key.removeprefix(LABEL_PREFIX)
        if name in SETTING_NAMES or name in declared_names:
            (known if name in SETTING_NAMES else theirs)[name] = value
            keys[name] = key
            continue
        # Compare bare names: the shared prefix would make every key look close.
        close = difflib.get_close_matches(name, SETTING_NAMES, n=1)
        known_keys = (
            f"did you mean {LABEL_PREFIX}{close[0]}?"
            if close
            else f"expected one of: {', '.join(LABEL_KEYS)}"
        )
        problems.append(LabelProblem(key, value, f"unknown label; {known_keys}"))
    try:
        spec = ServiceSettingsSpec.model_validate(known, context={"levels": tuple(levels)})
    except ValidationError as exc:
        for problem in problems_from(exc, ServiceSettingsSpec):
            key = LABEL_PREFIX + str(problem.loc[0]) if problem.loc else LABEL_PREFIX
            problems.append(LabelProblem(key, ours.get(key, ""), problem.message))
        return [], tuple(sorted(problems, key=lambda p: p.key))
    parsed, found = parse_settings(declared, theirs, tuple(levels)) if theirs else ({}, [])
    for problem in found:
        key = LABEL_PREFIX + str(problem.loc[0]) if problem.loc else LABEL_PREFIX
        problems.append(LabelProblem(key, ours.get(key, ""), problem.message))
    if problems:
        return [], tuple(sorted(problems, key=lambda p: p.key))
    layers: list[Layer] = [
        (f"label {keys[name]}{note}", {name: spec_value(spec, name)})
        for name in SETTING_NAMES
        if name in keys
    ]
    layers += [(f"label {keys[name]}{note}", {name: parsed[name]}) for name in parsed]
    return layers, ()


@dataclass(frozen=True, slots=True)
class ResolvedService:
    """The effective settings of one service, where each came from, and label errors."""

    service_id: str
    service_name: str
    settings: ServiceSettings
    sources: Mapping[str, str]  # ServiceSettings field name -> "default", "file:…", "label …"
    errors: tuple[str, ...] = ()
    stale: bool = False  # True: labels are bad and the last good labels were kept
    good_labels: Mapping[str, str] | None = None  # the placement.* labels last applied
    # The settings the rules declare (policy/rule_settings), by name: read with `value_of`.
    declared: Mapping[str, object] = field(default_factory=lambda: _frozen({}))

    def value_of(self, setting: RuleSetting[T]) -> T:
        """A declared setting's value for this service, or its default."""
        return cast(T, self.declared.get(setting.name, setting.default))

    def source_of(self, setting: str) -> str:
        """Where one setting's value came from ("default", "file:…", "label …")."""
        return self.sources.get(resolved_fields(setting)[0], "?")

    def origin(self, setting: str) -> str:
        """The setting as an operator writes it and where its value came from:
        `placement.preferred-nodes from label placement.preferred-nodes`."""
        return f"{label_key(setting)} from {self.source_of(setting)}"

    def setting_rows(self) -> list[tuple[str, str, str]]:
        """(setting, value in label syntax, source) for every setting, in catalogue order."""
        return [
            (
                name,
                format_setting(name, setting_value(name, self.settings)),
                self.sources[resolved_fields(name)[0]],
            )
            for name in SETTING_NAMES
        ]

    @property
    def error_summary(self) -> str | None:
        """One line for the decision log, or None when the labels are good."""
        if not self.errors:
            return None
        if self.stale:
            outcome = "keeping the last good settings"
        else:
            outcome = "no earlier good labels, treated as unmanaged until fixed"
        return f"service {self.service_name}: {len(self.errors)} label error(s), {outcome}: " + (
            "; ".join(self.errors)
        )


def _file_layers(policy: Policy, *, service_name: str, labels: Mapping[str, str]) -> list[Layer]:
    layers: list[Layer] = [("file:defaults", policy.defaults)]
    for rule in policy.matching_rules(service_name=service_name, labels=labels):
        layers.append((rule.source, rule.overrides))
    return layers


def _declared_file_layers(
    policy: Policy, *, service_name: str, labels: Mapping[str, str]
) -> list[Layer]:
    declared = policy.declared
    layers: list[Layer] = [("file:defaults", declared.defaults)]
    for rule in policy.matching_rules(service_name=service_name, labels=labels):
        layers.append((rule.source, declared.rules.get(rule.index, {})))
    return layers


def _merged(
    policy: Policy, file_layers: list[Layer], label_layers: list[Layer], declared: list[Layer]
) -> tuple[ServiceSettings, dict[str, str], dict[str, object]]:
    """The built-in settings merged (service_spec), and the declared ones, in the same
    order of layers, with where each came from."""
    names = {s.name for s in policy.declared.table}
    ours = [layer for layer in label_layers if not names & layer[1].keys()]
    settings, sources = merge_layers(file_layers + ours)
    values = {s.name: s.default for s in policy.declared.table}
    sources.update({name: "default" for name in values})
    for source, overrides in declared + [layer for layer in label_layers if layer not in ours]:
        for name, value in overrides.items():
            values[name] = value
            sources[name] = source
    return settings, sources, values


def _on_last_good_labels(
    policy: Policy,
    service_name: str,
    previous: ResolvedService,
    *,
    file_layers: list[Layer],
    declared: list[Layer],
    errors: tuple[str, ...],
) -> ResolvedService:
    """Labels that no longer read: the service keeps its last good labels, marked stale."""
    assert previous.good_labels is not None
    old, old_problems = parse_placement_labels(
        previous.good_labels,
        levels=policy.fault_domain_levels,
        note=" (last good value)",
        declared=policy.declared.table,
    )
    if old_problems:
        # The reloaded file made the old labels invalid too (a level removed, say).
        settings, frozen_sources = previous.settings, previous.sources
        frozen_values = previous.declared
    else:
        settings, sources, values = _merged(policy, file_layers, old, declared)
        frozen_sources, frozen_values = _frozen(sources), _frozen(values)
    return ResolvedService(
        previous.service_id,
        service_name,
        settings,
        frozen_sources,
        errors=errors,
        stale=True,
        good_labels=previous.good_labels,
        declared=frozen_values,
    )


def resolve_service(
    policy: Policy,
    *,
    service_name: str,
    service_id: str,
    labels: Mapping[str, str],
    previous: ResolvedService | None = None,
) -> ResolvedService:
    """Merge policy and labels for one service. Never raises; see the module docstring."""
    file_layers = _file_layers(policy, service_name=service_name, labels=labels)
    declared = _declared_file_layers(policy, service_name=service_name, labels=labels)
    levels = policy.fault_domain_levels
    table = policy.declared.table
    label_layers, problems = parse_placement_labels(labels, levels=levels, declared=table)
    if not problems:
        settings, sources, values = _merged(policy, file_layers, label_layers, declared)
        return ResolvedService(
            service_id,
            service_name,
            settings,
            _frozen(sources),
            good_labels=_frozen(placement_labels(labels)),
            declared=_frozen(values),
        )

    errors = tuple(problem.describe(service_name) for problem in problems)
    if (
        previous is not None
        and previous.service_id == service_id
        and previous.good_labels is not None
    ):
        return _on_last_good_labels(
            policy,
            service_name,
            previous,
            file_layers=file_layers,
            declared=declared,
            errors=errors,
        )

    # No good labels to fall back on: the controller must not act on a half-read intent.
    settings, sources, values = _merged(policy, file_layers, [], declared)
    settings = replace(settings, managed=False)
    sources["managed"] = UNMANAGED_BY_ERRORS
    return ResolvedService(
        service_id,
        service_name,
        settings,
        _frozen(sources),
        errors=errors,
        declared=_frozen(values),
    )


def resolve_services(
    policy: Policy,
    services: Sequence[tuple[str, str, Mapping[str, str]]],
    previous: Mapping[str, ResolvedService] | None = None,
) -> dict[str, ResolvedService]:
    """Resolve (id, name, labels) triples, keyed by service ID, carrying last good state."""
    before = previous or {}
    return {
        service_id: resolve_service(
            policy,
            service_name=name,
            service_id=service_id,
            labels=labels,
            previous=before.get(service_id),
        )
        for service_id, name, labels in services
    }
