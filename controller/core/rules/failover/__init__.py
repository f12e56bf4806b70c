"""Failover: a node's lost replicas started at once rather than after Swarm's restart
delay, on a confirmed loss (`failover_rule`) or a suspected one (`speculative`).

The speculative rule's parts: `speculation_notes` and `speculation_memory` (what it
remembers), `speculate_room` (the free nodes a surge may take), `stacked_surge` (a surge
beside a replica when every node holds one), `surge_charges` (what the budget is charged
for), `false_alarm` (the trim after one) and `speculation_handover` (a confirmed loss
taking over the surge)."""

from controller.core.context import RuleSpec
from controller.core.decisions import Code, EventCount, Outcome
from controller.core.rules.failover.failover_exemptions import FAILOVER_EXEMPTIONS
from controller.core.rules.failover.failover_rule import plan_failover
from controller.core.rules.failover.name import FAILOVER, SPECULATIVE
from controller.core.rules.failover.speculation_memory import SPECULATION_MEMORY
from controller.core.rules.failover.speculative import plan_speculative

# Its writes go out right after the node writes, together: a surge must not wait behind
# a slow or refused write of another rule.
FAILOVER_SPEC = RuleSpec(
    FAILOVER,
    plan_failover,
    writes_first=True,
    rollout_exemptions=FAILOVER_EXEMPTIONS,
    memory=("placing",),
    outcomes=frozenset(
        {
            Outcome.FORGET,
            Outcome.HOLD,
            Outcome.PENDING,
            Outcome.SKIP,
            Outcome.SURGE,
            Outcome.TRIM,
            Outcome.WAIT,
            Outcome.WITHDRAW,
        }
    ),
    events=(EventCount("failover", frozenset({Outcome.SURGE})),),
)
SPECULATIVE_SPEC = RuleSpec(
    SPECULATIVE,
    plan_speculative,
    own_memory=SPECULATION_MEMORY,
    memory=("lost",),
    outcomes=frozenset(
        {Outcome.CONFIRM, Outcome.SPECULATE, Outcome.SURGE, Outcome.TRIM, Outcome.WAIT}
    ),
    codes=frozenset({Code.FALSE_ALARM}),
    events=(
        EventCount(
            "false_alarm",
            frozenset({Outcome.TRIM}),
            code=Code.FALSE_ALARM,
            help="Speculative surges trimmed back because the suspected node was alive.",
            cost="Replica-seconds the surges of false alarms ran for nothing (their cost; "
            "an upper bound, counted from the surge's write).",
        ),
    ),
)

__all__ = ["FAILOVER_SPEC", "SPECULATIVE_SPEC"]
