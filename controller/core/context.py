"""What every rule sees: one frozen view of the cluster, the policy and the settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controller.core.actions import Action
from controller.core.decisions import Decision
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, Service, ServiceMode
from controller.policy import Policy, ResolvedService, ServiceSettings


@dataclass(frozen=True)
class PlanContext:
    snapshot: ClusterSnapshot
    policy: Policy
    memory: Memory
    now: float
    resolved: Mapping[str, ResolvedService]

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

    def is_managed(self, service_id: str) -> bool:
        found = self.resolved.get(service_id)
        return found is not None and found.settings.managed


@dataclass(frozen=True, slots=True)
class RuleOutput:
    actions: tuple[Action, ...] = ()
    decisions: tuple[Decision, ...] = ()
    # What the rule wants remembered for the next cycle (hysteresis), as a pure update.
    remember: Callable[[Memory], Memory] | None = None


Rule = Callable[[PlanContext], RuleOutput]
