"""The nodes rule: every label of ours on a node, and its availability, in one write.

- `node_rule`: the rule itself, which gathers every reason a node's labels change;
- `possible_marks`: the possible-owner marks each node should carry;
- `deny`, `workload`: deny labels from health reports and plugin vetoes, and moving a
  service off a node where it fails.
"""

from __future__ import annotations

from controller.core.context import RuleSpec
from controller.core.decisions import Outcome
from controller.core.rules.nodes.name import RULE
from controller.core.rules.nodes.node_rule import plan_nodes

SPEC = RuleSpec(
    RULE,
    plan_nodes,
    # With the health deny labels and move-offs it decides (`deny`, `workload`).
    outcomes=frozenset(
        {Outcome.HOLD, Outcome.IGNORE, Outcome.KEEP, Outcome.LABEL, Outcome.MOVE_OFF, Outcome.WAIT}
    ),
)

__all__ = ["SPEC"]
