"""The policy model: file rules and placement.* labels resolved into per-service settings.

Pure: no YAML, no Docker, no clock. The file adapter parses YAML into plain data and calls
`policy_from_data`; the runtime calls `resolve_service` for each service on every cycle.
"""

from controller.policy.changes import policy_changes, summarize_policy_change
from controller.policy.document import (
    API_VERSION,
    PolicyDocument,
    policy_from_data,
    policy_json_schema,
    render_policy_schema,
)
from controller.policy.policy_model import (
    DEFAULT_FAULT_DOMAINS,
    STACK_LABEL,
    Policy,
    ServiceMatch,
    ServiceRule,
)
from controller.policy.problems import PolicyProblem, PolicyValidationError
from controller.policy.rule_settings import DeclaredSettings, RuleSetting
from controller.policy.service_resolution import (
    LABEL_KEYS,
    LABEL_PREFIX,
    LabelProblem,
    ResolvedService,
    label_key,
    parse_placement_labels,
    placement_labels,
    resolve_service,
    resolve_services,
)
from controller.policy.service_spec import SETTING_NAMES, format_setting, setting_value
from controller.policy.settings import (
    PRIORITY_HIGH,
    PRIORITY_LOW,
    PRIORITY_MEDIUM,
    PRIORITY_NONE,
    AntiAffinityMode,
    Budgets,
    ControllerSettings,
    DataMode,
    FailbackMode,
    FailbackWindow,
    FailoverMode,
    FailoverThreshold,
    NodeGroup,
    QuarantineSettings,
    RebalanceMode,
    ServiceSettings,
    SteeringMode,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_FAULT_DOMAINS",
    "LABEL_KEYS",
    "LABEL_PREFIX",
    "PRIORITY_HIGH",
    "PRIORITY_LOW",
    "PRIORITY_MEDIUM",
    "PRIORITY_NONE",
    "SETTING_NAMES",
    "STACK_LABEL",
    "AntiAffinityMode",
    "Budgets",
    "ControllerSettings",
    "DataMode",
    "DeclaredSettings",
    "FailbackMode",
    "FailbackWindow",
    "FailoverMode",
    "FailoverThreshold",
    "LabelProblem",
    "NodeGroup",
    "Policy",
    "PolicyDocument",
    "PolicyProblem",
    "PolicyValidationError",
    "QuarantineSettings",
    "RebalanceMode",
    "ResolvedService",
    "RuleSetting",
    "ServiceMatch",
    "ServiceRule",
    "ServiceSettings",
    "SteeringMode",
    "format_setting",
    "label_key",
    "parse_placement_labels",
    "placement_labels",
    "policy_changes",
    "policy_from_data",
    "policy_json_schema",
    "render_policy_schema",
    "resolve_service",
    "resolve_services",
    "setting_value",
    "summarize_policy_change",
]
