"""Rebalancing: even out tasks per node after a join or return, and load across nodes.

Only managed, replicated services with `rebalance` on are moved, and only those the
owners rule does not place (preferred or possible owners, spread, anti-affinity): for
those, placement is the owners rule's, and two planners must not pull one service.

- Count skew (a returned node stays empty): surge-and-trim with the replica record
  (operation `rebalance`), which moves the fewest tasks and never runs fewer than the
  desired count; the failover rule trims once the new tasks run, also after a crash.
- Load (a node above the level's threshold): add `node.id!=HOT` to one service with
  tasks there (see balance/moves), recorded in `swarm-placement.excluded` with
  `swarm-placement.excluded-since`; after move-cooldown the exclusion is lifted, which
  moves nothing back.
Every move waits for a persistent imbalance, a trigger (join/return or periodic round),
a settled target, the service's cooldown, and the disruption budgets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial

from controller.core.actions import Action, SetServiceConstraints
from controller.core.clock import time_of_day
from controller.core.constraints import ConstraintError, parse_constraint
from controller.core.context import PlanContext, RuleOutput
from controller.core.counts import (
    SurgeTrim,
    active_counts,
    plan_surge_trim,
    room_in_doubt,
    running_by_node,
    spread,
)
from controller.core.decisions import Outcome
from controller.core.kernel.levels import level_for
from controller.core.kernel.local_data import data_stays
from controller.core.kernel.settling import is_settled
from controller.core.labels import (
    EXCLUDED_LABEL,
    EXCLUDED_SINCE_LABEL,
    excluded_nodes,
    without_exclusions,
)
from controller.core.memory import Memory
from controller.core.model import Service, ServiceMode
from controller.core.replica_operations import transition
from controller.core.replicas import Operation
from controller.core.rules.rebalance.cycle import (
    RebalanceCycle,
    blocked,
    forbidden,
    gate,
    persisted,
    receiver_loads,
    unsettled,
)
from controller.core.rules.rebalance.load import mean_score, node_loads
from controller.core.rules.rebalance.name import RULE
from controller.core.rules.rebalance.rebalance_memory import REBALANCE_MEMORY
from controller.core.rules.rebalance.shed import shed_load
from controller.core.rules.rebalance.triggers import find_joins, next_rebalance_memory, round_due
from controller.policy import ControllerSettings


def plan_rebalance(ctx: PlanContext) -> RuleOutput:
    controller = ctx.policy.controller
    level = level_for(controller.aggressiveness)
    # A new Raft leader's first view: counts and loads on nodes that have not reported
    # yet are stale, and no move is urgent. The periodic round stays due till they have.
    unknown = ctx.snapshot.unknown_hostnames
    cycle = RebalanceCycle(
        ctx=ctx,
        level=level,
        joins=find_joins(level, ctx.memory, ctx.snapshot.nodes, ctx.now),
        round_now=round_due(controller, ctx.memory, ctx.now) and not unknown,
        loads=node_loads(ctx.snapshot),
        budget=ctx.budget(),
    )
    services = [
        s
        for s in ctx.managed_services()
        if s.mode is ServiceMode.REPLICATED and ctx.settings(s.id).rebalance
    ]
    if unknown:
        _wait_for_every_node(cycle, services, unknown)
        services = []
    for service in services:
        _lift_exclusions(cycle, service)
    services = _data_follows(cycle, services)
    for service in services:
        if service.id not in cycle.written:
            _rebalance_counts(cycle, service)
    shed_load(cycle, [s for s in services if s.id not in cycle.written])
    remember = partial(
        _remember,
        controller=controller,
        now=ctx.now,
        seen=frozenset(cycle.seen),
        joins_used=dict(cycle.joins_used),
        round_ran=cycle.round_now,
    )
    return RuleOutput(tuple(cycle.actions), tuple(cycle.decisions), remember)


def _wait_for_every_node(
    cycle: RebalanceCycle, services: list[Service], unknown: tuple[str, ...]
) -> None:
    for service in services:
        cycle.note(
            f"service {service.name}",
            Outcome.WAIT,
            f"Swarm calls {', '.join(unknown)} unknown (a new Raft leader has not heard "
            "from them yet): rebalancing waits for every node's state",
        )


def _data_follows(cycle: RebalanceCycle, services: list[Service]) -> list[Service]:
    """The services rebalancing may move: not those whose data is on their nodes (said
    when a join or a round could have moved them)."""
    movable = []
    for service in services:
        why = data_stays(service, cycle.ctx.settings(service.id))
        if why is None:
            movable.append(service)
        elif cycle.joins.active or cycle.round_now:
            cycle.note(f"service {service.name}", Outcome.KEEP, f"its tasks where they are: {why}")
    return movable


def _remember(
    memory: Memory,
    *,
    controller: ControllerSettings,
    now: float,
    seen: frozenset[str],
    joins_used: dict[str, float],
    round_ran: bool,
) -> Memory:
    return memory.with_slice(
        REBALANCE_MEMORY,
        next_rebalance_memory(
            memory.slice(REBALANCE_MEMORY),
            controller=controller,
            now=now,
            seen=seen,
            joins_used=joins_used,
            round_ran=round_ran,
        ),
    )


# --- exclusions the rebalancer added ----------------------------------------------------------


def _lift_exclusions(cycle: RebalanceCycle, service: Service) -> None:
    ctx = cycle.ctx
    raw = service.labels.get(EXCLUDED_SINCE_LABEL)
    if raw is None or ctx.settings(service.id).steered:
        return
    try:
        since = float(raw)
    except ValueError:
        since = 0.0
    cooldown = ctx.policy.controller.move_cooldown_seconds
    subject = f"service {service.name}"
    excluded = excluded_nodes(service.labels)
    if ctx.now - since < cooldown:
        cycle.note(
            subject,
            Outcome.KEEP,
            f"keeps {cycle.hosts(set(excluded))} excluded until {time_of_day(since + cooldown)} "
            "(move-cooldown after the load move)",
        )
        return
    if unsettled(cycle, service) is not None:
        return
    action = SetServiceConstraints(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        constraints=without_exclusions(service.constraints, frozenset(excluded)),
        remove_labels=(EXCLUDED_LABEL, EXCLUDED_SINCE_LABEL),
    )
    cycle.add(
        service,
        action,
        Outcome.LIFT,
        "the load move's cooldown is over: the exclusion goes, which moves no task back",
    )


# --- count skew -------------------------------------------------------------------------------


def _shape(cycle: RebalanceCycle, counts: dict[str, int], nodes: frozenset[str]) -> str:
    return ", ".join(f"{cycle.host(n)} {counts.get(n, 0)}" for n in sorted(nodes, key=cycle.host))


def _rebalance_counts(cycle: RebalanceCycle, service: Service) -> None:
    ctx = cycle.ctx
    subject = f"service {service.name}"
    counts = active_counts(ctx.snapshot, service.id)
    try:
        if max(counts.values(), default=0) < cycle.level.count_spread:
            # No node holds enough of its tasks for a skew that large: spare the pass
            # over every node (its constraints are still read, to report them).
            tuple(parse_constraint(text) for text in service.constraints)
            return
        # Where the moves planned before this one put or take their tasks is Swarm's
        # tie-break: plan with the least room they may leave, check with the most.
        room, most_room = cycle.room_bounds(service, counts)
    except ConstraintError as exc:
        cycle.note(subject, Outcome.SKIP, f"cannot read its constraints: {exc}")
        return
    surge = plan_surge_trim(
        counts, room, running_by_node(ctx.snapshot), max_surge=service.replicas or 0
    )
    nodes = frozenset(room) | frozenset(n for n, c in counts.items() if c)
    if spread(counts, nodes) < cycle.level.count_spread:
        return
    if surge is None:
        cycle.note(
            subject,
            Outcome.KEEP,
            f"tasks per node {_shape(cycle, counts, nodes)}, but no surge can even it out: "
            "the emptier nodes have no room for its tasks",
        )
        return
    shape = f"tasks per node {_shape(cycle, counts, surge.nodes)}"
    stop = blocked(cycle, service)
    if stop is not None:
        cycle.note(subject, stop[0], f"{shape}, but {stop[1]}")
        return
    if not persisted(cycle, f"count:{service.id}"):
        persist = cycle.level.persist_cycles
        cycle.note(subject, Outcome.WAIT, f"{shape}: waiting for it to persist {persist} cycles")
        return
    joined, why_not = gate(cycle, surge.receivers)
    if joined is None:
        cycle.note(subject, Outcome.WAIT, f"{shape}, but {why_not}")
        return
    action = transition(
        service,
        RULE,
        Operation.REBALANCE,
        replicas=(service.replicas or 0) + surge.surge,
        now=ctx.now,
        detail=f"move {surge.surge} task(s) from {cycle.hosts(set(surge.sources))} "
        f"to {cycle.hosts(set(surge.receivers))}",
        evicts_from=tuple(sorted(surge.sources)),
    ).action
    doubt = room_in_doubt(counts, surge.at_most, room, most_room, surge.surge)
    refusal = _count_refusal(cycle, service, surge.at_most, doubt) or cycle.budget.refusal(action)
    if refusal is not None:
        cycle.note(subject, Outcome.KEEP, f"{shape}, but {refusal}")
        return
    _commit_count_move(cycle, service, action, surge, counts=counts, joined=joined, shape=shape)


def _commit_count_move(
    cycle: RebalanceCycle,
    service: Service,
    action: Action,
    surge: SurgeTrim,
    *,
    counts: Mapping[str, int],
    joined: Iterable[str],
    shape: str,
) -> None:
    """Charge the surge to the cycle's budget and loads and plan its write."""
    cycle.budget.spend(action)
    cycle.joins_used.update({n: cycle.joins.active[n] for n in joined})
    # The load part of this cycle sees the receivers charged, the sources not relieved:
    # where Swarm's tie-breaks put the tasks is not known, so assume the worse.
    cycle.loads.update(receiver_loads(cycle, service, surge.at_most))
    cycle.promise(service, surge.at_most)
    cycle.release(
        service,
        {n: min(surge.surge, counts.get(n, 0) + surge.at_most.get(n, 0)) for n in surge.sources},
    )
    cycle.add(
        service,
        action,
        Outcome.REBALANCE,
        f"{shape}: surge by {surge.surge} so Swarm starts the moved task(s) on the "
        f"emptiest node(s), then trim {surge.surge} from the busiest; nothing else restarts",
    )


def _count_refusal(
    cycle: RebalanceCycle,
    service: Service,
    at_most: Mapping[str, int],
    doubt: frozenset[str],
) -> str | None:
    ctx = cycle.ctx
    receivers = frozenset(at_most)
    early = {n for n in receivers if not is_settled(cycle.level, ctx.memory, n, ctx.now)}
    if early:
        return f"{cycle.hosts(early)} has not been ready long enough"
    back = receivers & forbidden(ctx, service)
    if back:
        return f"the tasks would go straight back to {cycle.hosts(set(back))}"
    if doubt:
        return (
            f"whether {cycle.hosts(doubt)} can take its tasks depends on where Swarm puts "
            "the tasks moved before it this cycle"
        )
    mean = mean_score(cycle.loads)
    highest = max((load.score for load in cycle.loads.values()), default=0.0)
    for node_id, load in sorted(receiver_loads(cycle, service, at_most).items()):
        if cycle.level.is_hot(load.score, mean):
            return f"it would make {cycle.host(node_id)} hot"
        if load.score > highest:
            return f"it would make {cycle.host(node_id)} the most loaded node"
    return None
