"""The policy file format (`apiVersion: placement/v1`) as pydantic models, and its JSON schema.

Only plain data comes in (YAML is read by the adapter); `policy_from_data` either returns a
`Policy` or raises `PolicyValidationError` holding every problem at once, each located by
its field path so the adapter can point at a line and column.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from controller.policy import field_types as t
from controller.policy.policy_model import DEFAULT_FAULT_DOMAINS, Policy, ServiceMatch, ServiceRule
from controller.policy.policy_model import frozen_mapping as _frozen
from controller.policy.problems import PolicyProblem, PolicyValidationError, problems_from
from controller.policy.rule_settings import RuleSetting, split_declared
from controller.policy.service_spec import ServiceSettingsSpec, StrictSpec, overrides_of
from controller.policy.settings import (
    Budgets,
    ControllerSettings,
    NodeGroup,
    QuarantineSettings,
)

API_VERSION = "placement/v1"
_CONTROLLER = ControllerSettings()
_BUDGETS = Budgets()
_QUARANTINE = QuarantineSettings()


class MatchSpec(StrictSpec):
    name: t.Text | None = Field(None, description="Glob on the service name, e.g. db*.")
    stack: t.Text | None = Field(
        None, description="Glob on the stack namespace (label com.docker.stack.namespace)."
    )
    labels: dict[t.LabelKey, t.Text] | None = Field(
        None, description="Service labels that must be present; each value is a glob."
    )

    @model_validator(mode="after")
    def _not_empty(self) -> MatchSpec:
        if not self.model_fields_set:
            raise PydanticCustomError(
                "policy_value",
                "expected at least one of name, stack or labels (settings for every "
                "service belong in defaults)",
            )
        return self


class ServiceRuleSpec(ServiceSettingsSpec):
    match: MatchSpec = Field(description="Which services this rule applies to.")


class GroupSpec(StrictSpec):
    hostnames: t.NameList | None = Field(None, description="Hostnames of the member nodes.")
    labels: dict[t.LabelKey, t.Text] | None = Field(
        None, description="Node labels (exact values): a node carrying any one is a member."
    )

    @model_validator(mode="after")
    def _not_empty(self) -> GroupSpec:
        if not self.hostnames and not self.labels:
            raise PydanticCustomError(
                "policy_value", "expected hostnames or labels to select the member nodes"
            )
        return self


class QuarantineSpec(StrictSpec):
    failures: t.PositiveCount = Field(
        _QUARANTINE.failures,
        description="Ungraceful exits of a node, or task failures on it, within `period` "
        "that quarantine it: kept from the managed services (docs/health.md).",
    )
    period: t.PositiveDuration = Field(
        _QUARANTINE.period_seconds, description="The window in which failures are counted."
    )
    duration: t.PositiveDuration = Field(
        _QUARANTINE.duration_seconds, description="How long a node stays quarantined."
    )
    max_fraction: t.Fraction = Field(
        _QUARANTINE.max_fraction, description="Most nodes quarantined at once, as a fraction."
    )


class NodesSpec(StrictSpec):
    fault_domains: dict[t.Name, t.LabelKey] = Field(
        default_factory=lambda: dict(DEFAULT_FAULT_DOMAINS),
        description="Fault-domain levels, widest first (mapping order counts): level name -> "
        "the node label holding it. Default: site, rack, chassis from labels of the same names.",
    )
    groups: dict[t.Name, GroupSpec] = Field(
        default_factory=dict, description="Named node groups, usable in preferred/possible nodes."
    )
    quarantine: QuarantineSpec = Field(
        default_factory=QuarantineSpec,
        description="When crash-looping nodes, or nodes where tasks keep failing, are kept from "
        "the managed services.",
    )

    @field_validator("fault_domains")
    @classmethod
    def _distinct_labels(cls, value: dict[str, str]) -> dict[str, str]:
        if len(set(value.values())) != len(value):
            raise PydanticCustomError(
                "policy_value", "expected each level to read a different node label"
            )
        return value


class BudgetsSpec(StrictSpec):
    actions_per_cycle: t.Count = Field(
        _BUDGETS.actions_per_cycle, description="Most disruptive actions in one cycle."
    )
    actions_per_node: t.Count = Field(
        _BUDGETS.actions_per_node, description="Most disruptive actions touching one node."
    )
    actions_per_service: t.Count = Field(
        _BUDGETS.actions_per_service, description="Most disruptive actions on one service."
    )


class ControllerSpec(StrictSpec):
    budgets: BudgetsSpec = Field(
        default_factory=BudgetsSpec, description="Caps on disruptive actions (0: none at all)."
    )
    resync_interval: t.PositiveDuration = Field(
        _CONTROLLER.resync_interval_seconds, description="Full observe even without events."
    )
    rebalance_mode: t.RebalanceModeValue = Field(
        _CONTROLLER.rebalance_mode,
        description="When to rebalance: off, when a node joins or returns, or periodically.",
    )
    rebalance_interval: t.PositiveDuration = Field(
        _CONTROLLER.rebalance_interval_seconds, description="Period of periodic rebalancing."
    )
    aggressiveness: t.Aggressiveness = Field(
        _CONTROLLER.aggressiveness, description="How large an imbalance is worth a move."
    )
    move_cooldown: t.Duration = Field(
        _CONTROLLER.move_cooldown_seconds, description="Least time between two moves of a service."
    )
    steering: t.SteeringModeValue = Field(
        _CONTROLLER.steering,
        description=(
            "Nodes a service with preferred owners may use at rest besides its targets: "
            "one standby (Swarm fails over at once to the next owner), none (strict: the "
            "controller widens the set on failure) or all (open: the controller corrects "
            "after Swarm's own failover)."
        ),
    )
    steering_max_exclusions: t.Count = Field(
        _CONTROLLER.steering_max_exclusions,
        description=(
            "Most nodes a settled service excludes under standby steering; one that would "
            "exclude more (a large swarm) is steered open at rest: Swarm fails it over "
            "anywhere and the controller corrects it."
        ),
    )
    preemption_gap: t.PriorityGap = Field(
        _CONTROLLER.preemption_gap,
        description="How much lower a service's priority must be for a pending service to "
        "preempt it (1000: one named level).",
    )
    health_panic_threshold: t.Fraction = Field(
        _CONTROLLER.health_panic_threshold,
        description=(
            "The one blast-radius cap: most of the ready and active nodes that every input "
            "from outside Swarm together may keep one service off (rounded down: 0.34 is 1 "
            "node of 3 or 4, 2 of 6). Counted together: nodes reported failed or degraded, "
            "suspected, quarantined, and the service's move-offs and plugin vetoes. When the "
            "reports, suspicions and quarantines would take more, no new one is acted on "
            "until they fall back; a move-off or veto that would is held back "
            "(docs/health.md). 1: no limit."
        ),
    )
    suspect_after: t.Duration = Field(
        _CONTROLLER.suspect_after_seconds,
        description=(
            "How long at least two independent signals (gossip peers, a TCP probe, the node "
            "agent) must agree that a ready node is gone before it is suspected; a suspected "
            "node's replicas of `failover-mode: speculative` services are started elsewhere."
        ),
    )
    timezone: t.TimeZone = Field(_CONTROLLER.timezone, description="Time zone of failback windows.")


class PolicyDocument(StrictSpec):
    api_version: str = Field(alias="apiVersion", description=f"Always {API_VERSION}.")
    defaults: ServiceSettingsSpec = Field(
        default_factory=ServiceSettingsSpec, description="Settings for every service."
    )
    services: list[ServiceRuleSpec] = Field(
        default_factory=list,
        description="Rules in order; every matching rule applies and later rules win.",
    )
    nodes: NodesSpec = Field(default_factory=NodesSpec, description="Nodes and fault domains.")
    controller: ControllerSpec = Field(
        default_factory=ControllerSpec, description="How the controller itself behaves."
    )

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, data: object) -> object:
        # `services:` with everything below commented out is YAML null: read it as empty.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (v is None and k in _SECTIONS)}
        return data

    @field_validator("api_version", mode="plain")
    @classmethod
    def _api_version(cls, value: object) -> str:
        if value != API_VERSION:
            raise PydanticCustomError("policy_value", f"expected {API_VERSION}")
        return API_VERSION


_SECTIONS = ("defaults", "services", "nodes", "controller")


def _levels_in(data: Mapping[Any, Any]) -> tuple[str, ...] | None:
    """Fault-domain levels declared in raw data, so `spread` can be checked in one pass."""
    nodes = data.get("nodes")
    if not isinstance(nodes, Mapping) or "fault-domains" not in nodes:
        return tuple(DEFAULT_FAULT_DOMAINS)
    levels = nodes["fault-domains"]
    if not isinstance(levels, Mapping):
        return None  # reported as a problem of its own; do not also flag every spread
    return tuple(key for key in levels if isinstance(key, str))


def policy_from_document(doc: PolicyDocument) -> Policy:
    controller, budgets = doc.controller, doc.controller.budgets
    quarantine = doc.nodes.quarantine
    return Policy(
        controller=ControllerSettings(
            budgets=Budgets(
                actions_per_cycle=budgets.actions_per_cycle,
                actions_per_node=budgets.actions_per_node,
                actions_per_service=budgets.actions_per_service,
            ),
            resync_interval_seconds=controller.resync_interval,
            rebalance_mode=controller.rebalance_mode,
            rebalance_interval_seconds=controller.rebalance_interval,
            aggressiveness=controller.aggressiveness,
            move_cooldown_seconds=controller.move_cooldown,
            steering=controller.steering,
            steering_max_exclusions=controller.steering_max_exclusions,
            preemption_gap=controller.preemption_gap,
            health_panic_threshold=controller.health_panic_threshold,
            suspect_after_seconds=controller.suspect_after,
            timezone=controller.timezone,
        ),
        fault_domains=_frozen(doc.nodes.fault_domains),
        groups=_frozen(
            {
                name: NodeGroup(
                    name=name,
                    hostnames=group.hostnames or (),
                    labels=tuple(sorted((group.labels or {}).items())),
                )
                for name, group in doc.nodes.groups.items()
            }
        ),
        quarantine=QuarantineSettings(
            failures=quarantine.failures,
            period_seconds=quarantine.period,
            duration_seconds=quarantine.duration,
            max_fraction=quarantine.max_fraction,
        ),
        defaults=_frozen(overrides_of(doc.defaults)),
        rules=tuple(
            ServiceRule(
                index=index,
                match=ServiceMatch(
                    name=rule.match.name,
                    stack=rule.match.stack,
                    labels=tuple(sorted((rule.match.labels or {}).items())),
                ),
                overrides=_frozen(overrides_of(rule)),
            )
            for index, rule in enumerate(doc.services)
        ),
    )


def policy_from_data(data: object, declared: Sequence[RuleSetting[Any]] = ()) -> Policy:
    """Validate plain data (as YAML gives it) into a `Policy`, or raise with every problem.
    `declared`: the settings the rules declare (core/rules), besides the built-in ones."""
    if not isinstance(data, dict):
        raise PolicyValidationError(
            [PolicyProblem((), f"expected a mapping with apiVersion: {API_VERSION}", data)]
        )
    levels = _levels_in(data)
    data, rule_settings, problems = split_declared(data, tuple(declared), levels)
    try:
        doc = PolicyDocument.model_validate(data, context={"levels": levels})
    except ValidationError as exc:
        raise PolicyValidationError([*problems, *problems_from(exc, PolicyDocument)]) from None
    if problems:
        raise PolicyValidationError(problems)
    return replace(policy_from_document(doc), declared=rule_settings)


class _SchemaGenerator(GenerateJsonSchema):
    # Optional fields reject null (see StrictSpec), so the schema must not offer it.
    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        value = super().default_schema(schema)
        if value.get("default", 0) is None:
            del value["default"]
        return value


def policy_json_schema() -> dict[str, Any]:
    schema = PolicyDocument.model_json_schema(by_alias=True, schema_generator=_SchemaGenerator)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
        "title": "swarm-placement policy (apiVersion placement/v1)",
    }


def render_policy_schema() -> str:
    """The text of `policies/schema.json` and of `swarm-placement policy schema`."""
    return json.dumps(policy_json_schema(), indent=2, ensure_ascii=False) + "\n"
