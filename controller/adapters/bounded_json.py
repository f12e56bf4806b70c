"""JSON from outside, read within limits: its size, its nesting depth, plain numbers.

Python's json module recurses once per level of nesting, so a few thousand `[` in a
plugin's answer raise RecursionError, which is no ValueError and went through every
`except ValueError` up to the controller's task group. Every JSON the controller or the
agent reads from outside (placement plugins, agents, the health webhook, the decision
log, snapshot files) goes through `parse_json`: the depth is counted before parsing, in
C-speed passes over the text, and `NaN` or `Infinity` (which json accepts and JSON does
not have) is refused, as is an integer too long for Python to read. Whatever is wrong is
one `JsonInputError`, a ValueError naming it.

Every step is linear in the input's size: an attacker's bytes cost their length, never
its square (tests/adapters/test_parse_cost.py measures it for every outside input).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

MAX_DEPTH = 32  # the deepest any input has is 4 (an agent's report)
# A string, or what is left of one that is never closed. The closing quote is optional
# and nothing backtracks (possessive quantifiers), so every match succeeds where it
# starts and the scan goes once over the text. A pattern that must find the closing
# quote fails on `"` + `\\"` * k, and the engine tries again from each later quote:
# k squared steps in one C call, holding the GIL (32 KiB took 3.8 s).
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
_OPEN, _CLOSE = b"[{", b"]}"
_NOT_BRACKET = bytes(b for b in range(256) if b not in _OPEN + _CLOSE)
_STEP = {**dict.fromkeys(_OPEN, 1), **dict.fromkeys(_CLOSE, -1)}


class JsonInputError(ValueError):
    """JSON that is too large, too deep, or not JSON."""


def nesting_depth(raw: bytes) -> int:
    """How deeply arrays and objects nest in `raw` (brackets within strings do not count)."""
    brackets = _STRING.sub(b'""', raw).translate(None, _NOT_BRACKET)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _no_constant(name: str) -> Any:
    raise JsonInputError(f"{name} is not a JSON number")


def parse_json(raw: bytes | str, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """The value `raw` holds, or JsonInputError saying why not."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if len(data) > max_bytes:
        raise JsonInputError(f"{len(data)} bytes, over the {max_bytes} limit")
    depth = nesting_depth(data)
    if depth > max_depth:
        raise JsonInputError(f"nested {depth} deep, over the {max_depth} limit")
    try:
        return json.loads(data, parse_constant=_no_constant)
    except JsonInputError:
        raise
    except RecursionError:  # cannot happen within the depth limit; never a crash if it does
        raise JsonInputError("nested too deep") from None
    except UnicodeDecodeError as exc:
        raise JsonInputError(f"not UTF-8: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise JsonInputError(
            f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except ValueError as exc:  # an integer of more digits than int() reads (4300)
        raise JsonInputError(f"not a usable number: {exc}") from None
