"""Guards: the invariants no rule may break, the rollout rule, and the disruption budget.

They run after every rule, so a rule bug can at worst propose something a guard drops
(with a decision saying so), never write it. No write goes to a service Swarm is rolling
an update or rollback for, running or paused (every spec write resets UpdateStatus: a
paused rollout resumes), nor evicts its tasks, but for a few exceptions while it actively
rolls (`rollout_exception`): a failover raise and the trim that takes it back, a write
that only lets Swarm place a task it could not, and one that calls off the controller's
own move onto a node that went down. A paused rollout that the
controller's own write started is not held (`Service.in_rollout`).
"""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import (
    Action,
    SetNodeAvailability,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
    subject_of,
)
from controller.core.apply import apply_actions
from controller.core.budget import disrupted_nodes, disruption
from controller.core.constraints import (
    Constraint,
    ConstraintError,
    node_filter,
    node_satisfies,
    parse_constraint,
    refused_tasks,
)
from controller.core.context import PlanContext
from controller.core.counts import is_active
from controller.core.decisions import Decision, Outcome
from controller.core.model import (
    Availability,
    ClusterSnapshot,
    NodeRole,
    NodeState,
    Service,
    ServiceMode,
)
from controller.core.release_plan import release_refusal
from controller.core.replicas import OPERATION_LABEL, SURGE, ends_own_move, record_taken_back
from controller.core.stalled_moves import stalled_on
from controller.core.widen_only import widening_part

__all__ = [
    "apply_guards",
    "disrupted_nodes",
    "failover_raise",
    "rollout_exception",
    "rollout_reason",
    "rollout_wait",
    "unblocks_rollout",
]

_ROLLOUT_WAITS = {
    "paused": "rollout paused by Swarm; the controller waits: a write would resume it",
    "rollback_paused": "rollback paused by Swarm; the controller waits: a write would resume it",
    "updating": (
        "Swarm is rolling out an update; the controller waits: a write would restart the "
        "rollout and replace the spec `docker service rollback` returns to"
    ),
    "rollback_started": (
        "Swarm is rolling back; the controller waits: a write would turn the rollback "
        "into an update of the same spec"
    ),
}


OWN_PAUSED = (
    "Swarm paused a rollout the controller's own write started (the spec differs from "
    "the one before only in the controller's constraints): this write resumes it, with "
    "the controller's newer spec; an operator's paused rollout is never resumed"
)


def _service_of(action: Action) -> str | None:
    if isinstance(action, SetServiceConstraints | SetReplicas):
        return action.service_id
    return None


def _drains_last_manager(
    ctx: PlanContext, action: SetNodeAvailability, taken_out: set[str]
) -> bool:
    """True if, with the nodes this plan already takes out, no manager stays active."""
    if action.availability is Availability.ACTIVE:
        return False
    node = ctx.snapshot.node_by_id.get(action.node_id)
    if node is None or node.role is not NodeRole.MANAGER:
        return False
    others = [
        n
        for n in ctx.snapshot.nodes
        if n.role is NodeRole.MANAGER
        and n.id != node.id
        and n.id not in taken_out
        and n.accepts_tasks
    ]
    return not others


def failover_raise(service: Service, action: Action) -> bool:
    """The one write allowed during a rollout: failover raising the replica count (a
    surge for tasks lost with a node) while Swarm actively rolls an update whose failure
    action is not rollback. Swarm's updater carries on with the same spec and the new
    tasks run it; the price is a restarted update and a PreviousSpec of the new spec
    (docs/failover.md). Never while paused: the write would resume the rollout. Never
    with failure action rollback: Swarm's own rollback would then go back to the new spec.
    """
    return (
        isinstance(action, SetReplicas)
        and _raise_may_go(service)
        and service.replicas is not None
        and action.replicas > service.replicas
        and not action.evicts_from
        and not action.remove_labels
        and action.set_labels.get(OPERATION_LABEL) == SURGE
    )


def _raise_may_go(service: Service) -> bool:
    """Swarm actively rolls an update whose failure action is not rollback."""
    return service.update_state == "updating" and service.update_failure_action != "rollback"


def takes_back_failover_raise(service: Service, action: Action) -> bool:
    """The trim that ends a failover surge, under the raise's own conditions, at the same
    price. Held back, the surge would outlast the rollout, and should Swarm pause it, stay
    until an operator resumes it: replicas nobody asked for, holding room other tasks need."""
    if not (isinstance(action, SetReplicas) and _raise_may_go(service)):
        return False
    record = record_taken_back(service, action)
    return record is not None and record.operation == SURGE and not action.set_labels


