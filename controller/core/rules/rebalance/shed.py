"""Shedding load off hot nodes: one service per hot node per cycle, by an exclusion.

Hot nodes are handled hottest first, each with the loads the moves planned before it
leave (receivers charged as if they got the most, sources relieved only of what surely
leaves). A node waits while a move off it is under way: its load is not settled yet.
"""

from __future__ import annotations

from functools import partial

from controller.core.actions import SetServiceConstraints
from controller.core.counts import active_counts
from controller.core.decisions import Outcome
from controller.core.kernel.settling import is_settled
from controller.core.labels import (
    EXCLUDED_LABEL,
    EXCLUDED_SINCE_LABEL,
    excluded_nodes,
    exclusion_constraint,
    format_exclusions,
)
from controller.core.model import Service
from controller.core.rules.rebalance.cycle import (
    RebalanceCycle,
    blocked,
    forbidden,
    gate,
    persisted,
)
from controller.core.rules.rebalance.load import Load, mean_score
from controller.core.rules.rebalance.moves import LoadMove, MoveRules, choose_move


def _describe_load(load: Load) -> str:
    return f"cpu {load.cpu:.0%}, memory {load.memory:.0%}"


def shed_load(cycle: RebalanceCycle, services: list[Service]) -> None:
    ctx = cycle.ctx
    mean = mean_score(cycle.loads)
    hot = sorted(
        (n for n, load in cycle.loads.items() if cycle.level.is_hot(load.score, mean)),
        key=lambda n: (-cycle.loads[n].score, cycle.host(n)),
    )
    if not hot:
        return
    joined, why_not = gate(cycle, None)
    for node_id in hot:
        subject = f"node {cycle.host(node_id)}"
        state = (
            f"{_describe_load(cycle.loads[node_id])} is above level {cycle.level.aggressiveness}"
        )
        if not persisted(cycle, f"load:{node_id}"):
            persist = cycle.level.persist_cycles
            cycle.note(
                subject, Outcome.WAIT, f"{state}: waiting for it to persist {persist} cycles"
            )
            continue
        if joined is None:
            cycle.note(subject, Outcome.WAIT, f"{state}, but {why_not}")
            continue
        moving = sorted(
            s.name
            for s in ctx.snapshot.services
            if s.updating and active_counts(ctx.snapshot, s.id).get(node_id)
        )
        if moving:
            cycle.note(subject, Outcome.WAIT, f"{state}: {', '.join(moving)} is moving already")
            continue
        move, why = _choose(cycle, services, node_id, mean)
        if move is None:
            cycle.note(
                subject,
                Outcome.KEEP,
                f"{state}, but no service can move: {why or 'none opted in runs there'}",
            )
            continue
        action = move_off_action(cycle, move.service, node_id)
        refusal = cycle.budget.refusal(action)
        if refusal is not None:
            cycle.note(subject, Outcome.KEEP, f"{state}, but {refusal}")
            continue
        move_off(cycle, move.service, action, move.projection.targets)
        cycle.loads.update(move.projection.loads)
        cycle.promise(move.service, move.projection.at_most)
        cycle.release(move.service, {node_id: move.projection.moved})
        cycle.joins_used.update({n: cycle.joins.active[n] for n in joined or ()})


def _choose(
    cycle: RebalanceCycle, services: list[Service], node_id: str, mean: float
) -> tuple[LoadMove | None, str]:
    """The service to move off a hot node, or None and why none of those there can."""
    ctx = cycle.ctx
    here = [
        s
        for s in services
        if s.id not in cycle.written and active_counts(ctx.snapshot, s.id).get(node_id)
    ]
    held = {s.name: stop[1] for s in here if (stop := blocked(cycle, s)) is not None}
    movable = [s for s in here if s.name not in held]
    rules = MoveRules(
        level=cycle.level,
        mean=mean,
        forbidden=partial(forbidden, ctx),
        settled=lambda n: is_settled(cycle.level, ctx.memory, n, ctx.now),
        promised=cycle.promised,
        released=cycle.released,
    )
    move, refused = choose_move(
        ctx.snapshot,
        source=node_id,
        services=movable,
        loads=cycle.loads,
        rules=rules,
        max_unavailable=lambda s: ctx.settings(s.id).max_unavailable,
    )
    if move is not None:
        return move, ""
    return None, "; ".join(f"{name}: {r}" for name, r in sorted({**held, **refused}.items()))


def move_off_action(cycle: RebalanceCycle, service: Service, node_id: str) -> SetServiceConstraints:
    ctx = cycle.ctx
    excluded = {*excluded_nodes(service.labels), node_id}
    return SetServiceConstraints(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        constraints=(*service.constraints, exclusion_constraint(node_id)),
        evicts_from=(node_id,),
        set_labels={
            EXCLUDED_LABEL: format_exclusions(excluded),
            EXCLUDED_SINCE_LABEL: f"{ctx.now:.3f}",
        },
    )


def move_off(
    cycle: RebalanceCycle,
    service: Service,
    action: SetServiceConstraints,
    targets: frozenset[str],
) -> None:
    (node_id,) = action.evicts_from
    cycle.budget.spend(action)
    how = (
        "start-first: each replacement starts before the old task stops"
        if service.update_order == "start-first"
        else "stop-first: each task stops before its replacement starts"
    )
    cycle.add(
        service,
        action,
        Outcome.MOVE,
        f"take its load off hot {cycle.host(node_id)} to {cycle.hosts(set(targets))} ({how})",
    )
