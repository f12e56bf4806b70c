"""Decisions say why: for every action, and for every deliberate inaction."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Decision:
    rule: str  # the rule that decided, e.g. "adoption", "guard"
    subject: str  # "service web", "node node-2"
    outcome: str  # short verb: "adopt", "skip", "defer", "keep", ...
    reason: str  # a sentence an operator can act on
    action: str | None = None  # describe(action) when the decision produced one

    def line(self) -> str:
        text = f"[{self.rule}] {self.subject}: {self.outcome} - {self.reason}"
        return text if self.action is None else f"{text} ({self.action})"
