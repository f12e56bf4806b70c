"""Decisions say why: for every action, and for every deliberate inaction."""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from enum import StrEnum

from controller.core.actions import Action, describe


class Outcome(StrEnum):
    """What a decision does: a short verb. The values are what logs and metric labels show."""

    ADOPT = "adopt"
    ALLOW = "allow"
    BACKOFF = "backoff"
    CANNOT_HELP = "cannot-help"
    CONFIRM = "confirm"
    DEFER = "defer"
    DEGRADED = "degraded"
    EVICT = "evict"
    FAIL = "fail"
    FAILED = "failed"
    FORGET = "forget"
    HOLD = "hold"
    IGNORE = "ignore"
    KEEP = "keep"
    KEEP_LAST_GOOD = "keep-last-good"
    LABEL = "label"
    LIFT = "lift"
    MIRROR = "mirror"
    MOVE = "move"
    MOVE_OFF = "move-off"
    PANIC = "panic"
    PENDING = "pending"
    PREEMPT = "preempt"
    QUARANTINE = "quarantine"
    REBALANCE = "rebalance"
    RECOVER = "recover"
    REFUSE = "refuse"
    RELEASE = "release"
    RESTORE = "restore"
    SKIP = "skip"
    SPECULATE = "speculate"
    STEER = "steer"
    SUSPECT = "suspect"
    SURGE = "surge"
    TIDY = "tidy"
    TRIM = "trim"
    UNMANAGED = "unmanaged"
    WAIT = "wait"
    WATCH = "watch"
    WITHDRAW = "withdraw"
    WRITE = "write"
    YIELD = "yield"


class Code(StrEnum):
    """A stable tag for a kind of decision, so counting it (metrics) never reads the reason."""

    FAILBACK = "failback"  # an owners move back onto a preferred owner
    FALSE_ALARM = "false-alarm"  # a speculative surge trimmed: the node was alive
    POSSIBLE_UNENFORCED = "possible-unenforced"  # tasks still on a node no possible owner


@dataclass(frozen=True, slots=True)
class Decision:
    rule: str  # the rule that decided, e.g. "adoption", "guard"
    subject: str  # "service web", "node node-2" (actions.subject_of)
    outcome: Outcome
    reason: str  # a sentence an operator can act on
    # The write the decision produced. Left out of the hash: actions hold dicts.
    action: Action | None = field(default=None, hash=False)
    code: Code | None = None
    # What the decision cost in replicas run for nothing (a false alarm's surged
    # replicas times how long they stood), for a metric; not part of what is logged.
    extra_replica_seconds: float = field(default=0.0, compare=False)

    @property
    def action_text(self) -> str | None:
        return None if self.action is None else describe(self.action)

    def line(self) -> str:
        return _line(self.rule, self.subject, self.outcome, self.reason, self.action_text)

    def logged(self) -> LoggedDecision:
        """The decision as the log writes it: what "repeated unchanged" compares."""
        outcome = str(self.outcome)  # plain, as read back from the log
        return LoggedDecision(self.rule, self.subject, outcome, self.reason, self.action_text)

    def as_dict(self) -> dict[str, str | None]:
        return self.logged().as_dict()


@dataclass(frozen=True, slots=True)
class LoggedDecision:
    """A decision read back from the log: its action survives only as text."""

    rule: str
    subject: str
    outcome: str
    reason: str
    action_text: str | None = None

    def line(self) -> str:
        return _line(self.rule, self.subject, self.outcome, self.reason, self.action_text)

    def as_dict(self) -> dict[str, str | None]:
        """The fields as JSON documents (`plan --json`, `explain --json`) show them."""
        return {
            "rule": self.rule,
            "subject": self.subject,
            "outcome": str(self.outcome),
            "reason": self.reason,
            "action": self.action_text,
        }


@dataclass(frozen=True, slots=True)
class EventCount:
    """An event a rule counts (runtime/metrics: the counter `placement_<event>s`), declared
    with the rule in its spec: one of its decisions with one of `outcomes` (and `code`,
    when given) whose write was executed. With `explains`, a decision with no write of
    its own that explains the executed write to its subject (the owners rule's per-task
    moves explain its one constraint write)."""

    event: str
    outcomes: frozenset[Outcome]
    code: Code | None = None
    explains: bool = False
    help: str = ""  # the counter's help text; "": "<Event>s started."
    # The help text of a second counter, `placement_<event>_replica_seconds`, of what the
    # events cost (`Decision.extra_replica_seconds`); "": none.
    cost: str = ""

    @property
    def help_text(self) -> str:
        return self.help or f"{self.event.capitalize()}s started."

    def counts(self, decision: Decision, executed: Sequence[Action], subjects: Set[str]) -> bool:
        if decision.outcome not in self.outcomes:
            return False
        if self.code is not None and decision.code is not self.code:
            return False
        if self.explains:
            return decision.action is None and decision.subject in subjects
        return decision.action is not None and decision.action in executed


def _line(rule: str, subject: str, outcome: str, reason: str, action: str | None) -> str:
    text = f"[{rule}] {subject}: {outcome} - {reason}"
    return text if action is None else f"{text} ({action})"
