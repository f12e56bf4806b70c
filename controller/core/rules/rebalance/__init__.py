"""Rebalancing: count skew and CPU/memory load, with the hysteresis that keeps it calm.

- `rebalance_rule`: the rule, `plan_rebalance`;
- `triggers`: node joins and returns, periodic rounds, persistence (core/kernel/settling
  says how long a returned node waits; core/kernel/levels what each aggressiveness means);
- `controller.core.counts` (below the rules: health's deny labels read it too): Swarm's
  own scale-up and scale-down, simulated, to plan a surge-and-trim;
- `load`: node load from reservations or measured usage, and moves off hot nodes;
- `cycle`: one cycle's working state, budgets, and the checks every move passes;
- `moves` and `shed`: choosing and writing the move off a hot node.
"""

from controller.core.context import RuleSpec
from controller.core.decisions import EventCount, Outcome
from controller.core.rules.rebalance.name import RULE
from controller.core.rules.rebalance.rebalance_memory import REBALANCE_MEMORY
from controller.core.rules.rebalance.rebalance_rule import plan_rebalance

SPEC = RuleSpec(
    RULE,
    plan_rebalance,
    own_memory=REBALANCE_MEMORY,
    outcomes=frozenset(
        {Outcome.KEEP, Outcome.LIFT, Outcome.MOVE, Outcome.REBALANCE, Outcome.SKIP, Outcome.WAIT}
    ),
    events=(EventCount("move", frozenset({Outcome.MOVE, Outcome.REBALANCE})),),
)

__all__ = ["SPEC"]
