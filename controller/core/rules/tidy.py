"""Tidy: a slot Swarm left running two tasks gets its extra task taken out.

Swarm's updater replaces a task by starting (or stopping) one in the same slot. When
Swarm restarts that slot's old task while the updater works on it, the slot ends with
two running tasks; only the next pass of the updater keeps one, and that pass comes
with the next spec write, which may never come (and never while Swarm holds the
rollout paused: it resumes only on a write). Seen on a real swarm after the
controller's own constraint writes: a 4-replica service ran 6 tasks, paused, until
someone wrote it. Swarm alone rolls out only on a deploy; the controller writes far
more often, so it clears what its writes leave: the same spec again, with a label
saying when, which Swarm's updater answers by keeping one running task per slot. No
slot loses its running task, so no budget is spent; a service in a rollout that is not
the controller's own is left to it, and so is one whose running tasks the pass would
also replace (a node that no longer meets its constraints): that write is a move.
"""

from __future__ import annotations

from collections import Counter

from controller.core.actions import Action, SetServiceConstraints, target_of
from controller.core.clock import time_of_day
from controller.core.constraints import ConstraintError, parse_constraint, refused_tasks
from controller.core.context import PlanContext, RuleOutput, RuleSpec
from controller.core.decisions import Decision, Outcome
from controller.core.guards import rollout_reason
from controller.core.labels import TIDIED_LABEL
from controller.core.model import Service, ServiceMode, Task

RULE = "tidy"
# How long both tasks of a slot must have run: a start-first update stops the old one
# as soon as the new one runs, well within this.
SETTLE_SECONDS = 10.0
# The least time between two tidying writes to a service: if Swarm's updater pauses
# again before it clears the slot, the controller does not write every cycle.
RETRY_SECONDS = 60.0


def plan_tidy(ctx: PlanContext) -> RuleOutput:
    actions: list[Action] = []
    decisions: list[Decision] = []
    written = {target_of(a) for a in ctx.planned}
    for service in ctx.managed_services():
        if service.mode is not ServiceMode.REPLICATED:
            continue  # a global service's slot is its node: Swarm runs one per node
        doubled = doubled_slots(ctx.snapshot.tasks_of(service.id), ctx.now)
        if not doubled or ("service", service.id) in written:
            continue  # another write this cycle runs Swarm's updater anyway
        subject = f"service {service.name}"
        slots = f"{len(doubled)} slot(s) run two tasks ({', '.join(map(str, doubled))})"
        if service.in_rollout:
            why = f"{slots}; {rollout_reason(service)}"
            decisions.append(Decision(RULE, subject, Outcome.WAIT, why))
            continue
        misplaced = _misplaced(ctx, service)
        if misplaced:
            why = (
                f"{slots}; but the updater's pass would also replace the task(s) on "
                f"{', '.join(misplaced)}, which no longer meet the constraints"
            )
            decisions.append(Decision(RULE, subject, Outcome.WAIT, why))
            continue
        since = _last_tidied(service)
        if since is not None and ctx.now - since < RETRY_SECONDS:
            why = (
                f"{slots}; tidied at {time_of_day(since)}, again after "
                f"{time_of_day(since + RETRY_SECONDS)}"
            )
            decisions.append(Decision(RULE, subject, Outcome.WAIT, why))
            continue
        action = SetServiceConstraints(
            service_id=service.id,
            service_name=service.name,
            version=service.version,
            constraints=service.constraints,
            set_labels={TIDIED_LABEL: f"{ctx.now:.0f}"},
        )
        actions.append(action)
        reason = (
            f"{slots} for {service.replicas} replica(s), left by a rollout Swarm did not "
            "finish: the same spec again makes Swarm's updater keep one per slot (each "
            "slot keeps a running task)"
        )
        decisions.append(Decision(RULE, subject, Outcome.TIDY, reason, action=action))
    return RuleOutput(tuple(actions), tuple(decisions))


def doubled_slots(tasks: tuple[Task, ...], now: float) -> list[int]:
    """Slots where two or more tasks have both run for SETTLE_SECONDS, in slot order."""
    settled = [
        t.slot
        for t in tasks
        if t.is_running and t.slot > 0 and now - t.updated_at >= SETTLE_SECONDS
    ]
    return sorted(slot for slot, count in Counter(settled).items() if count > 1)


def _misplaced(ctx: PlanContext, service: Service) -> list[str]:
    """Hostnames of the service's running tasks whose nodes fail its constraints: the
    updater's pass would replace those too (stop-first: stop them first), so the write
    would be a move, not a tidy."""
    try:
        parsed = tuple(parse_constraint(c) for c in service.constraints)
    except ConstraintError:
        return ["(constraints it cannot read)"]
    tasks = ctx.snapshot.tasks_of(service.id)
    refused = refused_tasks(tasks, ctx.snapshot.node_by_id, parsed)
    return sorted({node.hostname for task, node in refused if task.is_running})


def _last_tidied(service: Service) -> float | None:
    try:
        return float(service.labels[TIDIED_LABEL])
    except (KeyError, ValueError):
        return None


SPEC = RuleSpec(RULE, plan_tidy, outcomes=frozenset({Outcome.TIDY, Outcome.WAIT}))
