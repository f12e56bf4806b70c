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

The search is incremental (see `_Scores`): a candidate node or move changes the
objective by a delta, and nodes that differ only in load and name are looked at only
through the least busy of them (`NodeOrder`), so one service costs about its replicas,
preferred owners and mates rather than the size of the cluster.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import islice

from controller.core.kernel.candidates import Candidates

SPREAD, ANTI_AFFINITY, FAILBACK = "spread", "anti-affinity", "failback"
Objective = tuple[int, int, int]  # (spread excess, anti-affinity conflicts, preference cost)
# Order for placing a task on a node: (spread excess, conflicts, rank, -plugin score,
# tasks of the service there, tasks there, hostname) after placing it; the node ID
# breaks the last ties.
Placing = tuple[int, int, int, float, int, int, str]


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


@dataclass(frozen=True)
class NodeOrder:
    """Nodes grouped by fault domain, each group least busy first (load, hostname, ID).

    It depends only on the cycle's load and the spread level, so the owners rule builds
    one per level per cycle and shares it among services.
    """

    domain_of: Mapping[str, str]  # node ID -> domain ("" for every node without spread)
    by_domain: Mapping[str, tuple[str, ...]]
    _domains: dict[frozenset[str], frozenset[str]] = field(default_factory=dict, compare=False)

    def domains(self, nodes: frozenset[str]) -> frozenset[str]:
        """The domains of these nodes (most services share their placeable set)."""
        if nodes not in self._domains:
            self._domains[nodes] = frozenset(self.domain_of[n] for n in nodes)
        return self._domains[nodes]


def node_order(
    nodes: Iterable[str],
    *,
    load: Mapping[str, int],
    hostname: Mapping[str, str],
    domain: Callable[[str], str] | None,
) -> NodeOrder:
    domain_of = {n: domain(n) if domain is not None else "" for n in nodes}
    by_domain: dict[str, list[str]] = {}
    for node in sorted(domain_of, key=lambda n: (load.get(n, 0), hostname.get(n, n), n)):
        by_domain.setdefault(domain_of[node], []).append(node)
    return NodeOrder(domain_of, {d: tuple(ns) for d, ns in by_domain.items()})


@dataclass(frozen=True)
class PlacementInputs:
    """What the assignment needs to know about the cluster, as plain values."""

    replicas: int
    current: Mapping[str, int]  # node ID -> active tasks of this service
    candidates: Candidates
    domain: Callable[[str], str] | None  # node ID -> fault domain, None: no spread
    mates: Mapping[str, int]  # node ID -> tasks of soft anti-affinity mates
    load: Mapping[str, int]  # node ID -> tasks of all services (tie-break)
    hostname: Mapping[str, str]
    failback_ready: frozenset[str]  # preferred owners a task may fail back to now
    max_moves: int  # 0 when moves are not permitted this cycle
    # Node ID -> placement plugins' score (higher is better): ranks nodes the policy
    # leaves equal, after the preferred order and before the tie-breaks.
    scores: Mapping[str, float] = field(default_factory=dict)
    # The cycle's shared order over (at least) the placeable nodes, built with the same
    # load, hostname and domain as above; None: built here.
    order: NodeOrder | None = None
    # Node ID -> how many tasks beyond `current` Swarm would accept there (resources,
    # max-replicas-per-node, ports, platform); a node not listed has no such limit.
    room: Mapping[str, int] = field(default_factory=dict)
    # Node ID -> standbys the services planned before this one in the cycle chose: the
    # standby counts them as load (see `_standby`).
    standbys: Mapping[str, int] = field(default_factory=dict)
    # The nodes the service's steering allows now (None: not steered): the one of them
    # that holds no desired task is its standby, kept while it stays good enough.
    allowed_now: frozenset[str] | None = None
    # Nodes back from a down that have not settled yet: no standby moves onto one.
    returning: frozenset[str] = frozenset()


