"""The owners rule: possible and preferred owners, failback, anti-affinity and spread.

- `owner_rule`: the rule itself, which plans each steered service's placement, with
  `owner_inputs` (what one service's plan starts from) and `cycle_view` (what the
  services planned earlier in the cycle leave for it);
- `owner_waits`: why a service's tasks stay where they are for now;
- `owner_moves`: how a move is carried out without leaving a service worse off;
- `escape_moves`, `surge_landing`: how a stop-first service leaves nodes it may not stay
  on whatever the layout, and where Swarm starts a surge's tasks;
- `owner_notes`: the decisions that explain a placement;
- `assign`, `fits`, `steer`: the target placement, the room for it as Swarm counts it, and
  the constraints that steer Swarm there; `placement_inputs`, `placement_scores` and
  `standby` hold assign's inputs, its incremental objective and the standby it keeps;
- `owner_gaps`: tasks off every possible owner, and why they wait;
- `stalled_moves`, `widen_only`, `owner_exemptions`: a move that can no longer finish,
  the part of a refused steering write that still widens placement, and the rule's
  exceptions to the guards' rollout rule.
"""

from __future__ import annotations

from controller.core.context import RuleSpec
from controller.core.decisions import Code, EventCount, Outcome
from controller.core.rules.owners.name import RULE
from controller.core.rules.owners.owner_exemptions import OWNER_EXEMPTIONS, salvage_widening
from controller.core.rules.owners.owner_rule import plan_owners

SPEC = RuleSpec(
    RULE,
    plan_owners,
    rollout_exemptions=OWNER_EXEMPTIONS,
    salvage=salvage_widening,
    memory=("placing",),
    outcomes=frozenset(
        {
            Outcome.DEFER,
            Outcome.EVICT,
            Outcome.KEEP,
            Outcome.MOVE,
            Outcome.PENDING,
            Outcome.SKIP,
            Outcome.STEER,
            Outcome.WAIT,
            Outcome.WITHDRAW,
        }
    ),
    codes=frozenset({Code.FAILBACK, Code.POSSIBLE_UNENFORCED}),
    # Its per-task move decisions explain its one constraint write per service.
    events=(
        EventCount("move", frozenset({Outcome.MOVE}), explains=True),
        EventCount("failback", frozenset({Outcome.MOVE}), code=Code.FAILBACK, explains=True),
    ),
)

__all__ = ["SPEC"]
