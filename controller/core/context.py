"""What every rule sees: one frozen view of the cluster, the policy and the settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.core.actions import Action
from controller.core.decisions import Code, Decision, EventCount, Outcome
from controller.core.health.assess import Assessment
from controller.core.kernel.ledger import AvailabilityLedger
from controller.core.memory import Memory, MemorySlice
from controller.core.model import ClusterSnapshot, Service, ServiceMode
from controller.policy import Policy, ResolvedService, RuleSetting, ServiceSettings


@dataclass(frozen=True)
class PlanContext:
    snapshot: ClusterSnapshot
    policy: Policy
    memory: Memory
    now: float
    resolved: Mapping[str, ResolvedService]
    # `snapshot` is the cluster as the rules should see it: a node reported failed is
    # down, a node the controller holds paused is paused (see core/health). `observed`
    # is what Swarm said, for the rule that writes nodes; None: the same as `snapshot`.
    observed: ClusterSnapshot | None = None
    health: Assessment = field(default_factory=Assessment)
    # What the rules before this one planned this cycle: their writes spend the budget.
    planned: tuple[Action, ...] = ()
    # The plan's ledger, charged with `planned` as the guards admitted each (None: made
    # from the snapshot, with nothing planned yet).
    ledger: AvailabilityLedger | None = None

    def __post_init__(self) -> None:
        if self.planned and self.ledger is None:
            raise ValueError("planned writes come with the ledger charged with them")

    @property
    def swarm(self) -> ClusterSnapshot:
        """The cluster exactly as observed."""
        return self.observed if self.observed is not None else self.snapshot

    def settings(self, service_id: str) -> ServiceSettings:
        return self.resolved[service_id].settings

    def managed_services(self) -> tuple[Service, ...]:
        """Services the controller may write, in a stable order."""
        return tuple(
            s
            for s in sorted(self.snapshot.services, key=lambda s: s.name)
            if s.id in self.resolved
            and self.resolved[s.id].settings.managed
            and s.mode is not ServiceMode.OTHER
        )

    def replicated_by_priority(self) -> list[Service]:
        """Every replicated service, highest priority first, then by name."""
        return sorted(
            (s for s in self.snapshot.services if s.mode is ServiceMode.REPLICATED),
            key=lambda s: (-self.settings(s.id).priority, s.name),
        )

    def is_managed(self, service_id: str) -> bool:
        found = self.resolved.get(service_id)
        return found is not None and found.settings.managed

    def fresh_ledger(self) -> AvailabilityLedger:
        """The availability ledger of this snapshot, with no write charged yet."""
        return AvailabilityLedger(
            self.policy.controller.budgets,
            self.snapshot,
            {sid: r.settings.max_unavailable for sid, r in self.resolved.items()},
            self.memory.overridden,
        )

    def budget(self) -> AvailabilityLedger:
        """The availability ledger as this rule finds it (core/kernel/ledger): charged
        with what the rules before it planned. Spending it changes only the rule's copy."""
        return (self.ledger or self.fresh_ledger()).copy()


@dataclass(frozen=True, slots=True)
class RuleOutput:
    actions: tuple[Action, ...] = ()
    decisions: tuple[Decision, ...] = ()
    # What the rule wants remembered for the next cycle (hysteresis), as a pure update.
    remember: Callable[[Memory], Memory] | None = None


Rule = Callable[[PlanContext], RuleOutput]

# Why a write of this rule may reach a service Swarm is rolling an update for, or None.
RolloutExemption = Callable[[PlanContext, Service, Action], str | None]
# Why a write of this rule to a service the controller does not manage is refused, or
# None when it may go (only a release takes back what the controller wrote).
UnmanagedCheck = Callable[[Service | None, Action], str | None]


@dataclass(frozen=True, slots=True)
class Salvaged:
    """The part of a write the guards refuse that may still go, because it stops nothing:
    what it is (for the refusal's decision) and why it may go (for its own)."""

    action: Action
    part: str
    why: str


Salvage = Callable[[PlanContext, Action], Salvaged | None]


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """One rule as the registry (core/rules) knows it: everything about a rule that
    plan(), the guards and the write order need, so that no module outside the rule's
    own package names it."""

    name: str
    plan: Rule
    # Its writes are sent right after the node writes, together (runtime/write_order).
    writes_first: bool = False
    # Its own exceptions to the rollout rule of the guards.
    rollout_exemptions: tuple[RolloutExemption, ...] = ()
    # None: it never writes a service the controller does not manage.
    unmanaged: UnmanagedCheck | None = None
    salvage: Salvage | None = None
    # Its own memory, declared in its package (None: it keeps none of its own).
    own_memory: MemorySlice[Any] | None = None
    # The shared Memory fields its `remember` may change besides its own (tests check it
    # changes no other).
    memory: tuple[str, ...] = ()
    # Its own per-service settings, beside the built-in ones (policy/rule_settings): read
    # with `ctx.resolved[service_id].value_of(setting)`.
    settings: tuple[RuleSetting[Any], ...] = ()
    # What its decisions may say: their outcomes and codes (a test checks its sources
    # and its decisions keep to them).
    outcomes: frozenset[Outcome] = frozenset()
    codes: frozenset[Code] = frozenset()
    # The events it counts (runtime/metrics makes a counter of each).
    events: tuple[EventCount, ...] = ()