class _Scores:
    """The objective of one desired placement, and its value after one added or moved task.

    Equal to evaluating the whole placement again: a domain counts while a placeable
    node or a node holding tasks lies in it, and a node a task leaves still counts.
    """

    def __init__(self, inputs: PlacementInputs, order: NodeOrder, desired: Mapping[str, int]):
        cands = inputs.candidates
        self.inputs, self.order, self.desired = inputs, order, desired
        self.unranked = len(cands.preferred)
        self.rank = cands.ranks
        self.spread_on = inputs.domain is not None
        self.counts: dict[str, int] = {}
        if self.spread_on:
            dom = order.domain_of
            self.counts = dict.fromkeys(order.domains(cands.placeable), 0)
            for node, count in desired.items():
                self.counts[dom[node]] = self.counts.get(dom[node], 0) + count
        mates = inputs.mates
        self.conflicts = sum(count * mates.get(node, 0) for node, count in desired.items())
        self.preference = sum(count * self.cost(node) for node, count in desired.items())
        self._spread: dict[tuple[str | None, str | None], int] = {}
        # The three largest and smallest domain counts: enough to know the extremes
        # once one or two domains change.
        ordered = sorted(self.counts.values())
        self._top, self._bottom = ordered[::-1][:3], ordered[:3]

    def cost(self, node: str) -> int:
        if node in self.inputs.failback_ready:
            return self.rank.get(node, self.unranked)
        return self.unranked

    def spread(self, plus: str | None = None, minus: str | None = None) -> int:
        """Spread excess with a task added in domain `plus` and taken from `minus`."""
        if not self.spread_on:
            return 0
        if plus == minus:
            plus = minus = None  # a move within one domain changes no count
        key = (plus, minus)
        if key not in self._spread:
            counts = self.counts
            changed: dict[str, int] = {}
            if minus is not None:
                changed[minus] = counts[minus] - 1
            if plus is not None:
                changed[plus] = counts.get(plus, 0) + 1
            top, bottom = list(self._top), list(self._bottom)
            for domain in changed:
                if domain in counts:
                    for extremes in (top, bottom):
                        if counts[domain] in extremes:
                            extremes.remove(counts[domain])
            highs = [*top[:1], *changed.values()]
            lows = [*bottom[:1], *changed.values()]
            self._spread[key] = max(0, max(highs) - min(lows) - 1) if highs else 0
        return self._spread[key]

    def objective(self) -> Objective:
        return self.spread(), self.conflicts, self.preference

    def placing(self, node: str) -> tuple[Placing, str]:
        """Order for placing one more task: what the objective prefers, then the least
        busy node, then the hostname and the ID."""
        inputs = self.inputs
        return (
            (
                self.spread(plus=self.order.domain_of[node]),
                self.conflicts + inputs.mates.get(node, 0),
                self.rank.get(node, self.unranked),
                -inputs.scores.get(node, 0.0),
                self.desired.get(node, 0),
                inputs.load.get(node, 0),
                inputs.hostname.get(node, node),
            ),
            node,
        )

    def is_plain(self, node: str) -> bool:
        """A node that differs from others of its domain only in load and name."""
        inputs = self.inputs
        return (
            node not in self.desired
            and node not in self.rank
            and not inputs.mates.get(node)
            and not inputs.scores.get(node, 0.0)
        )

    def targets(self, allowed: Callable[[str], bool]) -> list[str]:
        """The placeable nodes that may be best for one more task: every node that is not
        plain, and the least busy allowed plain node of each domain (it beats the rest)."""
        inputs, placeable = self.inputs, self.inputs.candidates.placeable
        if len(placeable) * 8 < len(self.order.domain_of):
            return [n for n in placeable if allowed(n)]  # few: cheaper to look at all
        special = {
            n
            for n in (
                *self.desired,
                *self.rank,
                *(m for m, c in inputs.mates.items() if c),
                *(m for m, s in inputs.scores.items() if s),
            )
            if n in placeable and allowed(n)
        }
        found = list(special)
        for nodes in self.order.by_domain.values():
            for node in nodes:
                if (
                    node in placeable
                    and node not in special
                    and self.is_plain(node)
                    and allowed(node)
                ):
                    found.append(node)
                    break
        return found


