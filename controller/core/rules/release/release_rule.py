"""Release: a service that leaves management gets back what the controller took.

Whatever made it unmanaged (`placement.managed=false`, a policy that no longer selects
it, labels with no last good resolution after a restart), the controller takes back its
constraints and service labels first, then the replica count it changed (`release_plan`).
The node marks those constraints needed stay until no service carries one that requires
them (core/rules/nodes/possible_marks.py): the release can never stop a task. A service
whose labels merely went bad keeps its last good settings, stays managed and is not
released.
"""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import Action
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Decision
from controller.core.rules.release.release_plan import release_service


def plan_release(ctx: PlanContext) -> RuleOutput:
    actions: list[Action] = []
    decisions: list[Decision] = []
    for service in sorted(ctx.snapshot.services, key=lambda s: s.name):
        if ctx.is_managed(service.id):
            continue
        action, decision = release_service(service)
        if decision is not None:
            decisions.append(replace(decision, reason=f"not managed: {decision.reason}"))
        if action is not None:
            actions.append(action)
    return RuleOutput(tuple(actions), tuple(decisions))
