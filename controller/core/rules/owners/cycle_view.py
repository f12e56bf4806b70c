"""What the owners rule reads alike for every service of one cycle: where the services
planned so far will run (for anti-affinity), and the cycle's nodes, load and room."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from controller.core.context import PlanContext
from controller.core.kernel.candidates import NodeIndex, domain_of
from controller.core.kernel.levels import level_for
from controller.core.kernel.settling import downs_of, is_settled
from controller.core.model import Service
from controller.core.rules.owners.assign import NodeOrder, node_order
from controller.core.rules.owners.fits import Fits
from controller.policy import AntiAffinityMode, ServiceSettings


@dataclass
class Projection:
    """Where services planned so far in this cycle will run: class -> node -> tasks.

    `pending` holds, per class, the current tasks of members not planned yet, so hard
    anti-affinity also keeps clear of them (a tie on one node goes to the member
    planned first: the higher priority).
    """

    by_class: dict[str, Counter[str]] = field(default_factory=dict)
    pending: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)

    def not_yet_planned(self, classes: tuple[str, ...], service_id: str) -> Counter[str]:
        total: Counter[str] = Counter()
        for name in classes:
            for other, counts in self.pending.get(name, {}).items():
                if other != service_id:
                    total.update(counts)
        return total

    def planned(self, classes: tuple[str, ...], service_id: str) -> None:
        for name in classes:
            self.pending.get(name, {}).pop(service_id, None)

    def mates(self, classes: tuple[str, ...]) -> Counter[str]:
        total: Counter[str] = Counter()
        for name in classes:
            total.update(self.by_class.get(name, Counter()))
        return total

    def add(self, classes: tuple[str, ...], placement: Mapping[str, int]) -> None:
        for name in classes:
            self.by_class.setdefault(name, Counter()).update(placement)


def hard_excluded(
    service: Service, settings: ServiceSettings, projection: Projection, current: Mapping[str, int]
) -> frozenset[str]:
    if settings.anti_affinity_mode is not AntiAffinityMode.HARD:
        return frozenset()
    planned = {n for n, c in projection.mates(settings.anti_affinity).items() if c}
    later = {
        n
        for n, c in projection.not_yet_planned(settings.anti_affinity, service.id).items()
        if c and not current.get(n)
    }
    return frozenset(planned | later)


class Shared:
    """What every service planned in one cycle reads alike: built once per cycle."""

    def __init__(self, ctx: PlanContext) -> None:
        self._ctx = ctx
        self.load: Counter[str] = Counter(t.node_id for t in ctx.snapshot.tasks if t.node_id)
        self.hostname = {n.id: n.hostname for n in ctx.snapshot.nodes}
        self.node_ids = frozenset(self.hostname)  # steering takes set differences of it
        self.index = NodeIndex(ctx.snapshot.nodes)
        self._orders: dict[str | None, NodeOrder] = {}
        self.fits = Fits.observe(ctx.snapshot)  # less what this cycle's moves take
        # Service id -> the placement its move is heading to (None: forget it).
        self.placing: dict[str, tuple[Mapping[str, int], float] | None] = {}
        # Node id -> services planned so far that keep it as their standby.
        self.standbys: Counter[str] = Counter()
        level = level_for(ctx.policy.controller.aggressiveness)
        memory, now = ctx.memory, ctx.now
        self.returning = frozenset(
            n.id
            for n in ctx.snapshot.nodes
            if n.is_ready and downs_of(memory, n.id) and not is_settled(level, memory, n.id, now)
        )

    def heading(self, service: Service, destination: dict[str, int]) -> None:
        """Remember where the service's move is heading, since when it has been."""
        before = self._ctx.memory.placing.get(service.id)
        since = before[1] if before is not None and before[0] == destination else self._ctx.now
        self.placing[service.id] = (destination, since)

    def domain(self, level: str | None) -> Callable[[str], str] | None:
        if level is None:
            return None
        nodes, policy = self._ctx.snapshot.node_by_id, self._ctx.policy
        return lambda n: domain_of(nodes[n], level, policy)

    def order(self, level: str | None) -> NodeOrder:
        if level not in self._orders:
            self._orders[level] = node_order(
                self.hostname, load=self.load, hostname=self.hostname, domain=self.domain(level)
            )
        return self._orders[level]
