"""The owners rule's account of a placement: each move, eviction and pending replica, and
why a better-ranked preferred owner is not used (failback held, cooling down, no room)."""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.context import PlanContext
from controller.core.decisions import Code, Decision, Outcome
from controller.core.kernel.candidates import Candidates
from controller.core.labels import EXCLUDED_LABEL
from controller.core.model import Service
from controller.core.rules.owners.assign import FAILBACK, Assignment, Move, PlacementInputs
from controller.core.rules.owners.name import RULE


def explain_placement(
    ctx: PlanContext,
    service: Service,
    *,
    result: Assignment,
    cands: Candidates,
    inputs: PlacementInputs,
    waiting: str | None,
    failback_blocked: str | None,
    full: Mapping[str, str],
) -> list[Decision]:
    """`full`: placeable nodes Swarm would not accept a task on, and why."""
    subject = f"service {service.name}"
    host = inputs.hostname
    notes = [_move_note(ctx, service, move, cands, host) for move in result.moves]
    for node, count in result.evicted.items():
        notes.append(
            Decision(
                RULE,
                subject,
                Outcome.EVICT,
                f"{count} task(s) on {host.get(node, node)} may not stay there",
            )
        )
    if result.unplaced:
        notes.append(
            Decision(
                RULE,
                subject,
                Outcome.PENDING,
                f"{result.unplaced} replica(s) have no allowed node (possible owners, "
                "constraints and hard anti-affinity leave none): they stay pending",
            )
        )
    notes.extend(
        _unused_preferred(
            service,
            result=result,
            cands=cands,
            host=host,
            waiting=waiting,
            failback_blocked=failback_blocked,
            full=full,
        )
    )
    return notes


def _move_note(
    ctx: PlanContext,
    service: Service,
    move: Move,
    cands: Candidates,
    host: Mapping[str, str],
) -> Decision:
    frm, to = host.get(move.from_node, move.from_node), host.get(move.to_node, move.to_node)
    # Back from a failover (its exclusion label stands), not a first placement.
    failback = move.reason == FAILBACK and EXCLUDED_LABEL in service.labels
    detail = {
        FAILBACK: (
            f"failback to preferred owner #{cands.rank(move.to_node) + 1} {to}"
            if failback
            else f"first placement on preferred owner #{cands.rank(move.to_node) + 1} {to}"
        ),
        "spread": f"restore spread over {ctx.settings(service.id).spread}",
        "anti-affinity": "separate from services of the same anti-affinity class",
    }[move.reason]
    why = f"a task from {frm} to {to}: {detail}"
    code = Code.FAILBACK if failback else None
    return Decision(RULE, f"service {service.name}", Outcome.MOVE, why, code=code)


def _unused_preferred(
    service: Service,
    *,
    result: Assignment,
    cands: Candidates,
    host: Mapping[str, str],
    waiting: str | None,
    failback_blocked: str | None,
    full: Mapping[str, str],
) -> list[Decision]:
    """Why a better-ranked preferred owner is left unused while a worse node runs tasks:
    Swarm would refuse it (`full`), or failback is held or not yet due."""
    subject = f"service {service.name}"
    notes: list[Decision] = []
    better = [
        n
        for n in cands.preferred
        if n in cands.placeable and n not in full and not result.desired.get(n)
    ]
    worse = [n for n in result.desired if cands.rank(n) >= len(cands.preferred)]
    refused = [n for n in cands.preferred if n in full and not result.desired.get(n)]
    if refused and worse:
        notes.append(
            Decision(
                RULE,
                subject,
                Outcome.KEEP,
                f"{host.get(refused[0], refused[0])} is preferred, but {full[refused[0]]}",
            )
        )
    if better and worse and not result.moves:
        reason = (
            failback_blocked or waiting or "the preferred owner is not ready for failback-delay yet"
        )
        notes.append(
            Decision(
                RULE,
                subject,
                Outcome.KEEP,
                f"{host.get(better[0], better[0])} is preferred, but {reason}",
            )
        )
    return notes
