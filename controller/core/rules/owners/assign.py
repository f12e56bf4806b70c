"""The desired placement of one service: sticky, changed only by justified moves.

Tasks stay where they are unless a move improves, in this order of importance:
1. spread: replicas across the fault domains at the service's level, skew at most 1;
2. anti-affinity (soft): fewer tasks sharing a node with services of the same class;
3. preference: a task on a better-ranked preferred owner (failback), only when the
   failback policy permits it now and that owner has been ready for failback-delay.
Missing replicas and the standby go, among nodes equal so far, to the node the placement
plugins score highest (a score never moves a running task by itself). Standbys chosen
earlier in the cycle count as load for the next service's, so services alike do not all
keep the same node in reserve.
A move must not make a more important criterion worse. Missing replicas are placed on
the best nodes by the same order. Everything is deterministic: ties go to the node
with fewer tasks, then to the hostname, then to the node ID.

The search is incremental (see `placement_scores`): a candidate node or move changes the
objective by a delta, and nodes that differ only in load and name are looked at only
through the least busy of them (`NodeOrder`), so one service costs about its replicas,
preferred owners and mates rather than the size of the cluster.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from controller.core.rules.owners.placement_inputs import NodeOrder, PlacementInputs, node_order
from controller.core.rules.owners.placement_scores import Objective, Placing, Scores, best_target
from controller.core.rules.owners.standby import current_standby, standby_for

# What the rest of the owners rule imports from here (the inputs are declared apart).
__all__ = [
    "ANTI_AFFINITY",
    "FAILBACK",
    "SPREAD",
    "Assignment",
    "Move",
    "NodeOrder",
    "PlacementInputs",
    "assign",
    "node_order",
]

SPREAD, ANTI_AFFINITY, FAILBACK = "spread", "anti-affinity", "failback"


@dataclass(frozen=True, slots=True)
class Move:
    from_node: str
    to_node: str
    reason: str  # SPREAD, ANTI_AFFINITY or FAILBACK


@dataclass(frozen=True, slots=True)
class Assignment:
    desired: Mapping[str, int]  # node ID -> replicas
    moves: tuple[Move, ...] = ()
    standby: str | None = None  # where a lost replica should go first
    unplaced: int = 0  # replicas with no node to go to
    evicted: Mapping[str, int] = field(default_factory=dict)  # tasks on nodes they may not stay on


def _even_share(inputs: PlacementInputs) -> int:
    """Most tasks per node: an even share of the placeable nodes."""
    placeable = inputs.candidates.placeable
    return max(1, math.ceil(inputs.replicas / len(placeable))) if placeable else 0


def _share(inputs: PlacementInputs) -> int:
    """The even share, raised while nodes short of room leave the others to take more
    (it reads every node's room: only worth it once some replica found no node)."""
    placeable = inputs.candidates.placeable
    cap = _even_share(inputs)
    limits = [inputs.current.get(n, 0) + inputs.room.get(n, inputs.replicas) for n in placeable]
    while cap < inputs.replicas and sum(min(cap, limit) for limit in limits) < inputs.replicas:
        cap += 1
    return cap


def _order_of(inputs: PlacementInputs) -> NodeOrder:
    if inputs.order is not None:
        return inputs.order
    nodes = {*inputs.candidates.placeable, *inputs.candidates.keepable, *inputs.current}
    return node_order(nodes, load=inputs.load, hostname=inputs.hostname, domain=inputs.domain)


def assign(inputs: PlacementInputs) -> Assignment:
    order = _order_of(inputs)
    cap = _even_share(inputs)
    result = _assign(inputs, order, cap)
    if result.unplaced and inputs.room and (raised := _share(inputs)) > cap:
        result = _assign(inputs, order, raised)
    return result


def _assign(inputs: PlacementInputs, order: NodeOrder, cap: int) -> Assignment:
    cands = inputs.candidates

    def takes_one_more(node: str) -> bool:
        here = desired.get(node, 0)
        beyond = here - inputs.current.get(node, 0)
        return here < cap and beyond < inputs.room.get(node, beyond + 1)

    evicted = {n: c for n, c in inputs.current.items() if c and n not in cands.keepable}
    desired = _kept(inputs, order, cap)

    # 2. Place what is missing.
    unplaced = 0
    for _ in range(inputs.replicas - sum(desired.values())):
        scores = Scores(inputs, order, desired)
        best = best_target(scores, takes_one_more)
        if best is None:
            unplaced += 1
            continue
        desired[best] = desired.get(best, 0) + 1

    moves = _improve(inputs, order, desired, takes_one_more)

    # The standby is where Swarm's own failover lands: it must have room too.
    standby = standby_for(
        Scores(inputs, order, desired),
        lambda n: n not in desired and inputs.room.get(n, 1) > 0,
        current_standby(inputs, desired),
    )
    return Assignment(
        desired=desired, moves=tuple(moves), standby=standby, unplaced=unplaced, evicted=evicted
    )


def _kept(inputs: PlacementInputs, order: NodeOrder, cap: int) -> dict[str, int]:
    """1. Keep what may stay, best nodes first, within the per-node cap and the count.
    (Placing one task on an empty placement never skews a spread, so the order is the
    mates, the rank and the load.)"""
    desired: dict[str, int] = {}
    empty = Scores(inputs, order, {})
    for node in sorted(
        (n for n in inputs.current if n in inputs.candidates.keepable),
        key=lambda n: (
            0,
            inputs.mates.get(n, 0),
            empty.rank.get(n, empty.unranked),
            -inputs.scores.get(n, 0.0),
            0,
            inputs.load.get(n, 0),
            inputs.hostname.get(n, n),
        ),
    ):
        room = inputs.replicas - sum(desired.values())
        keep = min(inputs.current[node], max(cap, 1), room)
        if keep > 0:
            desired[node] = keep
    return desired


def _improve(
    inputs: PlacementInputs,
    order: NodeOrder,
    desired: dict[str, int],
    allowed: Callable[[str], bool],
) -> list[Move]:
    """3. Improve `desired` in place by single moves, each strictly better, up to the
    permitted number."""
    moves: list[Move] = []
    while len(moves) < inputs.max_moves:
        move = _best_move(Scores(inputs, order, desired), allowed)
        if move is None:
            break
        desired[move.from_node] -= 1
        if not desired[move.from_node]:
            del desired[move.from_node]
        desired[move.to_node] = desired.get(move.to_node, 0) + 1
        moves.append(move)
    return moves


def _best_move(scores: Scores, allowed: Callable[[str], bool]) -> Move | None:
    """The single move that improves the objective most, ties broken by the destination's
    placing order, then by source and destination ID."""
    inputs, desired, dom = scores.inputs, scores.desired, scores.order.domain_of
    before = scores.objective()
    if before == (0, 0, 0):
        return None  # no part can fall below zero: nothing is strictly better
    # Destinations that share a domain, mates, cost, rank and score are alike but for
    # their load and name: per such group only the first in placing order can win. (A
    # move within its own group changes nothing, so the source is never that winner.)
    groups: dict[tuple[str, int, int, int, float], tuple[Placing, str]] = {}
    for dst in scores.targets(allowed):
        group = (
            dom[dst],
            inputs.mates.get(dst, 0),
            scores.cost(dst),
            scores.rank.get(dst, -1),
            inputs.scores.get(dst, 0.0),
        )
        entry = scores.placing(dst)
        if group not in groups or entry < groups[group]:
            groups[group] = entry
    # Only some pairs can improve (the rest are skipped unseen): the spread can fall only
    # from a domain at the most or to one at the least, conflicts only from a node with
    # mates, the preference only towards a cheaper node.
    counts, spread_before = scores.counts, before[0]
    most = max(counts.values(), default=0)
    least = min(counts.values(), default=0)
    to_least = [
        item for item in groups.items() if spread_before > 0 and counts.get(item[0][0]) == least
    ]
    cheaper = sorted(
        (item for item in groups.items() if item[0][1] == 0 and item[0][2] < scores.unranked),
        key=lambda item: item[0][2],
    )
    best: tuple[Objective, Placing, str, str] | None = None
    for src in sorted(desired):
        src_dom, src_mates, src_cost = dom[src], inputs.mates.get(src, 0), scores.cost(src)
        if src_mates > 0 or (spread_before > 0 and counts.get(src_dom) == most):
            pairs = list(groups.items())
        else:
            pairs = to_least + [item for item in cheaper if item[0][2] < src_cost]
        for (dst_dom, dst_mates, dst_cost, _, _), (placing, dst) in pairs:
            after = (
                scores.spread(plus=dst_dom, minus=src_dom),
                scores.conflicts + dst_mates - src_mates,
                scores.preference + dst_cost - src_cost,
            )
            if after >= before or dst == src:
                continue
            candidate = (after, placing, src, dst)
            if best is None or candidate < best:
                best = candidate
    if best is None:
        return None
    after, _, src, dst = best
    reason = SPREAD if after[0] < before[0] else ANTI_AFFINITY if after[1] < before[1] else FAILBACK
    return Move(src, dst, reason)
