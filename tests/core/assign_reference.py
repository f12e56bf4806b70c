"""The owners rule's assignment as first written: a direct, slow statement of it.

Kept as the specification the incremental `controller.core.rules.owners.assign` must match
(tests/core/test_assign_equivalence.py). The original module docstring follows.

The desired placement of one service: sticky, changed only by justified moves.

Tasks stay where they are unless a move improves, in this order of importance:
1. spread: replicas across the fault domains at the service's level, skew at most 1;
2. anti-affinity (soft): fewer tasks sharing a node with services of the same class;
3. preference: a task on a better-ranked preferred owner (failback), only when the
   failback policy permits it now and that owner has been ready for failback-delay.
Missing replicas and the standby go, among nodes equal so far, to the node the placement
plugins score highest (a score never moves a running task by itself).
A move must not make a more important criterion worse. Missing replicas are placed on
the best nodes by the same order. Everything is deterministic: ties go to the node
with fewer tasks, then to the hostname.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping

from controller.core.rules.owners.assign import Assignment, Move, PlacementInputs

SPREAD, ANTI_AFFINITY, FAILBACK = "spread", "anti-affinity", "failback"


def _objective(inputs: PlacementInputs, desired: Mapping[str, int]) -> tuple[int, int, int]:
    """(spread excess, anti-affinity conflicts, preference cost): lower is better."""
    spread_excess = 0
    if inputs.domain is not None:
        per_domain: Counter[str] = Counter()
        for node in inputs.candidates.placeable | {n for n, c in desired.items() if c}:
            per_domain[inputs.domain(node)] += 0
        for node, count in desired.items():
            per_domain[inputs.domain(node)] += count
        if per_domain:
            spread_excess = max(0, max(per_domain.values()) - min(per_domain.values()) - 1)
    conflicts = sum(count * inputs.mates.get(node, 0) for node, count in desired.items())
    unranked = len(inputs.candidates.preferred)
    preference = sum(
        count * (inputs.candidates.rank(node) if node in inputs.failback_ready else unranked)
        for node, count in desired.items()
    )
    return spread_excess, conflicts, preference


def _node_order(inputs: PlacementInputs, desired: Mapping[str, int]) -> Callable[[str], tuple]:  # type: ignore[type-arg]
    """Order for placing a new replica: what the objective prefers, then the least busy."""

    def key(node: str) -> tuple:  # type: ignore[type-arg]
        trial = dict(desired)
        trial[node] = trial.get(node, 0) + 1
        spread, conflicts, _ = _objective(inputs, trial)
        return (
            spread,
            conflicts,
            inputs.candidates.rank(node),
            -inputs.scores.get(node, 0.0),
            desired.get(node, 0),
            inputs.load.get(node, 0),
            inputs.hostname.get(node, node),
        )

    return key


def reference_assign(inputs: PlacementInputs) -> Assignment:
    cands = inputs.candidates
    placeable = sorted(cands.placeable)
    cap = max(1, math.ceil(inputs.replicas / len(placeable))) if placeable else 0

    # 1. Keep what may stay, best nodes first, within the per-node cap and the count.
    desired: dict[str, int] = {}
    evicted = {n: c for n, c in inputs.current.items() if c and n not in cands.keepable}
    keep_order = _node_order(inputs, {})
    for node in sorted((n for n in inputs.current if n in cands.keepable), key=keep_order):
        room = inputs.replicas - sum(desired.values())
        keep = min(inputs.current[node], max(cap, 1), room)
        if keep > 0:
            desired[node] = keep

    # 2. Place what is missing.
    unplaced = 0
    for _ in range(inputs.replicas - sum(desired.values())):
        open_nodes = [n for n in placeable if desired.get(n, 0) < cap]
        if not open_nodes:
            unplaced += 1
            continue
        best = min(open_nodes, key=_node_order(inputs, desired))
        desired[best] = desired.get(best, 0) + 1

    # 3. Improve by single moves, each strictly better, up to the permitted number.
    moves: list[Move] = []
    while len(moves) < inputs.max_moves:
        move = _best_move(inputs, desired, cap)
        if move is None:
            break
        desired[move.from_node] -= 1
        if not desired[move.from_node]:
            del desired[move.from_node]
        desired[move.to_node] = desired.get(move.to_node, 0) + 1
        moves.append(move)

    standby_pool = [n for n in placeable if n not in desired]
    standby = min(standby_pool, key=_node_order(inputs, desired)) if standby_pool else None
    return Assignment(
        desired=desired, moves=tuple(moves), standby=standby, unplaced=unplaced, evicted=evicted
    )


def _best_move(inputs: PlacementInputs, desired: dict[str, int], cap: int) -> Move | None:
    before = _objective(inputs, desired)
    best: tuple[tuple[int, int, int], tuple, Move] | None = None  # type: ignore[type-arg]
    order = _node_order(inputs, desired)
    for src in sorted(desired):
        for dst in sorted(inputs.candidates.placeable):
            if dst == src or desired.get(dst, 0) >= cap:
                continue
            trial = dict(desired)
            trial[src] -= 1
            trial[dst] = trial.get(dst, 0) + 1
            after = _objective(inputs, trial)
            if after >= before:
                continue
            reason = (
                SPREAD
                if after[0] < before[0]
                else ANTI_AFFINITY
                if after[1] < before[1]
                else FAILBACK
            )
            candidate = (after, order(dst), Move(src, dst, reason))
            if best is None or candidate[:2] < best[:2]:
                best = candidate
    return best[2] if best else None
