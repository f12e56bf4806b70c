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
- Every node comes back to no suspicion while Swarm has not given it up, and positive
  evidence says it lives (its probe or another node's agent reaches it, or the gossip
  lists it again while no connect to it fails) and has held for FALSE_ALARM_HOLD_SECONDS
  since it was last suspected: a false alarm, back to the operator's count. A missing
  word (an agent that did not answer one poll) is no evidence, and neither is a first
  cycle: no trim until this controller has watched the liveness signals for
  `controller.suspect-after` and a poll (after a start or a lease takeover). Swarm still
  calling the node ready 12 heartbeats after the surge (swarm_grace) is evidence too,
  whatever the signals say. Swarm's scale-down picks among the nodes with the most tasks
  of the service and cannot be told which task to drop: where a node holding an original
  ties with a node holding a surged task, the trim may stop the original (the service
  keeps its count), so the trim names those nodes and the disruption budgets apply to
  it. Trimmed while the surged tasks are still starting, they go first.

A node that flaps costs a bounded number of surges: a surge for a node that raised a
false alarm within FLAP_WINDOW_SECONDS is charged to the disruption budget like a
move's first half (it names the node), and after FLAP_FALSE_ALARMS of them the node is
treated as confirmed-only for FLAP_CONFIRMED_SECONDS: its services wait for Swarm.

A loss Swarm confirms on another node while the `speculate` record stands is surged
for by this rule (failover leaves the record alone), in the same record; the hand-over
to failover keeps the record's start and folds in any such loss not answered yet.

Never harm: no surge without a free node (ready, active, allowed, holding none of the
service's tasks, not suspected) for every replica, but on strong evidence (every signal
agrees the node is gone: rules/failover/stacked_surge.py), when it is charged for the
nodes where its trim may stop an original; none while a confirmed failover still waits
for its replacements (it comes first for the room), none in a health panic; with no room
the service waits for confirmation, as `confirmed` services always do.

