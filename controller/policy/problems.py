"""Validation problems: pydantic's errors turned into one plain sentence each.

A problem keeps its field path (`services[1].priority`) rather than a position: the policy
layer never sees YAML, so the file adapter maps paths to lines and columns.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

Loc = tuple[str | int, ...]
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_MAX_VALUE_TEXT = 60


@dataclass(frozen=True, slots=True)
class PolicyProblem:
    """One thing wrong in a document: where (path), what (message), and the value found."""

    loc: Loc
    message: str  # starts with "expected", "missing" or "unknown field"
    value: object = None
    show_value: bool = True
    at_key: bool = False  # point at the key (unknown fields, bad names), not the value

    @property
    def path(self) -> str:
        return format_path(self.loc)

    def describe(self) -> str:
        """`path = value: message`, the part after the file position."""
        where = self.path or "(document)"
        shown = f" = {render_value(self.value)}" if self.show_value else ""
        return f"{where}{shown}: {self.message}"


class PolicyValidationError(ValueError):
    def __init__(self, problems: Sequence[PolicyProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(problem.describe() for problem in self.problems))


def format_path(loc: Loc) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part)}]"
    return text


def render_value(value: object, depth: int = 0) -> str:
    """A short JSON-like rendering; long or deep values are cut, never repr'd in full."""
    if isinstance(value, str | int | float | bool) or value is None:
        text = json.dumps(value, ensure_ascii=False)
    elif depth >= 2:
        text = "{…}" if isinstance(value, dict) else "[…]"
    elif isinstance(value, dict):
        items = [f"{render_value(k, 2)}: {render_value(v, depth + 1)}" for k, v in value.items()]
        text = "{" + ", ".join(items[:6]) + (", …" if len(items) > 6 else "") + "}"
    elif isinstance(value, list | tuple):
        items = [render_value(item, depth + 1) for item in value]
        text = "[" + ", ".join(items[:6]) + (", …" if len(items) > 6 else "") + "]"
    else:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _MAX_VALUE_TEXT else text[: _MAX_VALUE_TEXT - 1] + "…"


def unwrap_annotation(tp: Any) -> Any:
    """Strip Annotated and `| None` from an annotation."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, UnionType):
            args = [arg for arg in get_args(tp) if arg is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def model_at(root: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model class that validates the mapping found at `loc`, if any."""
    tp: Any = root
    for part in loc:
        tp = unwrap_annotation(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            fields = {info.alias or name: info for name, info in tp.model_fields.items()}
            if not isinstance(part, str) or part not in fields:
                return None
            tp = fields[part].annotation
        elif get_origin(tp) in (list, tuple) and isinstance(part, int):
            tp = get_args(tp)[0]
        elif get_origin(tp) is dict and isinstance(part, str):
            tp = get_args(tp)[1]
        else:
            return None
    tp = unwrap_annotation(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def field_names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _unknown_field(root: type[BaseModel], loc: Loc) -> str:
    model = model_at(root, loc[:-1])
    if model is None:
        return "unknown field"
    names = field_names(model)
    close = difflib.get_close_matches(str(loc[-1]), names, n=1)
    if close:
        return f"unknown field; did you mean {close[0]}?"
    return f"unknown field; expected one of: {', '.join(names)}"


def _expected_from_pydantic(kind: str, message: str) -> str:
    if kind in ("model_type", "model_attributes_type", "dict_type", "mapping_type"):
        return "expected a mapping"
    if kind in ("list_type", "tuple_type"):
        return "expected a list"
    # Pydantic's own wording, made to read like ours: "Input should be X" -> "expected X".
    return re.sub(r"^Input should be ", "expected ", message)


def problems_from(exc: ValidationError, root: type[BaseModel]) -> list[PolicyProblem]:
    problems = []
    for error in exc.errors(include_url=False):
        loc: Loc = tuple(error["loc"])
        kind, value = error["type"], error.get("input")
        at_key = bool(loc) and loc[-1] == "[key]"
        if at_key:
            loc = loc[:-1]
            value = loc[-1] if loc else value
        if kind == "extra_forbidden":
            problem = PolicyProblem(loc, _unknown_field(root, loc), value, at_key=True)
        elif kind == "missing":
            hint = " (apiVersion: placement/v1)" if loc == ("apiVersion",) else ""
            problem = PolicyProblem(loc, f"missing; this field is required{hint}", show_value=False)
        else:
            message = _expected_from_pydantic(kind, error["msg"])
            problem = PolicyProblem(loc, message, value, at_key=at_key)
        problems.append(problem)
    return problems
