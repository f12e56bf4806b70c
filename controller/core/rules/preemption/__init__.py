"""Preemption: room for a pending higher-priority service, taken from lower-priority
ones (`preemption_rule`, with who may be a victim in `victims`), and given back once it
is no longer needed (`restore`)."""

from controller.core.context import RuleSpec
from controller.core.decisions import EventCount, Outcome
from controller.core.rules.preemption.name import PREEMPTION, RESTORE
from controller.core.rules.preemption.preemption_rule import plan_preemption
from controller.core.rules.preemption.restore import plan_restores

PREEMPTION_SPEC = RuleSpec(
    PREEMPTION,
    plan_preemption,
    outcomes=frozenset({Outcome.CANNOT_HELP, Outcome.PREEMPT, Outcome.SKIP, Outcome.WAIT}),
    events=(EventCount("preemption", frozenset({Outcome.PREEMPT})),),
)
RESTORE_SPEC = RuleSpec(
    RESTORE,
    plan_restores,
    outcomes=frozenset({Outcome.KEEP, Outcome.RESTORE, Outcome.SKIP, Outcome.WAIT}),
)

__all__ = ["PREEMPTION_SPEC", "RESTORE_SPEC"]