def unblocks_rollout(ctx: PlanContext, service: Service, action: Action) -> bool:
    """The other write allowed during a rollout: while Swarm actively rolls one and a task
    of it waits for a node Swarm cannot find, a constraint write that stops no task (the
    owners rule widening placement). Without it the controller's own constraints could
    hold the rollout up for good, which Swarm alone would not."""
    return (
        isinstance(action, SetServiceConstraints)
        and service.updating
        and disruption(action, ctx.snapshot) is None
        and any(t.is_pending and t.error for t in ctx.snapshot.tasks_of(service.id))
    )


def calls_off_stalled_move(ctx: PlanContext, service: Service, action: Action) -> bool:
    """The third write allowed during a rollout: the controller's own, stalled because
    every node it allows went down (core/stalled_moves), rewritten by a constraint write
    that stops no task and allows none of those nodes. Without it the move would finish
    onto one the moment it returns, however often it has just failed."""
    if not isinstance(action, SetServiceConstraints) or disruption(action, ctx.snapshot):
        return False
    stalled = stalled_on(ctx.snapshot, service)
    if not stalled:
        return False
    try:
        allows = node_filter(parse_constraint(c) for c in action.constraints)
    except ConstraintError:
        return False
    nodes = ctx.snapshot.node_by_id
    return not any(allows(nodes[n]) for n in stalled)


def rollout_reason(service: Service) -> str:
    """Why nothing is written to a service in a rollout, for a decision."""
    return _ROLLOUT_WAITS.get(service.update_state or "", "Swarm is rolling an update")


def rollout_exception(ctx: PlanContext, service: Service, action: Action) -> str | None:
    """Which exception lets this write reach a service in a rollout, as a decision says
    it; None: it waits."""
    if failover_raise(service, action):
        return "a failover raise of the replica count"
    if takes_back_failover_raise(service, action):
        return "the trim that takes back the controller's failover raise"
    if isinstance(action, SetReplicas) and service.updating and ends_own_move(service, action):
        return "the trim that ends the controller's own stop-first move"
    if unblocks_rollout(ctx, service, action):
        return "it stops nothing and lets Swarm place a task it could not"
    if calls_off_stalled_move(ctx, service, action):
        return (
            "it stops nothing and calls off the controller's own move, every node of which "
            "went down before it finished"
        )
    return None


def rollout_wait(ctx: PlanContext, action: Action) -> str | None:
    """Why the action must wait for a rollout of a service it writes or evicts, if so."""
    service_id = _service_of(action)
    if service_id is not None:
        service = ctx.snapshot.service_by_id.get(service_id)
        if service is None or not service.in_rollout:
            return None
        if rollout_exception(ctx, service, action) is not None:
            return None
        return rollout_reason(service)
    found = disruption(action, ctx.snapshot)
    for evicted in found.services if found is not None else ():
        service = ctx.snapshot.service_by_id.get(evicted)
        if service is not None and service.in_rollout:
            # A task stopped now is replaced from the spec being rolled out.
            return (
                f"service {service.name} is in a rollout ({service.update_state}): its "
                "tasks here are not evicted until Swarm finishes it"
            )
    return None


def _narrowed(base: ClusterSnapshot, action: SetServiceConstraints) -> Service | None:
    """The service a constraint write narrows (adds a constraint to); None otherwise: a
    write that only drops constraints widens placement and stops nothing."""
    service = base.service_by_id.get(action.service_id)
    if service is None or set(action.constraints) <= set(service.constraints):
        return None
    return service


def _parsed(action: SetServiceConstraints) -> tuple[Constraint, ...] | str:
    """The write's constraints, or why they cannot be read."""
    try:
        return tuple(parse_constraint(text) for text in action.constraints)
    except ConstraintError as exc:
        return f"its constraints cannot be read: {exc}"


def _after_node_writes(base: ClusterSnapshot, kept: list[Action]) -> ClusterSnapshot:
    # Node writes go out first (runtime/write_order): judge the nodes as they leave them.
    node_writes = tuple(a for a in kept if isinstance(a, SetNodeLabels | SetNodeAvailability))
    return apply_actions(base, node_writes) if node_writes else base


def _strands(ctx: PlanContext, action: Action, kept: list[Action]) -> str | None:
    """Why a constraint write would leave its service no node to run on, if it would.

    Swarm stops every task the new constraints refuse, whatever its node's state, so a
    write that no ready, active node satisfies and that refuses a node holding one of its
    tasks can only take the service down: seen when a new Raft leader reports every node
    `unknown` for a moment. A write that only drops constraints widens placement and
    always passes; one that stops nothing (a service its policy keeps pending) passes too.
    """
    if not isinstance(action, SetServiceConstraints):
        return None
    service = _narrowed(ctx.snapshot, action)
    if service is None or (service.mode is ServiceMode.REPLICATED and not service.replicas):
        return None
    parsed = _parsed(action)
    if isinstance(parsed, str):
        return parsed
    after = _after_node_writes(ctx.snapshot, kept)
    if any(n.accepts_tasks and node_satisfies(n, parsed) for n in after.nodes):
        return None
    # Swarm's constraint enforcer stops refused tasks on active nodes, whatever their
    # state; it leaves a paused node alone.
    tasks = ctx.swarm.tasks_of(service.id)
    refused = [
        task
        for task, node in refused_tasks(tasks, after.node_by_id, parsed)
        if node.availability is Availability.ACTIVE
    ]
    if not refused:
        return None  # it stops nothing: a service kept pending by its policy stays so
    return (
        f"no ready, active node would satisfy its constraints: Swarm would stop its "
        f"{len(refused)} task(s) with nowhere to start them"
    )


