"""Where a speculative surge could go: free nodes, free nodes a new Raft leader has not
heard from yet, and nodes that would take a surged task beside a replica; each with
room as Swarm counts it and allowed by the service's constraints."""

from __future__ import annotations

from dataclasses import replace

from controller.core.capacity import observe_room
from controller.core.constraints import ConstraintError, node_filter, parse_constraint
from controller.core.context import PlanContext
from controller.core.model import Availability, ClusterSnapshot, Node, NodeState, Service


def names(ctx: PlanContext, node_ids: tuple[str, ...]) -> str:
    by_id = ctx.snapshot.node_by_id
    return ", ".join(by_id[n].hostname if n in by_id else n for n in node_ids)


def free_nodes(ctx: PlanContext, service: Service, *, avoid: frozenset[str]) -> int:
    """Nodes that would take a surged task first: ready and active, allowed by the
    constraints, holding no task of the service (Swarm places on the fewest), not
    suspected, with room for one task as Swarm counts it (reservations, max per node)."""
    nodes, occupied = _placeable(ctx, service, avoid)
    return sum(1 for n in nodes if n.accepts_tasks and n.id not in occupied)


def unheard_free_nodes(
    ctx: PlanContext, service: Service, *, avoid: frozenset[str]
) -> tuple[str, ...]:
    """Nodes that would be free but that a new Raft leader has not heard from yet
    (`unknown`), while every liveness signal about them says they live: Swarm places on
    them once they report, which after an election takes up to its session back-off."""
    said = _signal_words(ctx)
    nodes, occupied = _placeable(ctx, service, avoid, reported=True)
    return tuple(
        n.id
        for n in nodes
        if n.state is NodeState.UNKNOWN
        and n.availability is Availability.ACTIVE
        and said.get(n.id) == {True}
        and n.id not in occupied
    )


def beside_nodes(ctx: PlanContext, service: Service, *, avoid: frozenset[str]) -> tuple[str, ...]:
    """Nodes holding a task of the service on which Swarm could place a surged task
    beside it, now or once they report: active, allowed, not suspected, with room."""
    nodes, occupied = _placeable(ctx, service, avoid, reported=True)
    return tuple(n.id for n in nodes if n.id in occupied)


def _placeable(
    ctx: PlanContext, service: Service, avoid: frozenset[str], *, reported: bool = False
) -> tuple[list[Node], set[str]]:
    """The nodes not in `avoid` that the service's constraints allow and that have room
    for one more of its tasks as Swarm counts it (with `reported`, as it will once every
    `unknown` node has reported), and the nodes holding its tasks."""
    try:
        allowed = node_filter(parse_constraint(c) for c in service.constraints)
    except ConstraintError:
        return [], set()
    room = observe_room(_as_reported(ctx, avoid) if reported else ctx.snapshot)
    nodes = [
        n
        for n in ctx.snapshot.nodes
        if n.id not in avoid and allowed(n) and room.fit_count(service, (n.id,)) >= 1
    ]
    return nodes, {t.node_id for t in ctx.snapshot.tasks_of(service.id)}


def _as_reported(ctx: PlanContext, avoid: frozenset[str]) -> ClusterSnapshot:
    """The snapshot as Swarm will count room once every `unknown` node not in `avoid`
    has reported to the new leader."""
    nodes = tuple(
        replace(n, state=NodeState.READY)
        if n.state is NodeState.UNKNOWN and n.id not in avoid
        else n
        for n in ctx.snapshot.nodes
    )
    return replace(ctx.snapshot, nodes=nodes)


def _signal_words(ctx: PlanContext) -> dict[str, set[bool]]:
    """Node id -> what its liveness signals say (alive or not), all sources together."""
    said: dict[str, set[bool]] = {}
    for signal in ctx.snapshot.liveness:
        said.setdefault(signal.node_id, set()).add(signal.alive)
    return said
