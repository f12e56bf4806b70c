"""Speculative failover: start a suspected node's replicas elsewhere before Swarm's down.

A node is suspected (core/health/suspicion.py) when faster signals than Swarm's heartbeat
agree it is gone. For a service with `failover-mode: speculative` the replica count goes
up by its tasks there, and nothing on the node is stopped or excluded: if the node is
alive nothing of it is lost, and if it is dead its replacements already run. The count
carries a replica record (operation `speculate`, the nodes in its detail), so the failover
rule, which leaves a record it does not own alone, never surges a second time for the
same loss.

What follows the surge:
- Swarm (or a health report) confirms a node down: once Swarm has taken the service's
  tasks off it, the record becomes the failover rule's `surge` and its trim takes over
  (Swarm's delayed replacements are not running yet, so exactly they are dropped).
- Every node comes back to no suspicion while Swarm has not given it up: a false alarm,
  back to the operator's count. Swarm's scale-down picks among the nodes with the most
  tasks of the service and cannot be told which task to drop: where a node holding an
  original ties with a node holding a surged task, the trim may stop the original (the
  service keeps its count), so the trim names those nodes and the disruption budgets
  apply to it. Trimmed while the surged tasks are still starting, they go first.

Never harm: no surge without a free node (ready, active, allowed, holding none of the
service's tasks, not suspected) for every replica, none while a confirmed failover still
waits for its replacements (it comes first for the room), none in a health panic; with
no room the service waits for confirmation, as `confirmed` services always do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from controller.core.actions import Action
from controller.core.capacity import observe_room
from controller.core.constraints import ConstraintError, node_filter, parse_constraint
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Code, Decision, Outcome
from controller.core.health.suspicion import SWARM_UNDECIDED
from controller.core.kernel.drop_order import STABLE_SORT_SLOTS, scale_down_order
from controller.core.kernel.ledger import scale_down_stops
from controller.core.model import Service, ServiceMode, Task, TaskState
from controller.core.replicas import (
    SPECULATE,
    SURGE,
    ReplicaRecord,
    change_replicas,
    operator_changed,
    restore_replicas,
)
from controller.policy import FailoverMode

RULE = "speculative"
_NODES = re.compile(r"^nodes=([^;]*);")


def speculated_nodes(record: ReplicaRecord) -> tuple[str, ...]:
    """The suspected node IDs a `speculate` record was written for (from its detail)."""
    match = _NODES.match(record.detail)
    return tuple(n for n in match.group(1).split(",") if n) if match else ()


def extra_replica_seconds(record: ReplicaRecord, now: float) -> float:
    return max(0.0, (record.written - record.base) * (now - record.since))


def plan_speculative(ctx: PlanContext) -> RuleOutput:
    actions: list[Action] = []
    decisions: list[Decision] = []
    for service in ctx.managed_services():
        if service.mode is not ServiceMode.REPLICATED:
            continue
        action, note = _plan_service(ctx, service)
        if note is not None:
            if action is not None:
                note = replace(note, action=action)
            decisions.append(note)
        if action is not None:
            actions.append(action)
    return RuleOutput(tuple(actions), tuple(decisions))


def _plan_service(ctx: PlanContext, service: Service) -> tuple[Action | None, Decision | None]:
    if service.replica_record_error is not None:
        return None, None  # the failover rule reports it
    record = service.replica_record
    if record is not None:
        if record.operation != SPECULATE or operator_changed(service, record):
            return None, None  # another rule's, or the operator's count: failover forgets
        return _follow(ctx, service, record)
    suspected = ctx.health.suspected
    on = [t for t in ctx.snapshot.tasks_of(service.id) if t.node_id in suspected]
    if not on:
        return None, None
    subject = f"service {service.name}"
    nodes = tuple(sorted({t.node_id for t in on}))
    where = ", ".join(suspected[n].hostname for n in nodes)
    mode = ctx.settings(service.id).failover_mode
    if failover_mode_of(mode, service) is not FailoverMode.SPECULATIVE:
        why = "failover-mode confirmed"
        if mode is FailoverMode.AUTO:
            why = "failover-mode auto with max-replicas-per-node 1: confirmed"
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"{len(on)} task(s) on suspected {where}: {why}, it waits for Swarm to mark the "
            "node down",
        )
    waiting = sorted(
        s.name
        for s in ctx.snapshot.services
        if s.id in ctx.memory.lost and s.id != service.id and ctx.is_managed(s.id)
    )
    if waiting:
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"{len(on)} task(s) on suspected {where}, but a confirmed failover comes first "
            f"for the room ({', '.join(waiting[:5])}): it waits for confirmation",
        )
    free = _free_nodes(ctx, service, avoid=frozenset(suspected))
    if free < len(on):
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"{len(on)} task(s) on suspected {where}, but only {free} free node(s) could take "
            "them without stacking or landing back on a suspected node: it waits for "
            "confirmation",
        )
    replicas = service.replicas or 0
    tasks = ctx.snapshot.tasks_of(service.id)
    if not trim_would_spare_originals(tasks, base=replicas, surged=len(on)):
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"{len(on)} task(s) on suspected {where}, but if it were a false alarm the trim "
            "back could stop a running original (two on one node, slots with gaps, or more "
            f"than {STABLE_SORT_SLOTS} slots): it waits for confirmation",
        )
    signals = "; ".join(f"{suspected[n].hostname}: {'+'.join(suspected[n].sources)}" for n in nodes)
    action = change_replicas(
        service,
        replicas=replicas + len(on),
        operation=SPECULATE,
        now=ctx.now,
        detail=f"nodes={','.join(nodes)}; {len(on)} replica(s) on suspected {where}",
    )
    return action, Decision(
        RULE,
        subject,
        Outcome.SPECULATE,
        f"{len(on)} task(s) on suspected {where} ({signals}): {replicas} -> "
        f"{replicas + len(on)} so replacements start now; nothing on the node is stopped",
    )


def _follow(
    ctx: PlanContext, service: Service, record: ReplicaRecord
) -> tuple[Action | None, Decision | None]:
    subject = f"service {service.name}"
    nodes = speculated_nodes(record)
    by_id = ctx.snapshot.node_by_id
    down = [n for n in nodes if n not in by_id or by_id[n].state not in SWARM_UNDECIDED]
    if down:
        held = [t for t in ctx.snapshot.tasks_of(service.id) if t.node_id in down]
        names = ", ".join(by_id[n].hostname if n in by_id else n for n in down)
        if held:
            return None, Decision(
                RULE,
                subject,
                Outcome.WAIT,
                f"{names} confirmed down; Swarm still holds {len(held)} task(s) there: the "
                "hand-over to failover waits until it gives them up",
            )
        handover = change_replicas(
            service,
            replicas=record.written,
            operation=SURGE,
            now=ctx.now,
            base=record.base,
            detail=f"speculative surge confirmed: {names} down",
        )
        return handover, Decision(
            RULE,
            subject,
            Outcome.CONFIRM,
            f"{names} confirmed down: the speculative surge covers its replicas; failover "
            "trims Swarm's delayed replacements as after its own surge",
        )
    still = [n for n in nodes if n in ctx.health.suspected]
    if still or ctx.health.panic is not None:
        why = (
            f"{', '.join(by_id[n].hostname for n in still)} still suspected"
            if still
            else "a health panic: nothing is decided until it ends"
        )
        return None, Decision(RULE, subject, Outcome.WAIT, f"speculative surge stands: {why}")
    base = record.base
    names = ", ".join(by_id[n].hostname for n in nodes if n in by_id)
    # What the false alarm cost: the surged replicas' time, an upper bound (they start
    # a moment after the write).
    extra = extra_replica_seconds(record, ctx.now)
    cost = f" (false alarm cost {extra:.0f} replica-seconds)"
    if drops_only_surged(
        ctx.snapshot.tasks_of(service.id), base=base, surged=record.written - base
    ):
        return restore_replicas(service, record), Decision(
            RULE,
            subject,
            Outcome.TRIM,
            f"false alarm: {names} no longer suspected and still ready: back to {base}; "
            "Swarm drops exactly the surged tasks (each alone on its node, highest slots)" + cost,
            code=Code.FALSE_ALARM,
            extra_replica_seconds=extra,
        )
    evicts = scale_down_stops(ctx.snapshot, service, base)[0]
    risk = (
        f"; Swarm may drop a running original on {_names(ctx, evicts)}, the budgets apply"
        if evicts
        else ""
    )
    return restore_replicas(service, record, evicts_from=evicts, ends_surge=True), Decision(
        RULE,
        subject,
        Outcome.TRIM,
        f"false alarm: {names} no longer suspected and still ready: back to {base}{risk}" + cost,
        code=Code.FALSE_ALARM,
        extra_replica_seconds=extra,
    )


def drops_only_surged(tasks: Sequence[Task], *, base: int, surged: int) -> bool:
    """Whether going back to `base` drops exactly the surged tasks: those in the slots
    above the originals' (swarmkit fills the lowest free slots, so a service at rest in
    slots 1..base surges into base+1...)."""
    if len(tasks) > STABLE_SORT_SLOTS or len(tasks) != base + surged:
        return False
    if sorted(t.slot for t in tasks) != list(range(1, base + surged + 1)):
        return False  # slots with gaps or two tasks in one: not provable
    dropped = scale_down_order(tasks)[base:]
    return all(t.slot > base for t in dropped)


def trim_would_spare_originals(tasks: Sequence[Task], *, base: int, surged: int) -> bool:
    """Whether, after a surge of `surged` tasks onto free nodes (each alone, in the slots
    above the originals'), a false alarm's trim back to `base` would drop exactly those:
    the trim's own test, made before the surge, so that a false alarm never stops an
    original."""
    if not tasks:
        return False
    placed = [
        replace(
            tasks[0],
            id=f"surged-{i}",
            slot=base + i,
            node_id=f"free-node-{i}",
            desired_state=TaskState.RUNNING,
            state=TaskState.RUNNING,
        )
        for i in range(1, surged + 1)
    ]
    return drops_only_surged([*tasks, *placed], base=base, surged=surged)


def failover_mode_of(setting: FailoverMode, service: Service) -> FailoverMode:
    """The mode in force: `auto` is speculative unless the service allows one task per
    node (max-replicas-per-node 1), which says a second copy beside one is not wanted."""
    if setting is not FailoverMode.AUTO:
        return setting
    if service.max_replicas_per_node == 1:
        return FailoverMode.CONFIRMED
    return FailoverMode.SPECULATIVE


def _names(ctx: PlanContext, node_ids: tuple[str, ...]) -> str:
    by_id = ctx.snapshot.node_by_id
    return ", ".join(by_id[n].hostname if n in by_id else n for n in node_ids)


def _free_nodes(ctx: PlanContext, service: Service, *, avoid: frozenset[str]) -> int:
    """Nodes that would take a surged task first: ready and active, allowed by the
    constraints, holding no task of the service (Swarm places on the fewest), not
    suspected, with room for one task as Swarm counts it (reservations, max per node)."""
    try:
        allowed = node_filter(parse_constraint(c) for c in service.constraints)
    except ConstraintError:
        return 0
    occupied = {t.node_id for t in ctx.snapshot.tasks_of(service.id)}
    room = observe_room(ctx.snapshot)
    return sum(
        1
        for n in ctx.snapshot.nodes
        if n.accepts_tasks
        and n.id not in occupied
        and n.id not in avoid
        and allowed(n)
        and room.fit_count(service, (n.id,)) >= 1
    )
