"""The tables of docs/policy-reference.md, generated from the models.

The doc keeps prose around marked blocks; `update_reference` rewrites the blocks and a test
fails when the committed doc differs, so names, syntaxes and defaults cannot drift.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from controller.policy import document as d
from controller.policy.field_types import Syntax
from controller.policy.problems import unwrap_annotation
from controller.policy.service_resolution import LABEL_PREFIX
from controller.policy.service_spec import (
    SETTING_NAMES,
    ServiceSettingsSpec,
    format_setting,
    kebab,
    setting_value,
    syntax_of,
)
from controller.policy.settings import ServiceSettings

# Sections of the file below the top level, in the order the doc shows them.
FILE_SECTIONS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("(top level)", d.PolicyDocument),
    ("services[]", d.ServiceRuleSpec),
    ("services[].match", d.MatchSpec),
    ("nodes", d.NodesSpec),
    ("nodes.groups.NAME", d.GroupSpec),
    ("nodes.quarantine", d.QuarantineSpec),
    ("controller", d.ControllerSpec),
    ("controller.budgets", d.BudgetsSpec),
)
_BLOCK = re.compile(
    r"(<!-- generated:(?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _syntax(annotation: Any) -> Syntax | None:
    if get_origin(annotation) is Annotated:
        for item in get_args(annotation)[1:]:
            if isinstance(item, Syntax):
                return item
    return None


def _section_of(model: type[BaseModel]) -> str:
    return next(path for path, section in FILE_SECTIONS if section is model)


def _accepts(model: type[BaseModel], name: str, info: FieldInfo) -> str:
    syntax = syntax_of(model, name)
    if syntax is not None:
        return syntax.accepts
    tp = unwrap_annotation(info.annotation)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return f"a mapping, see `{_section_of(tp)}`"
    args = get_args(tp)
    if get_origin(tp) is list:
        return f"a list of rules, see `{_section_of(args[0])}`"
    if get_origin(tp) is dict:
        key, value = (_syntax(arg) for arg in args)
        value_text = value.accepts if value else f"a mapping, see `{_section_of(args[1])}`"
        return f"a mapping of {key.accepts if key else 'names'} to {value_text}"
    if name == "api_version":
        return d.API_VERSION
    raise LookupError(f"no description of what {model.__name__}.{name} accepts")


def _default(model: type[BaseModel], name: str, info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True, validated_data={})
    if value is None:
        return "not set"
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "none"
    if isinstance(value, list):
        return "none"
    syntax = syntax_of(model, name)
    return syntax.render(value) if syntax else str(value)


def service_settings_table() -> str:
    builtin = ServiceSettings()
    rows = [
        "| Setting | Label | Accepts | Built-in default | Meaning |",
        "|---|---|---|---|---|",
    ]
    for setting, field_name in zip(SETTING_NAMES, ServiceSettingsSpec.model_fields, strict=True):
        info = ServiceSettingsSpec.model_fields[field_name]
        syntax = syntax_of(ServiceSettingsSpec, field_name)
        assert syntax is not None
        default = format_setting(setting, setting_value(setting, builtin))
        rows.append(
            f"| `{setting}` | `{LABEL_PREFIX}{setting}` | {_cell(syntax.accepts)} "
            f"| `{_cell(default)}` | {_cell(info.description or '')} |"
        )
    return "\n".join(rows) + "\n"


def file_fields_table() -> str:
    parts = []
    for path, model in FILE_SECTIONS:
        parts.append(f"#### `{path}`\n")
        if model is d.ServiceRuleSpec:
            parts.append("`match`, plus any per-service setting from the table above.\n")
            continue
        rows = ["| Field | Accepts | Default | Meaning |", "|---|---|---|---|"]
        for name, info in model.model_fields.items():
            if model is d.PolicyDocument and name == "defaults":
                accepts = "a mapping of per-service settings (table above)"
            else:
                accepts = _accepts(model, name, info)
            rows.append(
                f"| `{info.alias or kebab(name)}` | {_cell(accepts)} "
                f"| {_cell(_default(model, name, info))} | {_cell(info.description or '')} |"
            )
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def reference_blocks() -> dict[str, str]:
    return {"service-settings": service_settings_table(), "file-fields": file_fields_table()}


def update_reference(text: str) -> str:
    """The doc text with every generated block replaced by its current contents."""
    blocks = reference_blocks()
    missing = set(blocks) - {m["name"] for m in _BLOCK.finditer(text)}
    if missing:
        raise ValueError(f"the reference doc lacks generated blocks: {sorted(missing)}")
    return _BLOCK.sub(lambda m: m[1] + "\n" + blocks[m["name"]] + "\n" + m[4], text)
