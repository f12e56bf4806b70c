"""Guards: the invariants no rule may break, the rollout rule, and the disruption budget.

They run after every rule, so a rule bug can at worst propose something a guard drops
(with a decision saying so), never write it. No write goes to a service Swarm is rolling
an update or rollback for, running or paused (every spec write resets UpdateStatus: a
paused rollout resumes), nor evicts its tasks, but for the exceptions a rule declares in
the registry (`RuleSpec.rollout_exemptions`: failover's raise, the owners rule's writes
that stop nothing). A paused rollout that the controller's own write started is not
held (`Service.in_rollout`). The guards know no rule by name: what is particular to a
rule comes with its `RuleSpec`.
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
from controller.core.constraints import (
    Constraint,
    node_satisfies,
    refused_tasks,
)
from controller.core.context import PlanContext, RolloutExemption, RuleSpec
from controller.core.counts import is_active
from controller.core.decisions import Decision, Outcome
from controller.core.kernel.ledger import AvailabilityLedger, disrupted_nodes, disruption
from controller.core.model import (
    Availability,
    ClusterSnapshot,
    NodeRole,
    NodeState,
    Service,
    ServiceMode,
)

__all__ = [
    "apply_guards",
    "disrupted_nodes",
    "rollout_exception",
    "rollout_reason",
    "rollout_wait",
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


def rollout_reason(service: Service) -> str:
    """Why nothing is written to a service in a rollout, for a decision."""
    return _ROLLOUT_WAITS.get(service.update_state or "", "Swarm is rolling an update")


def rollout_exception(
    ctx: PlanContext,
    service: Service,
    action: Action,
    exemptions: tuple[RolloutExemption, ...] = (),
) -> str | None:
    """Which of its rule's exceptions lets this write reach a service in a rollout, as a
    decision says it; None: it waits."""
    for exemption in exemptions:
        reason = exemption(ctx, service, action)
        if reason is not None:
            return reason
    return None


def rollout_wait(
    ctx: PlanContext, action: Action, exemptions: tuple[RolloutExemption, ...] = ()
) -> str | None:
    """Why the action must wait for a rollout of a service it writes or evicts, if so."""
    service_id = _service_of(action)
    if service_id is not None:
        service = ctx.snapshot.service_by_id.get(service_id)
        if service is None or not service.in_rollout:
            return None
        if rollout_exception(ctx, service, action, exemptions) is not None:
            return None
        return rollout_reason(service)
    found = disruption(action, ctx.snapshot)
    for evicted in found.services if found is not None else ():
        service = ctx.snapshot.service_by_id.get(evicted)
        if service is not None and service.in_rollout:
            return eviction_waits_for_rollout(service)
    return None


def eviction_waits_for_rollout(service: Service) -> str:
    """Why the service's tasks on a node are not evicted now: a task stopped during a
    rollout is replaced from the spec being rolled out."""
    return (
        f"service {service.name} is in a rollout ({service.update_state}): its tasks "
        "here are not evicted until Swarm finishes it"
    )


def _narrowed(base: ClusterSnapshot, action: SetServiceConstraints) -> Service | None:
    """The service a constraint write narrows (adds a constraint to); None otherwise: a
    write that only drops constraints widens placement and stops nothing."""
    service = base.service_by_id.get(action.service_id)
    if service is None or set(action.constraints) <= set(service.constraints):
        return None
    return service


def _parsed(action: SetServiceConstraints) -> tuple[Constraint, ...] | str:
    """The write's constraints, or why they cannot be read."""
    if action.parsed is None:
        return f"its constraints cannot be read: {action.unreadable}"
    return action.parsed


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


class Guards:
    """The guards of one plan, asked write by write as the rules propose them, so that a
    write they hold never claims its object: a later rule's allowed write to it goes in
    the same cycle (core/plan). Each write is charged to the plan's availability ledger
    (core/kernel/ledger) as it is admitted."""

    def __init__(self, ctx: PlanContext) -> None:
        self._ctx = replace(ctx, planned=(), ledger=None if ctx.planned else ctx.ledger)
        self._budget = self._ctx.budget()  # the whole plan is charged afresh
        self._kept: list[Action] = []
        self._taken_out: set[str] = set()  # nodes this plan pauses or drains
        self.decisions: list[Decision] = []

    @property
    def ledger(self) -> AvailabilityLedger:
        """The plan's ledger, charged with every write admitted so far."""
        return self._budget

    def _note(self, action: Action, outcome: Outcome, reason: str) -> None:
        self.decisions.append(
            Decision(
                rule="guard",
                subject=subject_of(action),
                outcome=outcome,
                reason=reason,
                action=action,
            )
        )

    def admit(self, spec: RuleSpec, wanted: Action) -> Action | None:
        """The write that may go for `wanted` (it, or the part of it that may still go),
        or None: held or refused, with a decision saying why."""
        ctx, note = self._ctx, self._note
        action = wanted
        service_id = _service_of(action)
        if service_id is not None and not ctx.is_managed(service_id):
            # Only a rule that declares it (a release) may write it: to take back ours.
            service = ctx.snapshot.service_by_id.get(service_id)
            refusal = (
                spec.unmanaged(service, action)
                if spec.unmanaged is not None
                else "the service is not managed by the controller"
            )
            if refusal is not None:
                note(action, Outcome.REFUSE, refusal)
                return None
            note(action, Outcome.ALLOW, "not managed: this write only takes back the controller's")
        waiting = rollout_wait(ctx, action, spec.rollout_exemptions)
        if waiting is not None:
            note(action, Outcome.WAIT, waiting)
            return None
        if isinstance(action, SetNodeAvailability) and _drains_last_manager(
            ctx, action, self._taken_out
        ):
            note(action, Outcome.REFUSE, "it would leave no active manager")
            return None
        stranded = _strands(ctx, action, self._kept) or _stops_undeclared(ctx, action, self._kept)
        if stranded is not None:
            salvaged = spec.salvage(ctx, action) if spec.salvage is not None else None
            if salvaged is None:
                note(action, Outcome.REFUSE, stranded)
                return None
            note(action, Outcome.REFUSE, f"{stranded}; {salvaged.part}")
            note(salvaged.action, Outcome.ALLOW, salvaged.why)
            action = salvaged.action
        over = self._budget.refusal(action)
        if over is not None:
            note(action, Outcome.DEFER, over)
            return None
        self._budget.spend(action)
        service = ctx.snapshot.service_by_id.get(service_id or "")
        if service is not None and service.in_rollout:
            note(
                action,
                Outcome.ALLOW,
                f"written while Swarm rolls an update ({service.update_state}): "
                + (rollout_exception(ctx, service, action, spec.rollout_exemptions) or "allowed"),
            )
        elif service is not None and service.own_rollout_paused:
            note(action, Outcome.ALLOW, OWN_PAUSED)
        if (
            isinstance(action, SetNodeAvailability)
            and action.availability is not Availability.ACTIVE
        ):
            self._taken_out.add(action.node_id)
        self._kept.append(action)
        return action


def apply_guards(
    ctx: PlanContext, proposed: tuple[tuple[RuleSpec, Action], ...]
) -> tuple[tuple[tuple[RuleSpec, Action], ...], list[Decision]]:
    """The writes that may go, each with the rule that proposed it, and a decision for
    every write held, refused or let through by an exception."""
    guards = Guards(ctx)
    kept = [(spec, a) for spec, wanted in proposed if (a := guards.admit(spec, wanted)) is not None]
    return tuple(kept), guards.decisions
