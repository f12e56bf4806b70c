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
service's tasks, not suspected) for every replica, none while a confirmed failover still
waits for its replacements (it comes first for the room), none in a health panic; with
no room the service waits for confirmation, as `confirmed` services always do.

After a Raft election the new leader calls every node `unknown` and places nothing on a
node until it reports, each agent after a random session back-off (up to 8 s, measured
up to 12 s after the first write the new leader took). A free node in that state whose
every liveness signal says it lives counts as free, so the surge is written as soon as
writes are taken and Swarm places it on the first node that reports: beside a replica
if that node holds one. Such a surge names those nodes and is charged to the disruption
budget like a move's first half, and the trim may then stop an original there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from controller.core.actions import Action
from controller.core.capacity import observe_room
from controller.core.clock import utc_time
from controller.core.constraints import ConstraintError, node_filter, parse_constraint
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Code, Decision, Outcome
from controller.core.health.suspicion import GOSSIP_SOURCE, SWARM_UNDECIDED
from controller.core.kernel.drop_order import STABLE_SORT_SLOTS, scale_down_order
from controller.core.kernel.ledger import scale_down_stops
from controller.core.kernel.swarm_grace import swarm_says_alive_seconds
from controller.core.memory import Memory, SpeculationMemory
from controller.core.model import (
    Availability,
    ClusterSnapshot,
    Node,
    NodeState,
    Service,
    ServiceMode,
    Task,
    TaskState,
)
from controller.core.replicas import (
    Operation,
    ReplicaRecord,
    change_replicas,
    operator_changed,
    restore_replicas,
)
from controller.core.rules.failover.failover_rule import active_count
from controller.policy import FailoverMode

RULE = "speculative"
_NODES = re.compile(r"^nodes=([^;]*);")

# How long positive evidence that a suspected node lives must hold before its surge is
# trimmed as a false alarm.
FALSE_ALARM_HOLD_SECONDS = 2.0
# The liveness gatherer's default poll (runtime/liveness): after a start or a takeover no
# trim until the signals have been watched for suspect-after and one poll.
LIVENESS_POLL_SECONDS = 0.5
# A node that raised this many false alarms within the window is treated as confirmed-only
# (its services wait for Swarm) for FLAP_CONFIRMED_SECONDS.
FLAP_FALSE_ALARMS = 3
FLAP_WINDOW_SECONDS = 120.0
FLAP_CONFIRMED_SECONDS = 600.0
# A node's last suspicion is remembered this long (it only delays a trim by the hold).
DOUBT_MEMORY_SECONDS = 60.0


@dataclass
class _Notes:
    """What this cycle changes in the rule's memory (and which losses it answered)."""

    memory: SpeculationMemory
    false_alarms: dict[str, tuple[float, ...]] = field(default_factory=dict)
    confirmed_until: dict[str, float] = field(default_factory=dict)
    doubted_at: dict[str, float] = field(default_factory=dict)
    settled: set[str] = field(default_factory=set)  # services whose losses a surge covers

    def remember(self) -> Callable[[Memory], Memory]:
        speculation = replace(
            self.memory,
            false_alarms=self.false_alarms,
            confirmed_until=self.confirmed_until,
            doubted_at=self.doubted_at,
        )
        settled = frozenset(self.settled)

        def update(memory: Memory) -> Memory:
            lost = {k: v for k, v in memory.lost.items() if k not in settled}
            return replace(memory.with_speculation(speculation), lost=lost)

        return update

    def recent_false_alarms(self, node_id: str) -> int:
        return len(self.false_alarms.get(node_id, ()))

    def flapping_until(self, node_id: str, now: float) -> float | None:
        until = self.confirmed_until.get(node_id)
        return until if until is not None and until > now else None


