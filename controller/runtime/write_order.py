"""The order a cycle's writes are sent in: failover's as early as is safe.

The planner lists actions in rule order. Execution sends every node write first, then
failover's writes (a surge for tasks lost with a node, its trim, a hold), then the rest
in the planner's order. So a write further down that is slow, refused or in conflict
(which ends the cycle) never holds a failover up.

Node writes stay ahead of failover on purpose: they carry the evictions (deny labels),
pauses and owner marks that keep tasks off a node, and a surge sent before them could
place its new tasks on the very node being emptied. A conflict on one of them ends the
cycle before the surge, for the same reason; the next cycle follows at once.

Failover's writes go out together, a few at a time: each is a round trip to a manager
and a Raft commit, and sent one by one the last of 40 surges left 8 s after the first
on a busy 20-node swarm, later than Swarm's own restart delay would have replaced it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from controller.core.actions import Action, target_of


@dataclass(frozen=True, slots=True)
class Phases:
    """A cycle's writes in the order they are sent: `failover` holds writes to distinct
    services that depend on nothing but the node writes before them, so they may go out
    together (runtime/reconciler)."""

    nodes: tuple[Action, ...]
    failover: tuple[Action, ...]
    rest: tuple[Action, ...]

    def __iter__(self) -> Iterator[Action]:
        return iter((*self.nodes, *self.failover, *self.rest))


def execution_order(actions: Iterable[Action], early: Iterable[Action]) -> Phases:
    """`early`: the writes of rules whose writes go first (the planner's `Plan.early`)."""
    # A list, not a set: actions hold dicts and do not hash.
    failover = list(early)
    nodes: list[Action] = []
    first: list[Action] = []
    rest: list[Action] = []
    for action in actions:
        if target_of(action)[0] == "node":
            nodes.append(action)
        elif action in failover:
            first.append(action)
        else:
            rest.append(action)
    return Phases(tuple(nodes), tuple(first), tuple(rest))
