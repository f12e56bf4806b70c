"""Per-service settings as written: one model for the file's `defaults`/`services` and labels.

A spec holds only what one layer sets (`model_fields_set`); `merge_layers` applies the
layers over the built-in `ServiceSettings` and records where each value came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from controller.policy import field_types as t
from controller.policy.settings import ServiceSettings
from controller.policy.value_syntax import FailbackSetting

DEFAULTS_SOURCE = "file:defaults"


def kebab(name: str) -> str:
    return name.replace("_", "-")


STRICT = ConfigDict(
    extra="forbid",
    frozen=True,
    alias_generator=kebab,
    field_title_generator=lambda name, info: kebab(name),
)


def syntax_of(model: type[BaseModel], field_name: str) -> t.Syntax | None:
    """The `Syntax` of a field, also when it is wrapped as `X | None`."""
    info = model.model_fields[field_name]
    candidates = list(info.metadata)
    if get_origin(info.annotation) in (Union, UnionType):
        for arg in get_args(info.annotation):
            if get_origin(arg) is Annotated:
                candidates += get_args(arg)[1:]
    return next((item for item in candidates if isinstance(item, t.Syntax)), None)


class StrictSpec(BaseModel):
    """Base of every file model: kebab-case names, unknown fields and nulls rejected."""

    model_config = STRICT

    @field_validator("*", mode="before")
    @classmethod
    def _reject_null(cls, value: object, info: ValidationInfo) -> object:
        # An empty YAML value would otherwise mean "unset" silently; say what was expected.
        if value is None and info.field_name is not None:
            syntax = syntax_of(cls, info.field_name)
            expected = f"expected {syntax.accepts}" if syntax else "expected a value, not null"
            raise PydanticCustomError("policy_value", "{expected}", {"expected": expected})
        return value


class ServiceSettingsSpec(StrictSpec):
    """Placement settings of a service; every field is optional in every layer."""

    managed: t.Flag | None = Field(
        None,
        description="Whether the controller places this service; `rebalance` set for the "
        "service (by label or file rule) implies it.",
    )
    priority: t.Priority | None = Field(
        None, description="Higher priority services are placed first and may preempt lower ones."
    )
    preferred_nodes: t.NameList | None = Field(
        None,
        description="Ordered preferred owners: hostnames, node IDs or group names, best first.",
    )
    possible_nodes: t.NameList | None = Field(
        None, description="The only nodes the service may run on (hard); empty means any node."
    )
    failback: t.Failback | None = Field(
        None,
        description="When tasks go back to a preferred node that returns: never, at once, "
        "or inside a daily window (in controller.timezone; it may wrap past midnight).",
    )
    failback_delay: t.Duration | None = Field(
        None, description="How long a returned preferred node must stay ready before failback."
    )
    anti_affinity: t.NameList | None = Field(
        None, description="Classes: tasks of services sharing a class avoid sharing a node."
    )
    anti_affinity_mode: t.AntiAffinityModeValue | None = Field(
        None, description="soft: avoid when possible; hard: never share a node."
    )
    spread: t.SpreadLevel | None = Field(
        None, description="Spread the tasks evenly over the domains of this fault-domain level."
    )
    preemptible: t.Flag | None = Field(
        None, description="Whether higher-priority services may scale this one down for room."
    )
    max_unavailable: t.MaxUnavailable | None = Field(
        None,
        description="Most replicas that may be down at any moment once a write of the "
        "controller's goes out, counting those down already (docs/availability.md); "
        "0: it never stops a task of this service (Swarm's own failover still runs).",
    )
    failover_threshold: t.Threshold | None = Field(
        None,
        description="Move the service off a node after this many task failures (or "
        "unhealthy tasks) there within the period, for that period; once it has been moved "
        "off this many nodes within the period it fails wherever it runs, and it is not "
        "moved again (reported); none: Swarm's own behaviour (docs/health.md).",
    )
    rebalance: t.Flag | None = Field(
        None,
        description="Whether rebalancing may move this service's tasks to even out task "
        "counts and node load (docs/rebalancing.md).",
    )
    failover_mode: t.FailoverModeValue | None = Field(
        None,
        description="confirmed: a lost node's replicas are replaced once Swarm marks it down; "
        "speculative: already while it is suspected (controller.suspect-after), by raising the "
        "replica count without stopping anything, trimmed back if the node was alive; auto: "
        "speculative unless the service has max-replicas-per-node 1 (one per node on purpose: "
        "it waits for Swarm's down).",
    )
    data: t.DataModeValue | None = Field(
        None,
        description="Whether the service's data follows its tasks: local (on the node: the "
        "controller's own moves - failback, rebalancing, spread, load, preferred owners - "
        "leave its tasks where they are; failover still happens), shared (reached from any "
        "node: it moves like any service) or auto (local when it mounts a named volume of "
        "the local driver or a bind mount, shared otherwise).",
    )


SETTING_NAMES: tuple[str, ...] = tuple(kebab(name) for name in ServiceSettingsSpec.model_fields)
_FIELD_OF = {kebab(name): name for name in ServiceSettingsSpec.model_fields}
# Settings whose resolved field has another name, or which set two resolved fields.
_RESOLVED_FIELDS: Mapping[str, tuple[str, ...]] = {
    "failback": ("failback", "failback_window"),
    "failback-delay": ("failback_delay_seconds",),
}


def resolved_fields(setting: str) -> tuple[str, ...]:
    """The `ServiceSettings` fields that one setting name decides."""
    return _RESOLVED_FIELDS.get(setting, (_FIELD_OF[setting],))


def overrides_of(spec: ServiceSettingsSpec) -> dict[str, object]:
    """What this layer sets: setting name -> parsed value, in catalogue order."""
    return {
        kebab(name): getattr(spec, name)
        for name in ServiceSettingsSpec.model_fields
        if name in spec.model_fields_set
    }


def spec_value(spec: ServiceSettingsSpec, setting: str) -> object:
    """The parsed value of one setting in a layer's spec."""
    return getattr(spec, _FIELD_OF[setting])


