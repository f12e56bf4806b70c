"""A record of every cycle's inputs, as the engine and the outside sources gave them.

With `PLACEMENT_RECORD_DIR` set, the controller writes one JSON-lines file per run:
the raw Docker Engine API answers each cycle observed (nodes, services, the tasks Swarm
wants running, the mirror's config; the task history and the swarm's dispatcher
settings whenever they are listed), the outside inputs folded in before the plan
(health reports, liveness signals, plugin advice, agent usage and events), the clock,
the lease's standby word and the policy file's text when it changes. Nothing in it is
an internal type of the planner, so a record made by one version of the controller
replays through the adapters of another (`tests/replay`): the same inputs must give
the same writes and decisions. What the cycle decided and wrote is recorded too, as
the real run saw it, for reading; the replay compares against its own runs.

Join tokens and other secrets are not recorded: of the swarm's answer only the
dispatcher settings are kept.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from controller.core.actions import Action, describe
from controller.core.decisions import Decision
from controller.core.model import ClusterSnapshot
from controller.runtime.policy_source import PolicySource

RECORD_DIR_ENV = "PLACEMENT_RECORD_DIR"
FORMAT = "swarm-placement/cycles-v1"
_runs = itertools.count(1)


def plain(value: object) -> Any:
    """A value of the snapshot's outside inputs as JSON: dataclasses tagged with their
    class's name (tests/replay decodes them by it), enums by value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"__type__": type(value).__name__, **fields}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def decision_record(decision: Decision) -> dict[str, Any]:
    return {
        "rule": decision.rule,
        "subject": decision.subject,
        "outcome": str(decision.outcome),
        "code": None if decision.code is None else str(decision.code),
        "reason": decision.reason,
    }


class CycleRecorder:
    """Writes the record of one controller run; safe to call from the worker and the
    resync timer's thread (one lock, one line per call)."""

    def __init__(self, out: TextIO, policy: PolicySource) -> None:
        self._out = out
        self._policy = policy
        self._lock = threading.Lock()
        self._policy_digest: str | None = None
        self._observed: dict[str, Any] | None = None
        self._now: float | None = None
        self._cycles = 0

    @classmethod
    def from_env(
        cls, policy: PolicySource, *, dry_run: bool, watches: bool
    ) -> CycleRecorder | None:
        where = os.environ.get(RECORD_DIR_ENV)
        if not where:
            return None
        directory = Path(where)
        directory.mkdir(parents=True, exist_ok=True)
        name = f"run-{os.getpid()}-{next(_runs)}-{threading.get_ident()}.jsonl"
        recorder = cls((directory / name).open("w", encoding="utf-8"), policy)
        recorder._line({"t": "start", "format": FORMAT, "dry_run": dry_run, "watches": watches})
        return recorder

    def _line(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self._out.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
            self._out.flush()

    def tap(self, kind: str, answers: Mapping[str, Any]) -> None:
        """The observer's raw answers: "history" when the finished tasks are listed,
        "observe" for a cycle's listings (kept until the cycle's clock and standby word)."""
        if kind == "history":
            self._line({"t": "history", **answers})
        else:
            self._observed = dict(answers)
            self._now = None

    def clock(self, clock: Callable[[], float]) -> Callable[[], float]:
        """The reconciler's clock: its first reading after an observation is the cycle's
        `now`."""

        def recording() -> float:
            now = clock()
            if self._observed is not None and self._now is None:
                self._now = now
            return now

        return recording

    def standby(self, word: Callable[[], str | None]) -> Callable[[], str | None]:
        """The reconciler's standby word, asked once a cycle right after its clock: the
        cycle is recorded then, with the policy first when it changed."""

        def recording() -> str | None:
            said = word()
            if self._observed is not None:
                self._cycle(said)
            return said

        return recording

    def _cycle(self, standby: str | None) -> None:
        digest = self._policy.digest
        if digest != self._policy_digest:
            path = self._policy.path
            text = path.read_text(encoding="utf-8") if path is not None else None
            self._line({"t": "policy", "text": text})
            self._policy_digest = digest
        self._cycles += 1
        record = {"t": "cycle", "n": self._cycles, "now": self._now, "standby": standby}
        self._line({**record, **(self._observed or {})})
        self._observed = None

    def enrich(
        self, enrich: Callable[[ClusterSnapshot, float], ClusterSnapshot]
    ) -> Callable[[ClusterSnapshot, float], ClusterSnapshot]:
        """The reconciler's `enrich`: what the outside inputs added to the cycle's
        snapshot, recorded after the cycle."""

        def recording(snapshot: ClusterSnapshot, now: float) -> ClusterSnapshot:
            enriched = enrich(snapshot, now)
            added = {
                "health": enriched.health[len(snapshot.health) :],
                "workload": enriched.workload[len(snapshot.workload) :],
                "unavailable_sources": enriched.unavailable_sources[
                    len(snapshot.unavailable_sources) :
                ],
                "liveness": enriched.liveness[len(snapshot.liveness) :],
                "usage": enriched.usage if enriched.usage != snapshot.usage else None,
                "plugins": enriched.plugins if enriched.plugins != snapshot.plugins else None,
            }
            self._line({"t": "outside", "n": self._cycles, **plain(added)})
            return enriched

        return recording

    def outcome(
        self, decisions: tuple[Decision, ...], executed: list[Action], conflict: str | None
    ) -> None:
        """What the real run decided and wrote (for reading; the replay makes its own)."""
        self._line(
            {
                "t": "outcome",
                "n": self._cycles,
                "decisions": [decision_record(d) for d in decisions],
                "executed": [describe(a) for a in executed],
                "conflict": conflict,
            }
        )
