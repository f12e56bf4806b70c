"""Adoption: give each managed service the controller's steering constraint.

The constraint (`node.labels.swarm-placement.deny.<name>!=true`) matches every node
until the controller labels one, so adding it restarts no task (swarmkit ignores
placement-only changes a task's node still satisfies). From then on a node label
steers that service alone. A service in a rollout, running or paused, is adopted once
Swarm has finished it: the write would reset its UpdateStatus and resume a paused one.
"""

from __future__ import annotations

from controller.core.actions import Action, SetServiceConstraints
from controller.core.context import PlanContext, RuleOutput, RuleSpec
from controller.core.decisions import Decision, Outcome
from controller.core.guards import rollout_reason
from controller.core.labels import steering_constraint
from controller.core.model import ServiceMode

RULE = "adoption"


def adopt_services(ctx: PlanContext) -> RuleOutput:
    actions: list[Action] = []
    decisions: list[Decision] = []
    for service in ctx.managed_services():
        subject = f"service {service.name}"
        wanted = steering_constraint(service.name)
        if wanted in service.constraints:
            continue
        if service.mode is ServiceMode.REPLICATED and ctx.settings(service.id).steered:
            continue  # the owners rule adopts it in the same write that steers it
        if service.in_rollout:
            decisions.append(Decision(RULE, subject, Outcome.WAIT, rollout_reason(service)))
            continue
        action = SetServiceConstraints(
            service_id=service.id,
            service_name=service.name,
            version=service.version,
            constraints=(*service.constraints, wanted),
        )
        actions.append(action)
        decisions.append(
            Decision(
                RULE,
                subject,
                Outcome.ADOPT,
                "placement.managed is true: adding the steering constraint, which every "
                "current node satisfies, so no task restarts",
                action=action,
            )
        )
    return RuleOutput(tuple(actions), tuple(decisions))


SPEC = RuleSpec(RULE, adopt_services, outcomes=frozenset({Outcome.ADOPT, Outcome.WAIT}))
