"""Possible and preferred owners, failback, anti-affinity and fault-domain spread.

Services are planned one at a time, highest priority first, so a service sees where
the ones planned before it will be (for anti-affinity) rather than where they were.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace

from controller.core.actions import Action, SetServiceConstraints, target_of
from controller.core.constraints import ConstraintError
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Decision, Outcome
from controller.core.kernel.candidates import find_candidates, operator_constraints
from controller.core.labels import EXCLUDED_LABEL, format_exclusions
from controller.core.model import Service, ServiceMode
from controller.core.rules.owners.assign import Assignment, PlacementInputs, assign
from controller.core.rules.owners.cycle_view import Projection, Shared, hard_excluded
from controller.core.rules.owners.name import RULE
from controller.core.rules.owners.owner_gaps import possible_gap_note, possible_wait
from controller.core.rules.owners.owner_inputs import (
    Planning,
    destination,
    going_on,
    placement_inputs,
    planning,
)
from controller.core.rules.owners.owner_moves import (
    finish_stop_first,
    is_stop_first,
    keep_local_data,
    stop_first_move,
    surge_to_reduce,
)
from controller.core.rules.owners.owner_notes import explain_placement
from controller.core.rules.owners.owner_waits import (
    current_counts,
    move_in_flight,
    settle_wait,
)
from controller.core.rules.owners.stalled_moves import stalled_on
from controller.core.rules.owners.steer import Steering, steer
from controller.core.rules.owners.widen_only import opening_ready_nodes
from controller.policy import ServiceSettings

# A service's write (if any), its decisions, and where its tasks will be.
Planned = tuple[Action | None, list[Decision], Mapping[str, int]]


def plan_owners(ctx: PlanContext) -> RuleOutput:
    actions: list[Action] = []
    decisions: list[Decision] = []
    projection = Projection()
    services = sorted(
        (s for s in ctx.managed_services() if s.mode is ServiceMode.REPLICATED),
        key=lambda s: (-ctx.settings(s.id).priority, s.name),
    )
    for service in services:
        for name in ctx.settings(service.id).anti_affinity:
            projection.pending.setdefault(name, {})[service.id] = Counter(
                current_counts(ctx, service)
            )
    shared = Shared(ctx)
    written = {target_of(a) for a in ctx.planned}
    # Just after a Raft leader change Swarm calls every node `unknown` until it reports
    # to the new leader: steering from that view would exclude nodes that are fine (the
    # guards refuse the worst of it) and write again as each node reports. Swarm's own
    # failover, and the failover rule's surges, go on meanwhile.
    unknown = ctx.snapshot.unknown_hostnames
    for service in services:
        settings = ctx.settings(service.id)
        projection.planned(settings.anti_affinity, service.id)
        if not settings.steered:
            continue
        action, notes = _plan_one(
            ctx, service, settings, projection, shared, written=written, unknown=unknown
        )
        if action is not None:
            actions.append(action)
        decisions.extend(notes)
        decisions.extend(possible_gap_note(ctx, service, settings, shared.index, notes))
    placing = dict(shared.placing)
    return RuleOutput(
        tuple(actions),
        tuple(decisions),
        remember=(lambda memory: memory.with_placing(placing)) if placing else None,
    )


def _plan_one(
    ctx: PlanContext,
    service: Service,
    settings: ServiceSettings,
    projection: Projection,
    shared: Shared,
    *,
    written: set[tuple[str, str]],
    unknown: tuple[str, ...],
) -> tuple[Action | None, list[Decision]]:
    """Plan one steered service: its write (if any) and its decisions."""
    notes: list[Decision] = []
    if unknown and ("service", service.id) not in written:
        opening = opening_ready_nodes(ctx, service)
        if opening is not None:
            notes.append(
                Decision(
                    RULE,
                    f"service {service.name}",
                    Outcome.STEER,
                    f"a replica waits for a node while Swarm calls {', '.join(unknown)} "
                    "unknown, and only the controller's exclusions keep it off nodes that "
                    "take tasks now: they are dropped (placement only widens); steering "
                    "resumes once every node has reported",
                    action=opening,
                )
            )
            return opening, notes
    if unknown:
        notes.append(
            Decision(
                RULE,
                f"service {service.name}",
                Outcome.WAIT,
                f"Swarm calls {', '.join(unknown)} unknown (a new Raft leader has not "
                "heard from them yet): steering waits for every node's state",
            )
        )
        return None, notes
    if ("service", service.id) in written:
        # An earlier rule writes it this cycle (a surge, a recovered record): plan it
        # on the next one, from what that write leaves, and remember no move for it.
        notes.append(
            Decision(RULE, f"service {service.name}", Outcome.DEFER, "written this cycle already")
        )
        return None, notes
    action, found, placement = _plan_service(ctx, service, settings, projection, shared)
    notes.extend(found)
    # Mates keep clear of where this service will be and of where it still is.
    current = current_counts(ctx, service)
    projection.add(
        settings.anti_affinity,
        {n: max(placement.get(n, 0), current.get(n, 0)) for n in {*placement, *current}},
    )
    if action is not None:  # its targets' room is spoken for, this cycle
        shared.fits = shared.fits.taken(
            service, {n: c - current.get(n, 0) for n, c in placement.items()}
        )
    return action, notes


def _plan_service(
    ctx: PlanContext,
    service: Service,
    settings: ServiceSettings,
    projection: Projection,
    shared: Shared,
) -> Planned:
    subject = f"service {service.name}"
    current = current_counts(ctx, service)
    try:
        constraints = operator_constraints(service)
    except ConstraintError as exc:
        why = f"cannot read its constraints: {exc}"
        return None, [Decision(RULE, subject, Outcome.SKIP, why)], current
    finishing = finish_stop_first(ctx, service, current=current)
    if finishing is not None:
        action, note = finishing
        return action, [note], current
    busy = move_in_flight(ctx, service)
    if busy is not None:
        return None, [Decision(RULE, subject, Outcome.WAIT, busy)], current
    cands = find_candidates(
        service,
        settings,
        ctx.snapshot.nodes,
        ctx.policy,
        constraints=constraints,
        hard_excluded=hard_excluded(service, settings, projection, current),
        index=shared.index,
    )
    p = planning(ctx, service, settings, current=current, cands=cands, shared=shared)
    inputs = going_on(ctx, p, placement_inputs(ctx, p, projection, shared), shared)
    result = _assigned(ctx, p, inputs)
    steering = _steering(ctx, p, result, shared)
    return _act(ctx, p, _Chosen(inputs, result, steering), shared)


@dataclass(frozen=True, slots=True)
class _Chosen:
    """What the service's write is made from: the placement and how to steer to it."""

    inputs: PlacementInputs
    result: Assignment
    steering: Steering