def _order_of(inputs: PlacementInputs) -> NodeOrder:
    if inputs.order is not None:
        return inputs.order
    nodes = {*inputs.candidates.placeable, *inputs.candidates.keepable, *inputs.current}
    return node_order(nodes, load=inputs.load, hostname=inputs.hostname, domain=inputs.domain)


def _best_target(scores: _Scores, allowed: Callable[[str], bool]) -> str | None:
    targets = scores.targets(allowed)
    return min(map(scores.placing, targets))[1] if targets else None


# How far down a domain's order the standby looks past nodes other standbys took.
STANDBY_SCAN = 64
# A standby is kept while it is as good for the policy as the best node and at most
# this many tasks (standbys counted) busier: a task started or stopped anywhere must not
# rewrite every service's constraints.
STANDBY_KEEP_MARGIN = 2


def _current_standby(inputs: PlacementInputs, desired: Mapping[str, int]) -> str | None:
    if inputs.allowed_now is None:
        return None
    # Two spare nodes already mean no single standby: stop there (a service open to a
    # thousand nodes would otherwise walk them all).
    spare = list(islice((n for n in inputs.allowed_now if n not in desired), 2))
    return spare[0] if len(spare) == 1 else None


def _standby(
    scores: _Scores, allowed: Callable[[str], bool], current: str | None = None
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
    scores: _Scores, node: str
) -> tuple[tuple[int, int, int, float, int], int, str, str]:
    placing, _ = scores.placing(node)
    inputs = scores.inputs
    total = inputs.load.get(node, 0) + inputs.standbys.get(node, 0)
    return placing[:5], total, inputs.hostname.get(node, node), node


def _best_standby(scores: _Scores, allowed: Callable[[str], bool]) -> str | None:
    taken = scores.inputs.standbys
    if not taken:
        return _best_target(scores, allowed)
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

    # 1. Keep what may stay, best nodes first, within the per-node cap and the count.
    # (Placing one task on an empty placement never skews a spread, so the order is the
    # mates, the rank and the load.)
    desired: dict[str, int] = {}
    evicted = {n: c for n, c in inputs.current.items() if c and n not in cands.keepable}
    empty = _Scores(inputs, order, {})
    for node in sorted(
        (n for n in inputs.current if n in cands.keepable),
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

    # 2. Place what is missing.
    unplaced = 0
    for _ in range(inputs.replicas - sum(desired.values())):
        scores = _Scores(inputs, order, desired)
        best = _best_target(scores, takes_one_more)
        if best is None:
            unplaced += 1
            continue
        desired[best] = desired.get(best, 0) + 1

    # 3. Improve by single moves, each strictly better, up to the permitted number.
    moves: list[Move] = []
    while len(moves) < inputs.max_moves:
        move = _best_move(_Scores(inputs, order, desired), takes_one_more)
        if move is None:
            break
        desired[move.from_node] -= 1
        if not desired[move.from_node]:
            del desired[move.from_node]
        desired[move.to_node] = desired.get(move.to_node, 0) + 1
        moves.append(move)

    # The standby is where Swarm's own failover lands: it must have room too.
    standby = _standby(
        _Scores(inputs, order, desired),
        lambda n: n not in desired and inputs.room.get(n, 1) > 0,
        _current_standby(inputs, desired),
    )
    return Assignment(
        desired=desired, moves=tuple(moves), standby=standby, unplaced=unplaced, evicted=evicted
    )


def _best_move(scores: _Scores, allowed: Callable[[str], bool]) -> Move | None:
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
