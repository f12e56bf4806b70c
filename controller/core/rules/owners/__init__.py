"""The owners rule: possible and preferred owners, failback, anti-affinity and spread.

- `owner_rule`: the rule itself, which plans each steered service's placement;
- `owner_waits`: why a service's tasks stay where they are for now;
- `owner_moves`: how a move is carried out without leaving a service worse off;
- `owner_notes`: the decisions that explain a placement.
"""

from __future__ import annotations

from controller.core.rules.owners.owner_rule import plan_owners

__all__ = ["plan_owners"]
