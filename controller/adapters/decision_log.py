"""Reading the controller's decision log back: the lines `run` writes on stdout.

Both formats are read (logfmt, the default, and `--log-format json`), also with the
prefix `docker service logs` puts before each line, so an operator can pipe the log of
a deployed controller into `explain`. Lines that are not decisions, or whose JSON is
too large, too deep or broken (bounded_json.py), are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from controller.adapters.bounded_json import JsonInputError, parse_json
from controller.core.decisions import LoggedDecision
from controller.core.explain import Past

_LOGFMT = re.compile(r"(?:^|[\s|])decision (time=.*)$")
_PAIR = re.compile(r'([a-z_]+)=("(?:[^"\\]|\\.)*"|\S*)')
FIELDS = ("rule", "subject", "outcome", "reason")
MAX_LINE_BYTES = 1 << 20  # a line longer than any decision: not one of ours


def _from_fields(fields: dict[str, str]) -> Past | None:
    if not all(isinstance(fields.get(k), str) for k in ("time", *FIELDS)):
        return None
    action = fields.get("action")
    return Past(
        time=fields["time"],
        decision=LoggedDecision(
            rule=fields["rule"],
            subject=fields["subject"],
            outcome=fields["outcome"],
            reason=fields["reason"],
            action_text=action if isinstance(action, str) else None,
        ),
    )


def _logfmt(text: str) -> dict[str, str]:
    fields = {}
    for key, raw in _PAIR.findall(text):
        if raw.startswith('"'):
            try:
                fields[key] = parse_json(raw, max_bytes=MAX_LINE_BYTES)
            except JsonInputError:
                return {}
        else:
            fields[key] = raw
    return fields


def parse_decision_line(line: str) -> Past | None:
    line = line.rstrip("\n")
    match = _LOGFMT.search(line)
    if match:
        return _from_fields(_logfmt(match.group(1)))
    start = line.find('{"')
    if start >= 0:
        try:
            data = parse_json(line[start:], max_bytes=MAX_LINE_BYTES)
        except JsonInputError:
            return None
        if isinstance(data, dict) and data.get("event") == "decision":
            return _from_fields(data)
    return None


def read_decisions(lines: Iterable[str]) -> list[Past]:
    return [past for line in lines if (past := parse_decision_line(line)) is not None]