After a Raft election the new leader calls every node `unknown` and places nothing on a
node until it reports, each agent after a random session back-off (up to 8 s, measured
up to 12 s after the first write the new leader took). A free node in that state whose
every liveness signal says it lives counts as free, so the surge is written as soon as
writes are taken and Swarm places it on the first node that reports: beside a replica
if that node holds one. Such a surge names those nodes and is charged to the disruption
budget like a move's first half, and the trim may then stop an original there.
"""

from __future__ import annotations

import re
from dataclasses import replace

from controller.core.actions import Action
from controller.core.clock import utc_time
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Code, Decision, Outcome
from controller.core.health.suspicion import SWARM_UNDECIDED
from controller.core.kernel.drop_order import STABLE_SORT_SLOTS
from controller.core.kernel.ledger import scale_down_stops
from controller.core.model import Service, ServiceMode, Task
from controller.core.replicas import (
    Operation,
    ReplicaRecord,
    change_replicas,
    operator_changed,
    restore_replicas,
)
from controller.core.rules.failover.false_alarm import (
    drops_only_surged,
    extra_replica_seconds,
    lives_since,
    not_yet_false_alarm,
    note_false_alarm,
    trim_would_spare_originals,
)
from controller.core.rules.failover.name import SPECULATIVE as RULE
from controller.core.rules.failover.speculate_room import (
    beside_nodes,
    free_nodes,
    names,
    unheard_free_nodes,
)
from controller.core.rules.failover.speculation_handover import handover, lost_elsewhere
from controller.core.rules.failover.speculation_notes import (
    DOUBT_MEMORY_SECONDS,
    FALSE_ALARM_HOLD_SECONDS,
    FLAP_CONFIRMED_SECONDS,
    FLAP_FALSE_ALARMS,
    FLAP_WINDOW_SECONDS,
    LIVENESS_POLL_SECONDS,
    Notes,
    notes_of,
)
from controller.core.rules.failover.stacked_surge import (
    Stacking,
    plan_stacking,
)
from controller.core.rules.failover.surge_charges import surge_charges
from controller.policy import FailoverMode

__all__ = [
    "DOUBT_MEMORY_SECONDS",
    "FALSE_ALARM_HOLD_SECONDS",
    "FLAP_CONFIRMED_SECONDS",
    "FLAP_FALSE_ALARMS",
    "FLAP_WINDOW_SECONDS",
    "LIVENESS_POLL_SECONDS",
    "RULE",
    "drops_only_surged",
    "extra_replica_seconds",
    "failover_mode_of",
    "lives_since",
    "plan_speculative",
    "speculated_nodes",
]

_NODES = re.compile(r"^nodes=([^;]*);")

Planned = tuple[Action | None, Decision | None]


def speculated_nodes(record: ReplicaRecord) -> tuple[str, ...]:
    """The suspected node IDs a `speculate` record was written for (from its detail)."""
    match = _NODES.match(record.detail)
    return tuple(n for n in match.group(1).split(",") if n) if match else ()


def plan_speculative(ctx: PlanContext) -> RuleOutput:
    actions: list[Action] = []
    decisions: list[Decision] = []
    notes = notes_of(ctx)
    for service in ctx.managed_services():
        if service.mode is not ServiceMode.REPLICATED:
            continue
        action, note = _plan_service(ctx, service, notes)
        if note is not None:
            if action is not None:
                note = replace(note, action=action)
            decisions.append(note)
        if action is not None:
            actions.append(action)
    return RuleOutput(tuple(actions), tuple(decisions), remember=notes.remember())


def _plan_service(ctx: PlanContext, service: Service, notes: Notes) -> Planned:
    if service.replica_record_error is not None:
        return None, None  # the failover rule reports it
    record = service.replica_record
    if record is not None:
        if record.operation != Operation.SPECULATE or operator_changed(
            service, record, ctx.memory.overridden
        ):
            return None, None  # another rule's, or the operator's count: failover forgets
        return _follow(ctx, service, record, notes)
    suspected = ctx.health.suspected
    flapping = {n for n in suspected if notes.flapping_until(n, ctx.now) is not None}
    tasks = ctx.snapshot.tasks_of(service.id)
    on = [t for t in tasks if t.node_id in suspected and t.node_id not in flapping]
    if not on:
        return None, _flapping_wait(ctx, service, notes, flapping)
    where = ", ".join(suspected[n].hostname for n in sorted({t.node_id for t in on}))
    waits = _mode_wait(ctx, service, on, where) or _confirmed_first(ctx, service, on, where)
    if waits is not None:
        return None, waits
    return _surge(ctx, service, on, notes)


def _flapping_wait(
    ctx: PlanContext, service: Service, notes: Notes, flapping: set[str]
) -> Decision | None:
    """Tasks only on suspected nodes treated as confirmed-only for flapping: they wait."""
    held = sorted({t.node_id for t in ctx.snapshot.tasks_of(service.id)} & flapping)
    if not held:
        return None
    until = max(notes.confirmed_until[n] for n in held)
    return Decision(
        RULE,
        f"service {service.name}",
        Outcome.WAIT,
        f"task(s) on suspected {', '.join(ctx.health.suspected[n].hostname for n in held)}, "
        f"which raised {FLAP_FALSE_ALARMS} false alarms within {FLAP_WINDOW_SECONDS:.0f} s: "
        f"treated as failover-mode confirmed until {utc_time(until)}, it waits for Swarm "
        "to mark the node down",
    )


def _mode_wait(ctx: PlanContext, service: Service, on: list[Task], where: str) -> Decision | None:
    mode = ctx.settings(service.id).failover_mode
    if failover_mode_of(mode, service) is FailoverMode.SPECULATIVE:
        return None
    why = "failover-mode confirmed"
    if mode is FailoverMode.AUTO:
        why = "failover-mode auto with max-replicas-per-node 1: confirmed"
    return Decision(
        RULE,
        f"service {service.name}",
        Outcome.WAIT,
        f"{len(on)} task(s) on suspected {where}: {why}, it waits for Swarm to mark the node down",
    )


def _confirmed_first(
    ctx: PlanContext, service: Service, on: list[Task], where: str
) -> Decision | None:
    waiting = sorted(
        s.name
        for s in ctx.snapshot.services
        if s.id in ctx.memory.lost and s.id != service.id and ctx.is_managed(s.id)
    )
    if not waiting:
        return None
    return Decision(
        RULE,
        f"service {service.name}",
        Outcome.WAIT,
        f"{len(on)} task(s) on suspected {where}, but a confirmed failover comes first "
        f"for the room ({', '.join(waiting[:5])}): it waits for confirmation",
    )


def _surge(ctx: PlanContext, service: Service, on: list[Task], notes: Notes) -> Planned:
    """The surge for the tasks `on` suspected nodes, if there is room for it and its
    false alarm's trim is known, with what it is charged."""
    suspected = ctx.health.suspected
    nodes = tuple(sorted({t.node_id for t in on}))
    where = ", ".join(suspected[n].hostname for n in nodes)
    subject = f"service {service.name}"
    room = _room(ctx, service, on, nodes)
    if isinstance(room, str):
        return None, Decision(
            RULE, subject, Outcome.WAIT, f"{len(on)} task(s) on suspected {where}, but {room}"
        )
    unheard, stacking = room
    replicas = service.replicas or 0
    # A node that raised a false alarm lately may be flapping: its surge is charged to the
    # disruption budget like a move's first half (it names the node), so a flapping link
    # churns within the budgets.
    charged = tuple(n for n in nodes if notes.recent_false_alarms(n))
    # Free nodes a new Raft leader has not heard from yet: Swarm places the surge on the
    # first node that reports, beside a replica if that one holds one, so the surge is
    # charged like a move's first half, naming those nodes (the trim may stop one there).
    beside = beside_nodes(ctx, service, avoid=frozenset(suspected)) if unheard else ()
    action = change_replicas(
        service,
        replicas=replicas + len(on),
        operation=Operation.SPECULATE,
        now=ctx.now,
        detail=f"nodes={','.join(nodes)}; {len(on)} replica(s) on suspected {where}",
        evicts_from=tuple(sorted({*charged, *beside, *(stacking.risky if stacking else ())})),
    )
    charge = surge_charges(ctx, action, stacking, unheard=unheard, beside=beside, charged=charged)
    if charge.refused:
        return None, Decision(
            RULE, subject, Outcome.WAIT, f"{len(on)} task(s) on suspected {where}{charge.text}"
        )
    signals = "; ".join(f"{suspected[n].hostname}: {'+'.join(suspected[n].sources)}" for n in nodes)
    return action, Decision(
        RULE,
        subject,
        Outcome.SPECULATE,
        f"{len(on)} task(s) on suspected {where} ({signals}): {replicas} -> "
        f"{replicas + len(on)} so replacements start now; nothing on the node is stopped"
        + charge.text,
    )