def _notes(ctx: PlanContext) -> _Notes:
    """The rule's memory as this cycle finds it: the watch clock, the nodes suspected now,
    and what has aged out dropped."""
    now, before = ctx.now, ctx.memory.speculation
    watching = before.watching_since if before.watching_since is not None else now
    doubted = {n: t for n, t in before.doubted_at.items() if now - t < DOUBT_MEMORY_SECONDS}
    doubted.update({n: now for n in ctx.health.suspected})
    return _Notes(
        memory=replace(before, watching_since=watching if ctx.snapshot.liveness else None),
        false_alarms={
            n: kept
            for n, times in before.false_alarms.items()
            if (kept := tuple(t for t in times if now - t < FLAP_WINDOW_SECONDS))
        },
        confirmed_until={n: t for n, t in before.confirmed_until.items() if t > now},
        doubted_at=doubted,
    )


def speculated_nodes(record: ReplicaRecord) -> tuple[str, ...]:
    """The suspected node IDs a `speculate` record was written for (from its detail)."""
    match = _NODES.match(record.detail)
    return tuple(n for n in match.group(1).split(",") if n) if match else ()


def extra_replica_seconds(record: ReplicaRecord, now: float) -> float:
    return max(0.0, (record.written - record.base) * (now - record.since))


def plan_speculative(ctx: PlanContext) -> RuleOutput:
    actions: list[Action] = []
    decisions: list[Decision] = []
    notes = _notes(ctx)
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


def _plan_service(
    ctx: PlanContext, service: Service, notes: _Notes
) -> tuple[Action | None, Decision | None]:
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
    subject = f"service {service.name}"
    flapping = {n for n in suspected if notes.flapping_until(n, ctx.now) is not None}
    on = [
        t
        for t in ctx.snapshot.tasks_of(service.id)
        if t.node_id in suspected and t.node_id not in flapping
    ]
    if not on:
        held = sorted({t.node_id for t in ctx.snapshot.tasks_of(service.id)} & flapping)
        if not held:
            return None, None
        until = max(notes.confirmed_until[n] for n in held)
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"task(s) on suspected {', '.join(suspected[n].hostname for n in held)}, which "
            f"raised {FLAP_FALSE_ALARMS} false alarms within {FLAP_WINDOW_SECONDS:.0f} s: "
            f"treated as failover-mode confirmed until {utc_time(until)}, it waits for Swarm "
            "to mark the node down",
        )
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
    unheard: tuple[str, ...] = ()
    if free < len(on):
        unheard = _unheard_free_nodes(ctx, service, avoid=frozenset(suspected))
    if free + len(unheard) < len(on):
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
    # A node that raised a false alarm lately may be flapping: its surge is charged to the
    # disruption budget like a move's first half (it names the node), so a flapping link
    # churns within the budgets.
    charged = tuple(n for n in nodes if notes.recent_false_alarms(n))
    # Free nodes a new Raft leader has not heard from yet: Swarm places the surge on the
    # first node that reports, beside a replica if that one holds one, so the surge is
    # charged like a move's first half, naming those nodes (the trim may stop one there).
    beside = _beside(ctx, service, avoid=frozenset(suspected)) if unheard else ()
    action = change_replicas(
        service,
        replicas=replicas + len(on),
        operation=Operation.SPECULATE,
        now=ctx.now,
        detail=f"nodes={','.join(nodes)}; {len(on)} replica(s) on suspected {where}",
        evicts_from=tuple(sorted({*charged, *beside})),
    )
    charge = ""
    if beside:
        refusal = ctx.budget().refusal(action)
        if refusal is not None:
            return None, Decision(
                RULE,
                subject,
                Outcome.WAIT,
                f"{len(on)} task(s) on suspected {where}; free {_names(ctx, unheard)} not "
                f"reported to a new Raft leader yet, so the surge may land beside a replica "
                f"and is charged to the disruption budget, and {refusal}: it waits",
            )
        charge = (
            f"; free {_names(ctx, unheard)} has not reported to a new Raft leader yet: Swarm "
            f"places the surge on the first node that reports, beside a replica if that is "
            f"{_names(ctx, beside)}, so it is charged to the disruption budget"
        )
    if charged:
        flappy = ", ".join(suspected[n].hostname for n in charged)
        refusal = ctx.budget().refusal(action)
        if refusal is not None:
            return None, Decision(
                RULE,
                subject,
                Outcome.WAIT,
                f"{len(on)} task(s) on suspected {where}, which raised a false alarm within "
                f"{FLAP_WINDOW_SECONDS:.0f} s, so the surge is charged to the disruption "
                f"budget, and {refusal}: it waits",
            )
        charge += f"; {flappy} raised a false alarm lately: charged to the disruption budget"
    return action, Decision(
        RULE,
        subject,
        Outcome.SPECULATE,
        f"{len(on)} task(s) on suspected {where} ({signals}): {replicas} -> "
        f"{replicas + len(on)} so replacements start now; nothing on the node is stopped" + charge,
    )


