"""Replay a record of cycles (runtime/cycle_recorder) through today's controller.

A fresh controller is built as the runtime builds one: the adapters' observer and
executor on a client connected to an engine that answers from the record
(fake_engine), the reconciler with the record's clock, standby word, policy and
outside inputs, and its memory carried from the first recorded cycle on, as a
controller started at that moment would. Each cycle gives what it wrote (as sent to
the engine) and decided, in canonical JSON: the result to compare.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import json
import lzma
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace

from controller.adapters.engine import ClusterObserver
from controller.adapters.policy_file import load_policy_text
from controller.adapters.writes import docker_executor
from controller.core import model, outside_inputs
from controller.core.model import ClusterSnapshot
from controller.policy import Policy
from controller.runtime.reconciler import Reconciler
from controller.runtime.tracing import DecisionLog
from tests.replay.fake_engine import Answers, FakeEngine

_TYPES: dict[str, type] = {
    name: cls
    for module in (outside_inputs, model)
    for name, cls in vars(module).items()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls)
}


def _typed(hint: Any, value: Any) -> Any:
    """`value` (plain JSON) as the field's annotation wants it: enums, tuples."""
    if value is None:
        return None
    if isinstance(value, dict) and "__type__" in value:
        return decode(value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is tuple and isinstance(value, list):
        item = args[0] if args else Any
        return tuple(_typed(item, v) for v in value)
    if origin in (dict, Mapping) and isinstance(value, dict):
        item = args[1] if len(args) == 2 else Any
        return {k: _typed(item, v) for k, v in value.items()}
    if origin is typing.Union or type(hint).__name__ == "UnionType":
        for option in args:
            if option is not type(None):
                try:
                    return _typed(option, value)
                except (TypeError, ValueError):
                    continue
    return value


def decode(value: Any) -> Any:
    """A value `cycle_recorder.plain` wrote, as the dataclass it was."""
    if isinstance(value, list):
        return tuple(decode(v) for v in value)
    if not isinstance(value, dict) or "__type__" not in value:
        return value
    fields = dict(value)
    cls = _TYPES[fields.pop("__type__")]
    hints = typing.get_type_hints(cls)
    return cls(**{k: _typed(hints.get(k, Any), v) for k, v in fields.items()})


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def decision_record(decision: Any) -> dict[str, Any]:
    code = getattr(decision, "code", None)
    return {
        "rule": str(decision.rule),
        "subject": decision.subject,
        "outcome": str(decision.outcome),
        "code": None if code is None else str(code),
        "reason": decision.reason,
        "extra_replica_seconds": round(getattr(decision, "extra_replica_seconds", 0.0), 6),
    }


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        for line in f:
            if line.strip():
                yield json.loads(line)


@dataclass
class _State:
    now: float = 0.0
    standby: str | None = None
    policy: Policy | None = None
    outside: dict[str, Any] | None = None


def _enrich(state: _State) -> Any:
    def enrich(snapshot: ClusterSnapshot, now: float) -> ClusterSnapshot:
        added = state.outside or {}
        changes: dict[str, Any] = {}
        for name in ("health", "workload", "unavailable_sources", "liveness"):
            extra = decode(added.get(name) or [])
            if extra:
                changes[name] = (*getattr(snapshot, name), *extra)
        for name in ("usage", "plugins"):
            if added.get(name) is not None:
                value = added[name]
                changes[name] = (
                    {k: decode(v) for k, v in value.items()} if name == "usage" else decode(value)
                )
        return dataclasses.replace(snapshot, **changes) if changes else snapshot

    return enrich


def _grouped(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The records, each cycle with the outside inputs recorded after it folded in."""
    pending: dict[str, Any] | None = None
    for record in records:
        if record["t"] == "outside" and pending is not None and record["n"] == pending["n"]:
            pending["outside"] = record
            continue
        if record["t"] == "outcome":
            continue
        if pending is not None:
            yield pending
            pending = None
        if record["t"] == "cycle":
            pending = dict(record)
        else:
            yield record
    if pending is not None:
        yield pending


def replay(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Each recorded cycle's writes and decisions, replayed on the code of today."""
    engine = FakeEngine()
    state = _State(policy=Policy.default())
    histories: dict[int, dict[str, Any]] = {}
    with engine.client() as client:
        reconciler: Reconciler | None = None
        for record in _grouped(records):
            kind = record["t"]
            if kind == "start":
                reconciler = Reconciler(
                    observe=ClusterObserver(client, history_every=lambda: 0.0),
                    executor=docker_executor(client),
                    policy=lambda: state.policy,  # type: ignore[arg-type,return-value]
                    tracer=trace.NoOpTracer(),
                    decision_log=DecisionLog(io.StringIO(), "logfmt"),
                    clock=lambda: state.now,
                    standby=lambda: state.standby,
                    enrich=_enrich(state),
                    startup_watch=bool(record.get("watches", True)),
                )
            elif kind == "policy":
                text = record.get("text")
                state.policy = Policy.default() if text is None else load_policy_text(text)
            elif kind == "history":
                histories[int(record["seq"])] = record
            elif kind == "cycle":
                assert reconciler is not None, "a cycle before the record's start"
                history = histories.get(int(record.get("history") or 0), {})
                engine.answers = Answers(
                    nodes=record["nodes"],
                    services=record["services"],
                    tasks=record["tasks"],
                    history=history.get("tasks") or [],
                    swarm=history.get("swarm"),
                    mirror=record.get("mirror"),
                )
                state.now = float(record["now"])
                state.standby = record.get("standby")
                state.outside = record.get("outside")
                result = reconciler.reconcile({"replay"})
                writes = sorted(canonical(w) for w in engine.take_writes())
                decisions = sorted(canonical(decision_record(d)) for d in result.decisions)
                yield {
                    "n": record["n"],
                    "now": record["now"],
                    "writes": [json.loads(w) for w in writes],
                    "decisions": [json.loads(d) for d in decisions],
                    "conflict": result.conflict,
                }