def _room(
    ctx: PlanContext, service: Service, on: list[Task], nodes: tuple[str, ...]
) -> tuple[tuple[str, ...], Stacking | None] | str:
    """Where the surge goes: free nodes, and those a new Raft leader has not heard from
    (returned), or beside replicas on strong evidence (the stacking); or why not."""
    avoid = frozenset(ctx.health.suspected)
    free = free_nodes(ctx, service, avoid=avoid)
    unheard = unheard_free_nodes(ctx, service, avoid=avoid) if free < len(on) else ()
    if free + len(unheard) < len(on):
        # Every node holds a replica: a surge beside one, on strong evidence alone.
        beside = beside_nodes(ctx, service, avoid=avoid)
        stacked = plan_stacking(ctx, service, nodes, surged=len(on), free=free, beside=beside)
        if isinstance(stacked, str):
            return (
                f"only {free} free node(s) could take them without stacking or landing back "
                f"on a suspected node, and {stacked}: it waits for confirmation"
            )
        return (), stacked
    tasks = ctx.snapshot.tasks_of(service.id)
    if not trim_would_spare_originals(tasks, base=service.replicas or 0, surged=len(on)):
        return (
            "if it were a false alarm the trim back could stop a running original (two on "
            f"one node, slots with gaps, or more than {STABLE_SORT_SLOTS} slots): it waits "
            "for confirmation"
        )
    return unheard, None