def _follow(
    ctx: PlanContext, service: Service, record: ReplicaRecord, notes: _Notes
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
        # Failover leaves a `speculate` record alone, so what other nodes lost meanwhile
        # waited for this write: it is surged for too. The record keeps its start, so a
        # loss after it still counts; the losses it answers are settled here.
        covered = record.written - record.base
        more = 0
        lost = ctx.memory.lost.get(service.id)
        if lost is not None:
            active = active_count(ctx, service)
            more = max(0, min(lost[0] - covered, record.base - active))
            notes.settled.add(service.id)
        also = f"; {more} more replica(s) lost with another node" if more else ""
        handover = change_replicas(
            service,
            replicas=record.written + more,
            operation=Operation.SURGE,
            now=record.since,
            base=record.base,
            detail=f"speculative surge confirmed: {names} down{also}",
        )
        return handover, Decision(
            RULE,
            subject,
            Outcome.CONFIRM,
            f"{names} confirmed down: the speculative surge covers its replicas{also}; "
            "failover trims Swarm's delayed replacements as after its own surge",
        )
    lost = ctx.memory.lost.get(service.id)
    if lost is not None and ctx.health.panic is None:
        # Swarm confirmed a loss on another node while the record stands: failover leaves
        # the record alone, so the surge for it is made here, in the same record (its
        # start kept), and the loss is settled.
        active = active_count(ctx, service)
        more = max(0, min(lost[0], record.written - active))
        notes.settled.add(service.id)
        if more:
            raised = change_replicas(
                service,
                replicas=record.written + more,
                operation=Operation.SPECULATE,
                now=record.since,
                base=record.base,
                detail=f"{record.detail}; {more} more lost with another node",
            )
            return raised, Decision(
                RULE,
                subject,
                Outcome.SURGE,
                f"{more} replica(s) lost with a node Swarm confirmed down while the "
                f"speculative surge stands: {record.written} -> {record.written + more}, "
                "started now as failover would",
            )
    still = [n for n in nodes if n in ctx.health.suspected]
    if ctx.health.panic is not None:
        notes.doubted_at.update({n: ctx.now for n in nodes})
    if still or ctx.health.panic is not None:
        why = (
            f"{', '.join(by_id[n].hostname for n in still)} still suspected"
            if still
            else "a health panic: nothing is decided until it ends"
        )
        return None, Decision(RULE, subject, Outcome.WAIT, f"speculative surge stands: {why}")
    waits = _not_yet_false_alarm(ctx, record, nodes, notes)
    if waits is not None:
        return None, Decision(RULE, subject, Outcome.WAIT, waits)
    base = record.base
    names = ", ".join(by_id[n].hostname for n in nodes if n in by_id)
    cost = _false_alarm(ctx, record, nodes, notes)
    # What the false alarm cost: the surged replicas' time, an upper bound (they start
    # a moment after the write).
    extra = extra_replica_seconds(record, ctx.now)
    cost = f" (false alarm cost {extra:.0f} replica-seconds){cost}"
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


def _not_yet_false_alarm(
    ctx: PlanContext, record: ReplicaRecord, nodes: Sequence[str], notes: _Notes
) -> str | None:
    """Why no longer suspected is not a false alarm yet, if it is not: the controller has
    not watched the signals long enough, or no positive evidence that each node lives
    has held for the hold time since it was last suspected."""
    by_id = ctx.snapshot.node_by_id
    names = ", ".join(by_id[n].hostname for n in nodes if n in by_id)
    ready = all(n in by_id and by_id[n].state is NodeState.READY for n in nodes)
    if ready and ctx.now - record.since >= swarm_says_alive_seconds(ctx.snapshot):
        return None  # Swarm's heartbeat says they live, long past its grace
    watching = notes.memory.watching_since
    warm_up = ctx.policy.controller.suspect_after_seconds + LIVENESS_POLL_SECONDS
    if watching is None or ctx.now - watching < warm_up:
        return (
            f"speculative surge stands: {names} no longer suspected, but this controller "
            f"has not yet watched the liveness signals for controller.suspect-after and a "
            f"poll ({warm_up:.1f} s) since it started or took over"
        )
    for node_id in nodes:
        hostname = by_id[node_id].hostname if node_id in by_id else node_id
        lives = lives_since(ctx, node_id, after=record.since)
        if lives is None:
            return (
                f"speculative surge stands: {hostname} no longer suspected, but nothing "
                "says it lives yet (its probe, another node's agent, or the gossip listing "
                "it again)"
            )
        since = max(lives, notes.doubted_at.get(node_id, -math.inf))
        if ctx.now - since < FALSE_ALARM_HOLD_SECONDS:
            return (
                f"speculative surge stands: {hostname} answers since {utc_time(since)}; a "
                f"false alarm once that has held for {FALSE_ALARM_HOLD_SECONDS:.0f} s"
            )
    return None


def lives_since(ctx: PlanContext, node_id: str, *, after: float) -> float | None:
    """Since when positive evidence says the node lives: its probe or another node's
    agent reaches it, or the gossip lists it again (it turned after `after`: the gossip
    is slow to drop a dead peer, so its old word proves nothing) while no connect to the
    node fails: a killed dockerd's node can come back into the peers from another node's
    stale view while its gossip port refuses. None: nothing says so."""
    signals = [s for s in ctx.snapshot.liveness if s.node_id == node_id]
    unreached = any(not s.alive and s.source != GOSSIP_SOURCE for s in signals)
    times = [
        s.since
        for s in signals
        if s.alive and (s.source != GOSSIP_SOURCE or (s.since > after and not unreached))
    ]
    return min(times) if times else None


def _false_alarm(
    ctx: PlanContext, record: ReplicaRecord, nodes: Sequence[str], notes: _Notes
) -> str:
    """Note the false alarm of each node, once per alarm; what it starts, for the decision.

    A trim the guards hold (a rollout, the budget) is planned again every cycle, and
    several services surged for one suspicion are trimmed for it: a false alarm noted
    since the surge began is this one (a new surge needs the record gone first)."""
    by_id = ctx.snapshot.node_by_id
    flapped = []
    for node_id in nodes:
        noted = notes.false_alarms.get(node_id, ())
        if any(t >= record.since for t in noted):
            continue
        times = (*noted, ctx.now)
        notes.false_alarms[node_id] = times
        if len(times) >= FLAP_FALSE_ALARMS:
            notes.confirmed_until[node_id] = ctx.now + FLAP_CONFIRMED_SECONDS
            flapped.append(by_id[node_id].hostname if node_id in by_id else node_id)
    if not flapped:
        return ""
    until = utc_time(ctx.now + FLAP_CONFIRMED_SECONDS)
    return (
        f"; {', '.join(flapped)} raised {FLAP_FALSE_ALARMS} false alarms within "
        f"{FLAP_WINDOW_SECONDS:.0f} s: treated as failover-mode confirmed until {until}"
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
    nodes, occupied = _placeable(ctx, service, avoid)
    return sum(1 for n in nodes if n.accepts_tasks and n.id not in occupied)


def _unheard_free_nodes(
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


def _beside(ctx: PlanContext, service: Service, *, avoid: frozenset[str]) -> tuple[str, ...]:
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
