"""Per-service settings a rule declares in its own package, checked and layered here.

The policy sits below the rules, so it cannot know their settings: whoever reads the file
or the labels hands it the table (core/rules, from every spec's `settings`). A declared
setting is checked by the same field types, and reported in the same words, as a
built-in one (a model is made from the table), and resolved in the same layers: its
default < the file's `defaults` < matching `services` rules < its `placement.` label.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, ValidationError, create_model

from controller.policy.problems import PolicyProblem, problems_from
from controller.policy.service_spec import SETTING_NAMES, StrictSpec

T = TypeVar("T")


# Compared by identity: a field type carries unhashable schema parts, and two rules'
# settings are never the same setting.
@dataclass(frozen=True, eq=False)
class RuleSetting(Generic[T]):
    """One per-service setting of a rule: file key and label `placement.<name>`."""

    name: str  # kebab-case, as the file and the labels write it
    kind: Any  # a type of `field_types` (t.Flag, t.Duration, ...): its forms and checks
    default: T
    description: str


@dataclass(frozen=True, slots=True)
class DeclaredSettings:
    """The rules' settings as a policy file sets them."""

    table: tuple[RuleSetting[Any], ...] = ()
    defaults: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    # services[index] -> setting name -> value, for the entries that set any.
    rules: Mapping[int, Mapping[str, object]] = field(default_factory=lambda: MappingProxyType({}))

    def named(self, name: str) -> RuleSetting[Any] | None:
        return next((s for s in self.table if s.name == name), None)


def _field_name(setting: RuleSetting[Any]) -> str:
    return setting.name.replace("-", "_")


@functools.cache
def settings_model(table: tuple[RuleSetting[Any], ...]) -> type[BaseModel]:
    """The table as a model of the file's kind: kebab-case, unknown names and nulls
    rejected, every field optional (a layer sets only some)."""
    taken = [s.name for s in table if s.name in SETTING_NAMES]
    if taken:
        raise ValueError(f"a rule declares a built-in setting: {', '.join(taken)}")
    fields: dict[str, Any] = {
        _field_name(s): (s.kind | None, Field(None, description=s.description)) for s in table
    }
    model: type[BaseModel] = create_model("RuleSettingsSpec", __base__=StrictSpec, **fields)
    return model


def parse_settings(
    table: tuple[RuleSetting[Any], ...], values: Mapping[str, object], levels: Sequence[str]
) -> tuple[dict[str, object], list[PolicyProblem]]:
    """Check one layer's values of declared settings (setting name -> raw value): the
    parsed values by name, or every problem, located at the setting's name."""
    model = settings_model(table)
    try:
        spec = model.model_validate(dict(values), context={"levels": tuple(levels)})
    except ValidationError as exc:
        return {}, problems_from(exc, model)
    return {
        s.name: getattr(spec, _field_name(s))
        for s in table
        if _field_name(s) in spec.model_fields_set
    }, []


def split_declared(
    data: Mapping[str, Any], table: tuple[RuleSetting[Any], ...], levels: Sequence[str] | None
) -> tuple[dict[str, Any], DeclaredSettings, list[PolicyProblem]]:
    """Take the declared settings out of a policy file's `defaults` and `services`
    entries (the document knows only the built-in ones): the rest of the data, the
    declared values, and their problems, located in the file."""
    names = {s.name for s in table}
    if not names:
        return dict(data), DeclaredSettings(), []
    rest, problems = dict(data), list[PolicyProblem]()
    known_levels = tuple(levels or ())

    def take(section: object, at: tuple[str | int, ...]) -> tuple[object, dict[str, object]]:
        if not isinstance(section, Mapping):
            return section, {}
        ours = {k: v for k, v in section.items() if k in names}
        parsed, found = parse_settings(table, ours, known_levels)
        problems.extend(PolicyProblem((*at, *p.loc), p.message, p.value) for p in found)
        return {k: v for k, v in section.items() if k not in names}, parsed

    rest["defaults"], defaults = take(data.get("defaults"), ("defaults",))
    if rest["defaults"] is None:
        del rest["defaults"]
    by_rule: dict[int, Mapping[str, object]] = {}
    services = data.get("services")
    if isinstance(services, list):
        entries = []
        for index, entry in enumerate(services):
            kept, parsed = take(entry, ("services", index))
            entries.append(kept)
            if parsed:
                by_rule[index] = MappingProxyType(parsed)
        rest["services"] = entries
    declared = DeclaredSettings(table, MappingProxyType(defaults), MappingProxyType(by_rule))
    return rest, declared, problems
