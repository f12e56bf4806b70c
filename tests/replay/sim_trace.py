"""The model check's sequences as a trace: every plan() it runs, what went in and out.

The model check (tests/core/test_safety_machine.py) drives the real plan() on the
what-if simulator through sequences Hypothesis draws. Its inputs are the planner's own
types, which change when the planner's internals do, so they are not stored: the
sequences are, as their steps (the machine's rules and their arguments: the sequences
the machine found, and a fixed count of derandomized draws made under
PYTHONHASHSEED=0). Each run of them, step by step as the model check runs a found
sequence, writes a trace of every plan() call: a summary of the simulated swarm it saw
and the writes and decisions it returned. Two versions of the planner are compared by
their traces on the same steps; the first call whose output differs is the divergence.

A write is traced as the adapters send it to the engine (tests/replay/fake_engine):
the object's spec as the simulator holds it, with the action applied by
adapters/writes, so its form does not depend on the action's fields. The mirror's
labels are kept as written, so a write that drops an entry shows it.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from controller.adapters.writes import execute_action
from controller.core.actions import target_of
from controller.core.mirror import MIRROR_CONFIG
from controller.core.model import ClusterSnapshot
from tests.replay.engine_replay import canonical, decision_record
from tests.replay.fake_engine import Answers, FakeEngine

EXAMPLES = 20
STEPS = 25


def _value(v: Any) -> Any:
    return getattr(v, "value", v)


def _service_attrs(s: Any) -> dict[str, Any]:
    mode = {"Replicated": {"Replicas": s.replicas}} if s.replicas is not None else {"Global": {}}
    spec = {
        "Name": s.name,
        "Labels": dict(s.labels),
        "Mode": mode,
        "TaskTemplate": {"Placement": {"Constraints": list(s.constraints)}},
    }
    return {"ID": s.id, "Version": {"Index": s.version}, "Spec": spec}


def _node_attrs(n: Any) -> dict[str, Any]:
    spec = {
        "Labels": dict(n.labels),
        "Role": _value(n.role),
        "Availability": _value(n.availability),
    }
    return {"ID": n.id, "Version": {"Index": n.version}, "Spec": spec}


def summary(snapshot: ClusterSnapshot) -> dict[str, Any]:
    """What the simulated swarm showed, in plain values: to tell a changed input (the
    sequence went elsewhere) from a changed output."""
    tasks = Counter(
        f"{t.service_id}@{t.node_id}:{_value(t.state)}" for t in getattr(snapshot, "tasks", ())
    )
    return {
        "nodes": sorted(
            f"{n.id}:{_value(n.state)}:{_value(n.availability)}:{n.version}" for n in snapshot.nodes
        ),
        "services": sorted(
            f"{s.id}:{s.replicas}:{s.version}:{s.update_state}" for s in snapshot.services
        ),
        "tasks": dict(sorted(tasks.items())),
        "health": len(snapshot.health),
        "liveness": len(snapshot.liveness),
    }


class Tracer:
    """Wraps plan(): each call's input summary and its writes (as sent) and decisions."""

    def __init__(self, plan: Callable[..., Any], client: Any, engine: FakeEngine) -> None:
        self._plan, self._client, self._engine = plan, client, engine
        self.lines: list[dict[str, Any]] = []
        self.mirror_labels: dict[str, str] = {}
        # Keyed by id, each beside its action: a freed action's id may be reused.
        self._bodies: dict[int, tuple[Any, dict[str, Any]]] = {}

    def example(self, name: str) -> None:
        self.lines.append({"t": "example", "name": name})
        self.mirror_labels = {}
        self._bodies.clear()

    def plan(self, **kwargs: Any) -> Any:
        result = self._plan(**kwargs)
        snapshot: ClusterSnapshot = kwargs["snapshot"]
        self.lines.append(
            {
                "t": "plan",
                "now": kwargs["now"],
                "in": summary(snapshot),
                "writes": self._writes(snapshot, result.actions),
                "decisions": sorted((decision_record(d) for d in result.decisions), key=canonical),
            }
        )
        return result

    def _writes(self, snapshot: ClusterSnapshot, actions: Any) -> list[dict[str, Any]]:
        mirror = snapshot.mirror
        self._engine.answers = Answers(
            nodes=[_node_attrs(n) for n in snapshot.nodes],
            services=[_service_attrs(s) for s in snapshot.services],
            mirror={
                "ID": mirror.config_id,
                "Version": {"Index": mirror.version},
                "Spec": {"Name": MIRROR_CONFIG, "Labels": dict(self.mirror_labels)},
            }
            if mirror is not None and mirror.config_id
            else None,
        )
        writes = []
        for action in actions:
            execute_action(self._client, action)
            sent = self._engine.take_writes()
            writes.extend(sent)
            if target_of(action)[0] == "mirror" and sent:
                self._bodies[id(action)] = (action, sent[-1]["body"])
        return sorted(writes, key=canonical)

    def applied(self, actions: Any) -> None:
        """The simulated swarm applied these: the mirror's labels are what was written."""
        for action in actions:
            kept = self._bodies.pop(id(action), None)
            if kept is not None and kept[0] is action:
                self.mirror_labels = dict(kept[1].get("Labels") or {})