def _stops_undeclared(ctx: PlanContext, action: Action, kept: list[Action]) -> str | None:
    """Why a constraint write would stop tasks on a node Swarm does not know the state
    of, if it would.

    The budget counts the tasks a write refuses on ready nodes, named or not. Rules and
    budget count tasks on ready nodes only, so a write planned while Swarm calls a node
    `unknown` (a new Raft leader, before the node reports) can refuse a node whose tasks
    still run: once it reports, Swarm's constraint enforcer stops them, outside any
    budget (seen in the chaos run: both replicas of a stop-first service stopped). Judged
    on the nodes as Swarm sees them, after this plan's node writes; a node the write
    names in `evicts_from` is a move, and a paused node is left alone by the enforcer.
    """
    if not isinstance(action, SetServiceConstraints):
        return None
    service = _narrowed(ctx.swarm, action)
    if service is None:
        return None
    parsed = _parsed(action)
    if isinstance(parsed, str):
        return parsed
    nodes = _after_node_writes(ctx.swarm, kept).node_by_id
    declared = set(action.evicts_from)
    undeclared = sorted(
        {
            node.hostname
            for task, node in refused_tasks(ctx.swarm.tasks_of(service.id), nodes, parsed)
            if node.id not in declared
            and is_active(task)
            and node.state in (NodeState.UNKNOWN, NodeState.DISCONNECTED)
            and node.availability is Availability.ACTIVE
        }
    )
    if not undeclared:
        return None
    return (
        f"it would stop its tasks on {', '.join(undeclared)}, which it does not move "
        "(a node Swarm does not report ready yet may still run them): it waits until "
        "those nodes report"
    )


def apply_guards(
    ctx: PlanContext, actions: tuple[Action, ...]
) -> tuple[tuple[Action, ...], list[Decision]]:
    budget = replace(ctx, planned=()).budget()  # the whole plan spends it afresh
    kept: list[Action] = []
    decisions: list[Decision] = []
    taken_out: set[str] = set()  # nodes this plan pauses or drains

    def note(action: Action, outcome: Outcome, reason: str) -> None:
        decisions.append(
            Decision(
                rule="guard",
                subject=subject_of(action),
                outcome=outcome,
                reason=reason,
                action=action,
            )
        )

    for proposed in actions:
        action = proposed  # or, refused, the part of it that only widens placement
        service_id = _service_of(action)
        if service_id is not None and not ctx.is_managed(service_id):
            # Only a release (core/release_plan) may write it, and only to take back ours.
            refusal = release_refusal(ctx.snapshot.service_by_id.get(service_id), action)
            if refusal is not None:
                note(action, Outcome.REFUSE, refusal)
                continue
            note(action, Outcome.ALLOW, "not managed: this write only takes back the controller's")
        waiting = rollout_wait(ctx, action)
        if waiting is not None:
            note(action, Outcome.WAIT, waiting)
            continue
        if isinstance(action, SetNodeAvailability) and _drains_last_manager(ctx, action, taken_out):
            note(action, Outcome.REFUSE, "it would leave no active manager")
            continue
        stranded = _strands(ctx, action, kept) or _stops_undeclared(ctx, action, kept)
        if stranded is not None:
            widened = widening_part(ctx, action)
            if widened is None:
                note(action, Outcome.REFUSE, stranded)
                continue
            note(action, Outcome.REFUSE, f"{stranded}; only the exclusions it drops are written")
            note(
                widened,
                Outcome.ALLOW,
                "it only drops exclusions of the controller's: placement widens, no task "
                "stops, and Swarm may place what they held pending",
            )
            action = widened
        over = budget.refusal(action)
        if over is not None:
            note(action, Outcome.DEFER, over)
            continue
        budget.spend(action)
        service = ctx.snapshot.service_by_id.get(service_id or "")
        if service is not None and service.in_rollout:
            note(
                action,
                Outcome.ALLOW,
                f"written while Swarm rolls an update ({service.update_state}): "
                + (rollout_exception(ctx, service, action) or "allowed"),
            )
        elif service is not None and service.own_rollout_paused:
            note(action, Outcome.ALLOW, OWN_PAUSED)
        if (
            isinstance(action, SetNodeAvailability)
            and action.availability is not Availability.ACTIVE
        ):
            taken_out.add(action.node_id)
        kept.append(action)
    return tuple(kept), decisions
