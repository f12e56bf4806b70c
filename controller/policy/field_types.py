"""Pydantic field types for the policy file and labels, built on the parsers in `value_syntax`.

Every type carries three things that must agree: the parser (a `PlainValidator`, so the
accepted forms are exactly ours), the JSON schema fragment, and a `Syntax` value that the
reference doc and `policy show` use to describe and print values.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, TypeVar

from pydantic import PlainValidator, ValidationInfo, WithJsonSchema
from pydantic_core import PydanticCustomError

from controller.policy import value_syntax as v
from controller.policy.settings import (
    AntiAffinityMode,
    DataMode,
    FailoverMode,
    FailoverThreshold,
    RebalanceMode,
    SteeringMode,
)

T = TypeVar("T")

_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_DURATION_PATTERN = r"^\s*(?=\d)(\d+(\.\d+)?[hH])?(\d+(\.\d+)?[mM])?(\d+(\.\d+)?[sS])?\s*$"


@dataclass(frozen=True, slots=True)
class Syntax:
    """What a field accepts (for humans) and how to print a parsed value back."""

    accepts: str
    render: Callable[[Any], str]


def _validator(parse: Callable[[object], T]) -> PlainValidator:
    def validate(value: object) -> T:
        try:
            return parse(value)
        except v.PolicyValueError as exc:
            raise PydanticCustomError(
                "policy_value", "{expected}", {"expected": str(exc)}
            ) from None

    return PlainValidator(validate)


def _any_case(*words: str) -> str:
    """A JSON-schema pattern matching the words in any case (ECMA regexes have no (?i))."""
    spelled = ("".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in w) for w in words)
    return r"^\s*(" + "|".join(spelled) + r")\s*$"


def _int_schema(minimum: int, maximum: int | None = None) -> dict[str, Any]:
    bounds: dict[str, Any] = {"minimum": minimum}
    if maximum is not None:
        bounds["maximum"] = maximum
    return {"anyOf": [{"type": "integer", **bounds}, {"type": "string", "pattern": r"^\s*\d+\s*$"}]}


def _spread(value: object, info: ValidationInfo) -> str | None:
    """A fault-domain level; which levels exist comes from the document (validation context)."""
    levels: Collection[str] | None = (info.context or {}).get("levels")
    if isinstance(value, str) and value.strip().lower() == "none":
        return None
    choices = f" ({', '.join(levels)})" if levels else ""
    expected = f"a fault-domain level defined under nodes.fault-domains{choices}, or none"
    if isinstance(value, str) and (levels is None or value in levels):
        try:
            return v.parse_name(value)
        except v.PolicyValueError:
            pass
    raise PydanticCustomError("policy_value", "{expected}", {"expected": f"expected {expected}"})


def _render_int(value: int) -> str:
    return str(value)


def _render_float(value: float) -> str:
    return f"{value:g}"


def _render_str(value: object) -> str:
    return str(value)


# --- per-service settings (labels and file) --------------------------------------------

Flag = Annotated[
    bool,
    _validator(v.parse_bool),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "boolean"},
                {
                    "type": "string",
                    "pattern": _any_case(*["true", "false", "yes", "no", "on", "off"]),
                },
            ]
        }
    ),
    Syntax(v.EXPECTED_BOOL, v.format_bool),
]
Priority = Annotated[
    int,
    _validator(v.parse_priority),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0, "maximum": v.PRIORITY_MAX},
                {"type": "string", "pattern": _any_case("high", "medium", "low", "none", r"\d+")},
            ]
        }
    ),
    Syntax(f"{v.EXPECTED_PRIORITY} (high=3000, medium=2000, low=1000, none=0)", v.format_priority),
]
NameList = Annotated[
    tuple[str, ...],
    _validator(v.parse_names),
    WithJsonSchema(
        {
            "anyOf": [
                {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"type": "string", "pattern": _NAME_PATTERN},
                },
                {"type": "string", "description": "comma-separated names"},
            ]
        }
    ),
    Syntax(v.EXPECTED_NAMES, v.format_names),
]
Failback = Annotated[
    v.FailbackSetting,
    _validator(v.parse_failback),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^\s*([Nn][Ee][Vv][Ee][Rr]|[Ii][Mm][Mm][Ee][Dd][Ii][Aa][Tt][Ee]"
            r"|[Ww][Ii][Nn][Dd][Oo][Ww]\s+\d{1,2}:\d{2}\s*-\s*\d{1,2}:\d{2})\s*$",
        }
    ),
    Syntax(v.EXPECTED_FAILBACK, v.format_failback),
]
Duration = Annotated[
    float,
    _validator(v.parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": _DURATION_PATTERN},
            ]
        }
    ),
    Syntax(v.EXPECTED_DURATION, v.format_duration),
]
PositiveDuration = Annotated[
    float,
    _validator(partial(v.parse_duration, positive=True)),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": _DURATION_PATTERN},
            ]
        }
    ),
    Syntax(v.EXPECTED_POSITIVE_DURATION, v.format_duration),
]
Threshold = Annotated[
    FailoverThreshold | None,
    _validator(v.parse_failover_threshold),
    WithJsonSchema({"type": "string", "pattern": r"^\s*(\d+\s*/\s*\S+|[Nn][Oo][Nn][Ee])\s*$"}),
    Syntax(v.EXPECTED_THRESHOLD, v.format_threshold),
]
AntiAffinityModeValue = Annotated[
    AntiAffinityMode,
    _validator(lambda x: AntiAffinityMode(v.parse_keyword(x, tuple(AntiAffinityMode)))),
    WithJsonSchema({"type": "string", "pattern": _any_case(*AntiAffinityMode)}),
    Syntax(" or ".join(AntiAffinityMode), _render_str),
]
SpreadLevel = Annotated[
    str | None,
    PlainValidator(_spread),
    WithJsonSchema({"type": "string", "pattern": _NAME_PATTERN}),
    Syntax(
        "a fault-domain level defined under nodes.fault-domains, or none", v.format_optional_name
    ),
]
MaxUnavailable = Annotated[
    int,
    _validator(partial(v.parse_int, minimum=0)),
    WithJsonSchema(_int_schema(0)),
    Syntax("an integer of at least 0 (0: never stopped on purpose)", _render_int),
]

# --- file-only fields -------------------------------------------------------------------

Name = Annotated[
    str,
    _validator(v.parse_name),
    WithJsonSchema({"type": "string", "pattern": _NAME_PATTERN}),
    Syntax(v.EXPECTED_NAME, _render_str),
]
Text = Annotated[
    str,
    _validator(v.parse_string),
    WithJsonSchema({"type": "string"}),
    Syntax("a string", _render_str),
]
LabelKey = Annotated[
    str,
    _validator(v.parse_label_key),
    WithJsonSchema({"type": "string", "pattern": r"^[^\s=]+$"}),
    Syntax(v.EXPECTED_LABEL_KEY, _render_str),
]
Count = Annotated[
    int,
    _validator(partial(v.parse_int, minimum=0)),
    WithJsonSchema(_int_schema(0)),
    Syntax("an integer of at least 0", _render_int),
]
PositiveCount = Annotated[
    int,
    _validator(partial(v.parse_int, minimum=1)),
    WithJsonSchema(_int_schema(1)),
    Syntax("an integer of at least 1", _render_int),
]
Aggressiveness = Annotated[
    int,
    _validator(partial(v.parse_int, minimum=1, maximum=5)),
    WithJsonSchema(_int_schema(1, 5)),
    Syntax("an integer from 1 (gentle) to 5 (eager)", _render_int),
]
PriorityGap = Annotated[
    int,
    _validator(partial(v.parse_int, minimum=1, maximum=v.PRIORITY_MAX)),
    WithJsonSchema(_int_schema(1, v.PRIORITY_MAX)),
    Syntax(f"an integer from 1 to {v.PRIORITY_MAX}", _render_int),
]
Fraction = Annotated[
    float,
    _validator(v.parse_fraction),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?%\s*$"},
            ]
        }
    ),
    Syntax(v.EXPECTED_FRACTION, _render_float),
]
TimeZone = Annotated[
    str,
    _validator(v.parse_timezone),
    WithJsonSchema({"type": "string"}),
    Syntax(v.EXPECTED_TIMEZONE, _render_str),
]
DataModeValue = Annotated[
    DataMode,
    _validator(lambda x: DataMode(v.parse_keyword(x, tuple(DataMode)))),
    WithJsonSchema({"type": "string", "pattern": _any_case(*DataMode)}),
    Syntax("auto, local or shared", _render_str),
]
FailoverModeValue = Annotated[
    FailoverMode,
    _validator(lambda x: FailoverMode(v.parse_keyword(x, tuple(FailoverMode)))),
    WithJsonSchema({"type": "string", "pattern": _any_case(*FailoverMode)}),
    Syntax("confirmed, speculative or auto", _render_str),
]

SteeringModeValue = Annotated[
    SteeringMode,
    _validator(lambda x: SteeringMode(v.parse_keyword(x, tuple(SteeringMode)))),
    WithJsonSchema({"type": "string", "pattern": _any_case(*SteeringMode)}),
    Syntax("standby, strict or open", _render_str),
]

RebalanceModeValue = Annotated[
    RebalanceMode,
    _validator(lambda x: RebalanceMode(v.parse_keyword(x, tuple(RebalanceMode)))),
    WithJsonSchema({"type": "string", "pattern": _any_case(*RebalanceMode)}),
    Syntax("off, on-join or periodic", _render_str),
]