@contextlib.contextmanager
def _client() -> Iterator[tuple[Any, FakeEngine]]:
    engine = FakeEngine()
    with engine.client() as client:
        yield client, engine


def _machine_module() -> Any:
    from tests.core import test_safety_machine  # noqa: PLC0415

    return test_safety_machine


def encode_step(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return {"__enum__": type(value).__name__, "value": value.value}
        if isinstance(value, tuple):
            return {"__tuple__": [plain(v) for v in value]}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return {"rule": name, "arguments": {k: plain(v) for k, v in arguments.items()}}


def decode_step(step: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    module = _machine_module()

    def typed(value: Any) -> Any:
        if isinstance(value, dict) and "__enum__" in value:
            return getattr(module, value["__enum__"])(value["value"])
        if isinstance(value, dict) and "__tuple__" in value:
            return tuple(typed(v) for v in value["__tuple__"])
        if isinstance(value, list):
            return [typed(v) for v in value]
        return value

    return step["rule"], {k: typed(v) for k, v in step["arguments"].items()}


def draw_sequences(examples: int = EXAMPLES) -> list[dict[str, Any]]:
    """The sequences the machine found, and `examples` drawn ones, as their steps: the
    stored input of the trace. Drawn as the model check draws (derandomized), which
    depends on the hash seed: PYTHONHASHSEED=0."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        raise RuntimeError("the draws depend on the hash seed: run with PYTHONHASHSEED=0")
    module = _machine_module()
    sequences = [
        {"name": f"found {name}", "steps": [encode_step(r, a) for r, a in steps]}
        for name, steps in module.FOUND.items()
    ]
    drawn: list[list[dict[str, Any]]] = []

    def factory() -> Any:
        steps: list[dict[str, Any]] = []
        drawn.append(steps)
        machine = module.SafetyMachine()
        for rule in machine._rules_strategy.rules:
            function = getattr(rule.function, "__wrapped__", rule.function)

            @functools.wraps(function)
            def logged(m: Any, _f: Any = function, **data: Any) -> Any:
                steps.append(encode_step(_f.__name__, data))
                return _f(m, **data)

            rule.function = logged
        return machine

    try:
        run_state_machine_as_test(
            factory,
            settings=settings(
                max_examples=examples,
                stateful_step_count=STEPS,
                deadline=None,
                derandomize=True,
                database=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        for rule in module.SafetyMachine()._rules_strategy.rules:
            rule.function = getattr(rule.function, "__wrapped__", rule.function)
    return sequences + [
        {"name": f"drawn {i}", "steps": steps} for i, steps in enumerate(drawn, 1) if steps
    ]


def trace(sequences: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every plan() call of each sequence, run as the model check runs a found one."""
    module = _machine_module()
    with _client() as (client, engine):
        tracer = Tracer(module.plan, client, engine)
        original_apply = module.SimSwarm.apply

        def apply(swarm: Any, actions: Any) -> None:
            tracer.applied(actions)
            original_apply(swarm, actions)

        module.plan = tracer.plan
        module.SimSwarm.apply = apply
        try:
            for sequence in sequences:
                tracer.example(sequence["name"])
                _run(module.SafetyMachine, [decode_step(s) for s in sequence["steps"]], tracer)
                yield from tracer.lines
                tracer.lines.clear()
        finally:
            module.plan = tracer._plan
            module.SimSwarm.apply = original_apply


def _run(machine_class: Any, steps: list[tuple[str, dict[str, Any]]], tracer: Tracer) -> None:
    try:
        machine = machine_class()
        for name, arguments in steps:
            getattr(machine, name)(**arguments)
            machine.counts_hold()
        machine.teardown()
    except AssertionError as exc:  # an invariant broke: part of the trace
        tracer.lines.append({"t": "violation", "text": str(exc).splitlines()[0]})