def _follow(ctx: PlanContext, service: Service, record: ReplicaRecord, notes: Notes) -> Planned:
    nodes = speculated_nodes(record)
    by_id = ctx.snapshot.node_by_id
    down = [n for n in nodes if n not in by_id or by_id[n].state not in SWARM_UNDECIDED]
    if down:
        return handover(ctx, service, record, notes, down)
    lost = lost_elsewhere(ctx, service, record, notes)
    if lost is not None:
        return lost
    subject = f"service {service.name}"
    still = [n for n in nodes if n in ctx.health.suspected]
    if ctx.health.panic is not None:
        notes.doubted_at.update({n: ctx.now for n in nodes})
    if still or ctx.health.panic is not None:
        why = (
            f"{names(ctx, tuple(still))} still suspected"
            if still
            else "a health panic: nothing is decided until it ends"
        )
        return None, Decision(RULE, subject, Outcome.WAIT, f"speculative surge stands: {why}")
    waits = not_yet_false_alarm(ctx, record, nodes, notes)
    if waits is not None:
        return None, Decision(RULE, subject, Outcome.WAIT, waits)
    return _trim(ctx, service, record, nodes, notes)


def _trim(
    ctx: PlanContext,
    service: Service,
    record: ReplicaRecord,
    nodes: tuple[str, ...],
    notes: Notes,
) -> Planned:
    """A false alarm: back to the operator's count, naming where Swarm may drop an
    original for the budgets."""
    subject = f"service {service.name}"
    base = record.base
    where = names(ctx, tuple(n for n in nodes if n in ctx.snapshot.node_by_id))
    # What the false alarm cost: the surged replicas' time, an upper bound (they start
    # a moment after the write).
    extra = extra_replica_seconds(record, ctx.now)
    cost = f" (false alarm cost {extra:.0f} replica-seconds)" + note_false_alarm(
        ctx, record, nodes, notes
    )
    tasks = ctx.snapshot.tasks_of(service.id)
    if drops_only_surged(tasks, base=base, surged=record.written - base):
        return restore_replicas(service, record), Decision(
            RULE,
            subject,
            Outcome.TRIM,
            f"false alarm: {where} no longer suspected and still ready: back to {base}; "
            "Swarm drops exactly the surged tasks (each alone on its node, highest slots)" + cost,
            code=Code.FALSE_ALARM,
            extra_replica_seconds=extra,
        )
    evicts = scale_down_stops(ctx.snapshot, service, base)[0]
    risk = (
        f"; Swarm may drop a running original on {names(ctx, evicts)}, the budgets apply"
        if evicts
        else ""
    )
    return restore_replicas(service, record, evicts_from=evicts, ends_surge=True), Decision(
        RULE,
        subject,
        Outcome.TRIM,
        f"false alarm: {where} no longer suspected and still ready: back to {base}{risk}" + cost,
        code=Code.FALSE_ALARM,
        extra_replica_seconds=extra,
    )


def failover_mode_of(setting: FailoverMode, service: Service) -> FailoverMode:
    """The mode in force: `auto` is speculative unless the service allows one task per
    node (max-replicas-per-node 1), which says a second copy beside one is not wanted."""
    if setting is not FailoverMode.AUTO:
        return setting
    if service.max_replicas_per_node == 1:
        return FailoverMode.CONFIRMED
    return FailoverMode.SPECULATIVE
