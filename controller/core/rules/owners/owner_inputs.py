"""What one steered service's placement is computed from: its candidates, its room, the
holds on its moves (the cooldown, failback, its data), and the placement a move under way
goes on with."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from controller.core.context import PlanContext
from controller.core.decisions import Decision, Outcome
from controller.core.kernel.candidates import Candidates
from controller.core.kernel.local_data import data_stays
from controller.core.model import Service
from controller.core.rules.owners.assign import PlacementInputs, assign
from controller.core.rules.owners.cycle_view import Projection, Shared
from controller.core.rules.owners.fits import room_for
from controller.core.rules.owners.name import RULE
from controller.core.rules.owners.owner_waits import (
    cooldown_left,
    failback_due,
    failback_ready_nodes,
)
from controller.policy import AntiAffinityMode, ServiceSettings


def _allowed_now(service: Service, cands: Candidates) -> frozenset[str] | None:
    """The placeable nodes the service's recorded steering allows; None if never steered."""
    if not service.excluded_recorded:
        return None
    return cands.placeable - service.excluded


@dataclass
class Planning:
    """One steered service while its placement is planned: what the steps share."""

    service: Service
    settings: ServiceSettings
    current: Mapping[str, int]
    cands: Candidates
    fitting: Candidates  # the candidates less the full nodes that are no target
    room: Mapping[str, int]
    full: dict[str, str]
    failback_ready: frozenset[str]
    failback_blocked: str | None
    waiting: str | None  # the cooldown that holds a new placement
    data_reason: str | None  # why its tasks stay with their data
    max_moves: int
    notes: list[Decision] = field(default_factory=list)

    def note(self, outcome: Outcome, reason: str) -> None:
        self.notes.append(Decision(RULE, f"service {self.service.name}", outcome, reason))


def planning(
    ctx: PlanContext,
    service: Service,
    settings: ServiceSettings,
    *,
    current: Mapping[str, int],
    cands: Candidates,
    shared: Shared,
) -> Planning:
    # Only nodes Swarm will accept a task on are targets: `room` (read as the placement
    # looks at nodes) lets a full node take no more. A full preferred owner is no target
    # for failback either, unless it holds the service's tasks: they keep their rank.
    room, full = room_for(service, cands.placeable, shared.fits, explain=cands.preferred)
    no_target = {n for n in full if not current.get(n)}
    fitting = replace(cands, placeable=cands.placeable - no_target) if no_target else cands
    failback_ready, failback_blocked = failback_ready_nodes(ctx, service, settings, fitting)
    waiting = cooldown_left(ctx, service)
    last_move = ctx.memory.last_move.get(service.id)
    returned = frozenset(
        n
        for n in failback_ready
        if last_move is not None and ctx.memory.node_ready_since.get(n, -1.0) >= last_move
    )
    if waiting and failback_due(current, returned, cands):
        # A preferred owner came back after the last move (the failover's trim): failing
        # back has its own clock (failback-delay, the window), the cooldown must not hold
        # it for minutes more. A new placement (a policy change) still waits it out.
        waiting = None
    # A task whose data is on its node is not moved for the policy's preferences.
    data_reason = data_stays(service, settings)
    max_moves = 0 if data_reason else max(settings.max_unavailable, 0)
    return Planning(
        service, settings, current, cands, fitting, room, full,
        failback_ready, failback_blocked, waiting, data_reason, max_moves,
    )  # fmt: skip


def placement_inputs(
    ctx: PlanContext, p: Planning, projection: Projection, shared: Shared
) -> PlacementInputs:
    settings, level = p.settings, p.settings.spread or None
    soft_mates = (
        projection.mates(settings.anti_affinity)
        if settings.anti_affinity_mode is AntiAffinityMode.SOFT
        else Counter()
    )
    return PlacementInputs(
        replicas=p.service.replicas or 0,
        current=p.current,
        candidates=p.fitting,
        domain=shared.domain(level),
        mates=soft_mates,
        load=shared.load,
        hostname=shared.hostname,
        failback_ready=p.failback_ready,
        max_moves=0 if p.waiting else p.max_moves,
        order=shared.order(level),
        scores=ctx.snapshot.plugins.scores.get(p.service.id, {}),
        room=p.room,
        standbys=shared.standbys,
        allowed_now=_allowed_now(p.service, p.fitting),
        returning=shared.returning,
    )


def going_on(
    ctx: PlanContext, p: Planning, inputs: PlacementInputs, shared: Shared
) -> PlacementInputs:
    """The inputs with the rest of the placement the last move started, when it goes on."""
    heading = ctx.memory.placing.get(p.service.id)
    if heading is None:
        return inputs
    target, since = heading
    if dict(p.current) == dict(target):
        shared.placing[p.service.id] = None  # arrived
    elif (p.waiting or p.failback_blocked) and p.max_moves:
        # The cooldown and the failback mode hold a new placement, not the rest of the one
        # the last move started (max-unavailable splits a placement into several moves):
        # while the destination is unchanged, and none of its nodes has gone down since
        # the placement began, the placement goes on.
        going_on = replace(
            inputs,
            failback_ready=p.failback_ready | (frozenset(target) & p.fitting.placeable),
            max_moves=p.max_moves,
        )
        ready_since = ctx.memory.node_ready_since
        settled = all(ready_since.get(n, float("inf")) <= since for n in target)
        if settled and destination(going_on) == dict(target):
            p.waiting, p.failback_blocked = None, None
            return going_on
        shared.placing[p.service.id] = None
    return inputs


def destination(inputs: PlacementInputs) -> dict[str, int]:
    """Where the service ends once every permitted step is made (moves not capped)."""
    unlimited = inputs.replicas + sum(inputs.current.values())
    return dict(assign(replace(inputs, max_moves=unlimited)).desired)