def _changes(setting: str, value: object) -> dict[str, Any]:
    if setting == "failback":
        assert isinstance(value, FailbackSetting)
        return {"failback": value.mode, "failback_window": value.window}
    return {resolved_fields(setting)[0]: value}


def setting_value(setting: str, settings: ServiceSettings) -> object:
    """The parsed-value form of one setting in resolved settings (inverse of `_changes`)."""
    if setting == "failback":
        return FailbackSetting(settings.failback, settings.failback_window)
    return getattr(settings, resolved_fields(setting)[0])


def format_setting(setting: str, value: object) -> str:
    """A parsed value in label syntax, e.g. `window 22:00-06:00` or `node-2,node-3`."""
    syntax = syntax_of(ServiceSettingsSpec, _FIELD_OF[setting])
    assert syntax is not None, setting
    return syntax.render(value)


def merge_layers(
    layers: Sequence[tuple[str, Mapping[str, object]]],
) -> tuple[ServiceSettings, dict[str, str]]:
    """Apply (source, overrides) layers in order over the built-in defaults; later wins."""
    settings = ServiceSettings()
    sources = {f.name: "default" for f in fields(ServiceSettings)}
    for source, overrides in layers:
        for setting, value in overrides.items():
            changes = _changes(setting, value)
            settings = replace(settings, **changes)
            for name in changes:
                sources[name] = source
    # `rebalance` set for this service (a label or a file rule, not the file's defaults)
    # opts it in on its own: moving its tasks needs the controller to manage it.
    if (
        settings.rebalance
        and sources["managed"] == "default"
        and sources["rebalance"] != DEFAULTS_SOURCE
    ):
        settings = replace(settings, managed=True)
        sources["managed"] = f"implied by rebalance ({sources['rebalance']})"
    return settings, sources