def _assigned(ctx: PlanContext, p: Planning, inputs: PlacementInputs) -> Assignment:
    """The placement, with a word for a hold that changes it."""
    result = assign(inputs)
    # The cooldown holds moves only where the service may move (max-moves > 0); a task
    # whose data is on its node (max-moves 0) is held by that instead: never both.
    held, moves = (
        (p.waiting, p.max_moves)
        if p.waiting and p.max_moves
        else (p.data_reason, max(p.settings.max_unavailable, 1))
    )
    if held:
        unheld = assign(replace(inputs, max_moves=moves))
        if dict(unheld.desired) != dict(result.desired):
            p.note(Outcome.KEEP, f"its tasks where they are: {held}")
    p.notes.extend(
        explain_placement(
            ctx,
            p.service,
            result=result,
            cands=p.cands,
            inputs=inputs,
            waiting=p.waiting,
            failback_blocked=p.failback_blocked,
            full=p.full,
        )
    )
    return result


def _steering(ctx: PlanContext, p: Planning, result: Assignment, shared: Shared) -> Steering:
    waits = possible_wait(ctx, p.service, p.cands, p.current, local=bool(p.data_reason))
    if waits is not None:
        p.note(Outcome.WAIT, waits)
    steering = steer(
        service_name=p.service.name,
        operator_constraints=p.service.operator_constraints,
        assignment=result,
        current=p.current,
        all_nodes=shared.node_ids,
        prefers=p.settings.prefers,
        mode=ctx.policy.controller.steering,
        max_exclusions=ctx.policy.controller.steering_max_exclusions,
        possible=p.cands.possible,
        require_possible_label=p.cands.possible is not None and waits is None,
    )
    if steering.standby is not None:
        shared.standbys[steering.standby] += 1
    return steering


