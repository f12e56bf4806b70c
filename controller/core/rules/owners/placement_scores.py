"""The objective an assignment minimises, kept incrementally: a candidate node or move
changes it by a delta, and nodes that differ only in load and name are looked at only
through the least busy of each fault domain (`NodeOrder`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from controller.core.rules.owners.placement_inputs import NodeOrder, PlacementInputs

Objective = tuple[int, int, int]  # (spread excess, anti-affinity conflicts, preference cost)
# Order for placing a task on a node: (spread excess, conflicts, rank, -plugin score,
# tasks of the service there, tasks there, hostname) after placing it; the node ID
# breaks the last ties.
Placing = tuple[int, int, int, float, int, int, str]


class Scores:
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


def best_target(scores: Scores, allowed: Callable[[str], bool]) -> str | None:
    targets = scores.targets(allowed)
    return min(map(scores.placing, targets))[1] if targets else None
