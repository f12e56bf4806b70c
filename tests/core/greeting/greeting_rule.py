"""A small rule that shows what a rule package holds: it labels a managed service
`example.greeted=yes` once it has seen it for as many cycles as the service's own
`greet-after` setting asks (file or label), remembering the count between cycles."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.actions import SetReplicas
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Decision, Outcome
from controller.core.memory import Memory, MemorySlice
from controller.policy import RuleSetting
from controller.policy import field_types as t

from .name import RULE

GREETED_LABEL = "example.greeted"

GREET_AFTER = RuleSetting(
    "greet-after",
    t.PositiveCount,
    default=3,
    description="Cycles the service is seen before it is greeted.",
)


@dataclass(frozen=True, slots=True)
class GreetingMemory:
    seen: Mapping[str, int] = field(default_factory=dict)  # service id -> cycles seen


GREETING_MEMORY = MemorySlice(RULE, GreetingMemory)


def plan_greeting(ctx: PlanContext) -> RuleOutput:
    before = ctx.memory.slice(GREETING_MEMORY).seen
    seen: dict[str, int] = {}
    actions: list[SetReplicas] = []
    decisions: list[Decision] = []
    for service in ctx.managed_services():
        if service.labels.get(GREETED_LABEL) == "yes" or service.replicas is None:
            continue
        seen[service.id] = before.get(service.id, 0) + 1
        after = ctx.resolved[service.id].value_of(GREET_AFTER)
        subject = f"service {service.name}"
        if seen[service.id] < after:
            why = f"seen {seen[service.id]} of {after} cycles"
            decisions.append(Decision(RULE, subject, Outcome.WAIT, why))
            continue
        action = SetReplicas(
            service.id,
            service.name,
            service.version,
            service.replicas,
            set_labels={GREETED_LABEL: "yes"},
        )
        actions.append(action)
        why = f"seen {seen[service.id]} cycles"
        decisions.append(Decision(RULE, subject, Outcome.LABEL, why, action=action))

    def remember(memory: Memory) -> Memory:
        return memory.with_slice(GREETING_MEMORY, GreetingMemory(seen))

    return RuleOutput(tuple(actions), tuple(decisions), remember)