def _act(
    ctx: PlanContext,
    p: Planning,
    chosen: _Chosen,
    shared: Shared,
) -> Planned:
    """The write that realises the placement: a move, constraints, or none."""
    inputs, result, steering = chosen.inputs, chosen.result, chosen.steering
    service, current = p.service, p.current
    settling = settle_wait(
        ctx,
        p.settings,
        leaving={*steering.vacate, *steering.reduce},
        desired=result.desired,
        current=current,
        cands=p.cands,
    )
    if settling is not None:
        p.notes = [n for n in p.notes if n.outcome != Outcome.MOVE]
        p.note(Outcome.KEEP, f"its tasks where they are: {settling}")
        return None, p.notes, current
    if steering.vacate and p.data_reason:
        return keep_local_data(ctx, service, steering, p.notes, p.data_reason)
    if steering.vacate and is_stop_first(service):
        moved = stop_first_move(
            ctx,
            service,
            steering,
            current=current,
            desired=result.desired,
            fits=shared.fits,
            leaving=frozenset(steering.vacate) - p.cands.keepable,
        )
    elif steering.constraints == service.constraints:
        if not (steering.reduce and not steering.vacate):
            return None, p.notes, result.desired
        reduced = _reduce(ctx, p, chosen, shared)
        if reduced is None:
            return None, p.notes, current
        moved = reduced
    else:
        return _steer_write(ctx, p, chosen, shared)
    action, note = moved
    if action is None:  # the moves explained above are not made
        p.notes = [n for n in p.notes if n.outcome != Outcome.MOVE]
    p.notes.append(note)
    if action is not None:  # a step of the move: the rest follows, whatever the cooldown
        shared.heading(service, destination(inputs))
    return action, p.notes, result.desired if action is not None else current


def _reduce(
    ctx: PlanContext,
    p: Planning,
    chosen: _Chosen,
    shared: Shared,
) -> tuple[Action | None, Decision] | None:
    """Take the extra tasks off the nodes that should hold fewer, or None: held."""
    inputs, result, steering = chosen.inputs, chosen.result, chosen.steering
    # Tasks over a node's share (after a failover, say) stay while moves are held, and
    # a move onto a preferred owner is a failback, whatever the share says.
    gains = [n for n, c in result.desired.items() if c > p.current.get(n, 0)]
    failback = p.failback_blocked if any(n in p.cands.preferred for n in gains) else None
    held = (
        p.data_reason
        or failback
        or p.waiting
        or ("max-unavailable is 0" if not inputs.max_moves else None)
    )
    if held is not None:
        nodes = ctx.snapshot.node_by_id
        hosts = ", ".join(nodes[n].hostname for n in steering.reduce)
        p.note(Outcome.KEEP, f"its extra task(s) on {hosts}: {held}")
        return None
    return surge_to_reduce(
        ctx,
        p.service,
        steering.reduce,
        current=p.current,
        desired=result.desired,
        fits=shared.fits,
    )


def _steer_write(ctx: PlanContext, p: Planning, chosen: _Chosen, shared: Shared) -> Planned:
    """The new constraints, in one write with the exclusions they record."""
    steering = chosen.steering
    service, nodes = p.service, ctx.snapshot.node_by_id
    action = SetServiceConstraints(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        constraints=steering.constraints,
        evicts_from=steering.vacate,
        set_labels={EXCLUDED_LABEL: format_exclusions(steering.excluded)},
    )
    stalled = stalled_on(ctx.snapshot, service)
    if steering.vacate:
        why = "steer Swarm to the desired placement"
        shared.heading(service, destination(chosen.inputs))
    elif stalled:
        why = (
            f"call off the move onto {', '.join(sorted(nodes[n].hostname for n in stalled))}: "
            "every node the move allows went down before it finished; the tasks stay where "
            "they run"
        )
    elif steering.open_at_rest:
        why = (
            f"at rest, open: standby steering would exclude more than "
            f"{ctx.policy.controller.steering_max_exclusions} nodes (steering-max-exclusions), "
            "so Swarm fails over anywhere and the controller corrects it (no task moves)"
        )
    else:
        why = "keep Swarm's failover on the policy's nodes (no task moves)"
    p.notes.append(Decision(RULE, f"service {service.name}", Outcome.STEER, why, action=action))
    return action, p.notes, chosen.result.desired
