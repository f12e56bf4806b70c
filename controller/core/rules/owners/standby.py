"""The standby: the node where one lost replica should go first, Swarm's own failover
landing spot, chosen among the best targets with the standbys of services planned
earlier in the cycle counted as load, and kept while it stays nearly as good."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import islice

from controller.core.rules.owners.placement_inputs import PlacementInputs
from controller.core.rules.owners.placement_scores import Scores, best_target

# How far down a domain's order the standby looks past nodes other standbys took.
STANDBY_SCAN = 64
# A standby is kept while it is as good for the policy as the best node and at most
# this many tasks (standbys counted) busier: a task started or stopped anywhere must not
# rewrite every service's constraints.
STANDBY_KEEP_MARGIN = 2


def current_standby(inputs: PlacementInputs, desired: Mapping[str, int]) -> str | None:
    if inputs.allowed_now is None:
        return None
    # Two spare nodes already mean no single standby: stop there (a service open to a
    # thousand nodes would otherwise walk them all).
    spare = list(islice((n for n in inputs.allowed_now if n not in desired), 2))
    return spare[0] if len(spare) == 1 else None


def standby_for(
    scores: Scores, allowed: Callable[[str], bool], current: str | None = None
) -> str | None:
    """The standby: the best target, with the standbys other services took this cycle
    counted as load. Services alike in all but their name would otherwise all choose
    the one least busy node, and one node's failure would send every replacement there
    at once (Swarm starts them one node's dockerd at a time): counted, they fill the
    least busy nodes evenly. The service's current standby stays while it is nearly as
    good (`STANDBY_KEEP_MARGIN`), and while the better node is one that has just come back
    (`returning`): it may go down again, and each swap writes the service's constraints."""
    best = _best_standby(scores, allowed)
    placeable = scores.inputs.candidates.placeable
    if best is None or current is None or current == best:
        return best
    if current not in placeable or not allowed(current):
        return best
    returning = scores.inputs.returning
    if best in returning:
        best = _best_standby(scores, lambda n: allowed(n) and n not in returning) or current
        if best == current:
            return current
    kept, top = _standby_key(scores, current), _standby_key(scores, best)
    return current if kept[0] == top[0] and kept[1] <= top[1] + STANDBY_KEEP_MARGIN else best


def _standby_key(
    scores: Scores, node: str
) -> tuple[tuple[int, int, int, float, int], int, str, str]:
    placing, _ = scores.placing(node)
    inputs = scores.inputs
    total = inputs.load.get(node, 0) + inputs.standbys.get(node, 0)
    return placing[:5], total, inputs.hostname.get(node, node), node


def _best_standby(scores: Scores, allowed: Callable[[str], bool]) -> str | None:
    taken = scores.inputs.standbys
    if not taken:
        return best_target(scores, allowed)
    load = scores.inputs.load
    found = set(scores.targets(allowed))
    # Past a domain's least busy plain node, one with more load but fewer standbys may
    # win now: walk each order while a node's own load is below the best total so far.
    for nodes in scores.order.by_domain.values():
        best: int | None = None
        for node in nodes[:STANDBY_SCAN]:
            if best is not None and load.get(node, 0) >= best:
                break
            if (
                node in scores.inputs.candidates.placeable
                and scores.is_plain(node)
                and allowed(node)
            ):
                found.add(node)
                total = load.get(node, 0) + taken.get(node, 0)
                best = total if best is None else min(best, total)
    return min(found, key=lambda n: _standby_key(scores, n)) if found else None
