"""Release: a service that leaves management gets back exactly what the controller wrote.

- `release_rule`: the rule, `plan_release`;
- `release_plan`: the take-back writes of one service or node, and `release_refusal`, the
  check that lets a write reach an unmanaged service only as such a take-back (the guards
  ask it through the registry; `swarm-placement release` uses it too).
"""

from __future__ import annotations

from controller.core.context import RuleSpec
from controller.core.decisions import Outcome
from controller.core.rules.release.name import RULE
from controller.core.rules.release.release_plan import release_refusal
from controller.core.rules.release.release_rule import plan_release

SPEC = RuleSpec(
    RULE,
    plan_release,
    unmanaged=release_refusal,
    outcomes=frozenset({Outcome.KEEP, Outcome.RELEASE, Outcome.WAIT}),
)

__all__ = ["SPEC", "release_refusal"]
