"""Node health, before any rule runs: failed, degraded, quarantined or fine.

Inputs are pure values: live reports (webhook, plugins), the durable marks on the nodes,
Swarm's task history, the node exits remembered, the policy and `now`.

- Health: per source, the live report wins over the recorded one; a report lapses at
  its ttl. The node's health is the worst of its sources. `failed` makes every rule see
  the node as down (so failover surges at once), `degraded` as paused.
- Quarantine (`nodes.quarantine`): a node with at least `failures` incidents within
  `period` is kept from the managed services for `duration`, never more than
  `max-fraction` of the nodes at once, and only within the room the blast-radius cap
  (core/kernel/blast_radius.py) leaves beside the nodes reported, suspected, quarantined
  and each service's move-offs. The rules see it paused; Swarm does not: the node
  stays active, so services the controller does not manage keep it as Swarm alone would.
  An incident is an ungraceful exit (ready, then down, while not drained by an operator) or
  a task failure there. Failures in the first RETURN_GRACE seconds after a node turns ready
  are its return's (Swarm reports the tasks a crash killed only then), and a service that
  also fails on other nodes is failing by itself, not because of the node: neither counts.
- Panic (panic.py): when the outside inputs together would take more than
  `controller.health-panic-threshold` of the ready and active nodes, no new report is
  taken, no suspicion acted on and no new quarantine starts; what is in force stays and
  releases go on.
- The node-wide inputs acted on make the cycle's `BlastRadius`: a service's own inputs
  (move-offs, plugin vetoes) get only the room it leaves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from controller.core.clock import utc_time
from controller.core.decisions import Decision, Outcome
from controller.core.exit_history import HealthMemory
from controller.core.health.node_marks import (
    PAUSE_HEALTH,
    QUARANTINE_UNTIL,
    HealthMark,
    paused_for,
    read_float,
    read_health_marks,
    unhealthy_marks,
)
from controller.core.health.panic import Panic, detect_panic, held_in_panic, ignored
from controller.core.health.suspicion import (
    Suspicion,
    as_panic_marks,
    dropped_in_panic,
    suspect_nodes,
)
from controller.core.kernel.blast_radius import (
    SETTING,
    BlastRadius,
    named,
    not_down,
    ready_and_active,
)
from controller.core.memory import Memory
from controller.core.model import (
    Availability,
    ClusterSnapshot,
    Node,
    NodeRole,
    NodeState,
    ServiceMode,
)
from controller.core.outside_inputs import HealthState, WorkloadEvent
from controller.policy import ControllerSettings, Policy, ResolvedService

RULE = "health"
# Task failures this soon after a node turns ready belong to its return, not to it.
RETURN_GRACE_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    node_id: str
    hostname: str
    health: HealthState = HealthState.OK
    # The health marks the node should carry (non-ok, unexpired), by source.
    marks: Mapping[str, HealthMark] = field(default_factory=dict)
    quarantine_until: float | None = None  # set while quarantined (or from this cycle)
    quarantine_reason: str = ""  # set when the quarantine starts this cycle
    pause: frozenset[str] = frozenset()  # why the controller should hold it paused

    @property
    def quarantined(self) -> bool:
        return self.quarantine_until is not None


@dataclass(frozen=True)
class Assessment:
    verdicts: Mapping[str, NodeVerdict] = field(default_factory=dict)
    decisions: tuple[Decision, ...] = ()
    memory: HealthMemory = field(default_factory=HealthMemory)
    panic: Panic | None = None  # set while too many nodes are reported (panic.py)
    # The one cap, with the nodes the node-wide inputs acted on take: plugin vetoes and
    # move-offs get only the room it leaves (core/kernel/blast_radius.py).
    radius: BlastRadius = field(
        default_factory=lambda: BlastRadius(ControllerSettings().health_panic_threshold)
    )
    # Ready nodes faster signals agree are gone (suspicion.py); empty in a panic.
    suspected: Mapping[str, Suspicion] = field(default_factory=dict)

    def verdict(self, node: Node) -> NodeVerdict:
        return self.verdicts.get(node.id) or NodeVerdict(node.id, node.hostname)

    @property
    def failed(self) -> frozenset[str]:
        return frozenset(n for n, v in self.verdicts.items() if v.health is HealthState.FAILED)

    def effective(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """The cluster as the other rules should see it: a failed node is down, a node
        the controller holds paused is paused and one it releases is active (from this
        cycle on, before Swarm says so)."""
        if not self.verdicts:
            return snapshot
        nodes = []
        for seen in snapshot.nodes:
            node, verdict = seen, self.verdicts.get(seen.id)
            if verdict is not None and verdict.health is HealthState.FAILED:
                node = replace(node, state=NodeState.DOWN)
            if verdict is not None and verdict.pause and node.availability is Availability.ACTIVE:
                node = replace(node, availability=Availability.PAUSE)
            released = verdict is None or not verdict.pause
            if released and paused_for(node.labels) and node.availability is Availability.PAUSE:
                node = replace(node, availability=Availability.ACTIVE)
            if verdict is not None and verdict.quarantined and node.accepts_tasks:
                node = replace(node, availability=Availability.PAUSE)
            nodes.append(node)
        return replace(snapshot, nodes=tuple(nodes))


def ready_since(memory: Memory, node: Node, now: float) -> float:
    """When Swarm last reported the node turning ready, as far as the controller knows
    (health reports aside); at the first sight, its last update (never too early). A
    return the controller did not see (it was restarting, or its manager was electing a
    leader, while the node crashed and came back) still moved the node's last update:
    the later of the two counts, so the tasks that crash killed are not the node's (a
    label write moves it too, which only holds those failures back for the grace)."""
    known = memory.health.ready_since or {}
    updated = min(node.updated_at, now) if node.updated_at else None
    since = known.get(node.id)
    if since is not None:
        return since if updated is None or not node.is_ready else max(since, updated)
    return updated if updated is not None else now


def track_exits(
    snapshot: ClusterSnapshot, memory: HealthMemory, now: float, keep: float
) -> HealthMemory:
    """Record ungraceful exits: a node seen ready last cycle and not now, not drained."""
    exits = {
        n: kept
        for n, times in memory.exits.items()
        if (kept := tuple(t for t in times if now - t < keep))
    }
    before = memory.ready_since
    # Unknown after a leadership change is no exit: it keeps its ready-since, and if the
    # new leader then marks it down, that counts as no exit either. Swarm does that to a
    # healthy node that reports late (on a 4-node sandbox a sound worker was marked down
    # 7.7 s after the new leader first answered, and ready 2.3 s later), and the
    # quarantine must not count it: it would keep a sound node from the managed services
    # for hours. A node that really died in the election is replaced by Swarm all the same.
    pending = snapshot.unknown_among(before or ())
    if before is not None:
        for node in snapshot.nodes:
            if (
                node.id in before
                and not node.is_ready
                and node.id not in pending
                and node.id not in memory.unknown
                and node.id not in memory.drained
            ):
                exits[node.id] = (*exits.get(node.id, ()), now)
    ready_since = {n: before[n] for n in pending} if before is not None else {}
    for node in snapshot.nodes:
        if not node.is_ready:
            continue
        if before is not None and node.id in before:
            ready_since[node.id] = before[node.id]
        elif before is None and node.updated_at:
            ready_since[node.id] = min(node.updated_at, now)
        else:
            ready_since[node.id] = now
    drained = frozenset(
        n.id for n in snapshot.nodes if n.is_ready and n.availability is Availability.DRAIN
    )
    return HealthMemory(
        ready_since=ready_since, drained=drained, exits=exits, unknown=frozenset(pending)
    )


def counted_failures(
    snapshot: ClusterSnapshot, memory: Memory, now: float, *, since: Mapping[str, float]
) -> dict[str, set[str]]:
    """Node id -> task ids whose failure counts against that node (see module doc).
    `since`: per node, the earliest time that counts."""
    nodes = snapshot.node_by_id
    by_service: dict[str, set[str]] = {}
    kept: list[WorkloadEvent] = []
    for event in snapshot.workload:
        node = nodes.get(event.node_id)
        if node is None or event.at <= since.get(node.id, math.inf) or event.at > now:
            continue
        if event.at < ready_since(memory, node, now) + RETURN_GRACE_SECONDS:
            continue
        by_service.setdefault(event.service_id, set()).add(event.node_id)
        kept.append(event)
    out: dict[str, set[str]] = {}
    for event in kept:
        if len(by_service[event.service_id]) == 1:
            out.setdefault(event.node_id, set()).add(event.task_id)
    return out


def _marks_in_force(node: Node, now: float) -> dict[str, HealthMark]:
    """The words in force on the node: marked in the write that acted on them."""
    return {r.source: r for r in read_health_marks(node.labels) if r.until > now}


def _health_marks(
    node: Node, reports: Mapping[str, HealthMark | None], now: float
) -> dict[str, HealthMark]:
    marks = _marks_in_force(node, now)
    for source, live in reports.items():
        if live is None or live.until <= now:
            marks.pop(source, None)
        else:
            marks[source] = live
    return marks


def _live_reports(snapshot: ClusterSnapshot) -> dict[str, dict[str, HealthMark | None]]:
    """Node id -> source -> its live word (None: ok)."""
    out: dict[str, dict[str, HealthMark | None]] = {}
    for report in sorted(snapshot.health, key=lambda r: (r.node_id, r.source, r.expires_at)):
        mark = (
            None
            if report.state is HealthState.OK
            else HealthMark(report.source, report.state, report.expires_at, report.reason)
        )
        out.setdefault(report.node_id, {})[report.source] = mark
    return out


def moves_in_force(
    snapshot: ClusterSnapshot, resolved: Mapping[str, ResolvedService], now: float
) -> dict[str, frozenset[str]]:
    """Service name -> the nodes a managed service is kept off for failing there, in
    force: its mark younger than its failover-threshold period (rules/nodes/workload.py)."""
    periods: dict[str, float] = {}
    for service in snapshot.services:
        found = resolved.get(service.id)
        if found is None or not found.settings.managed or service.mode is ServiceMode.OTHER:
            continue
        threshold = found.settings.failover_threshold
        periods[service.name] = threshold.period_seconds if threshold else 0.0
    out: dict[str, set[str]] = {}
    for node in snapshot.nodes:
        for name, since in unhealthy_marks(node.labels).items():
            if name in periods and now - since < periods[name]:
                out.setdefault(name, set()).add(node.id)
    return {name: frozenset(nodes) for name, nodes in out.items()}


def assess_nodes(
    *,
    snapshot: ClusterSnapshot,
    policy: Policy,
    memory: Memory,
    now: float,
    resolved: Mapping[str, ResolvedService] | None = None,
) -> Assessment:
    """`resolved`: each service's settings, for the move-offs in force that count
    against the blast-radius cap (None: none counted)."""
    q = policy.quarantine
    share = policy.controller.health_panic_threshold
    ours = frozenset(n.id for n in snapshot.nodes if paused_for(n.labels))
    moved_off = moves_in_force(snapshot, resolved or {}, now)
    quarantined = frozenset(
        n.id for n in snapshot.nodes if (read_float(n.labels, QUARANTINE_UNTIL) or 0.0) > now
    )
    health_memory = track_exits(snapshot, memory.health, now, keep=q.period_seconds)
    live = _live_reports(snapshot)
    wanted = {n.id: _health_marks(n, live.get(n.id, {}), now) for n in snapshot.nodes}
    suspected, suspicion_notes = suspect_nodes(
        snapshot, suspect_after=policy.controller.suspect_after_seconds, now=now
    )
    # A suspicion counts against the panic share like a report of failure.
    counted = {**as_panic_marks(suspected), **{k: v for k, v in wanted.items() if v}}
    panic = detect_panic(
        snapshot.nodes,
        counted,
        share,
        held=ours,
        quarantined=quarantined,
        moved_off=moved_off,
    )
    decisions: list[Decision] = [] if panic is None else [panic.decision()]
    decisions.extend(suspicion_notes)
    if panic is not None:
        decisions.extend(dropped_in_panic(suspected))
        suspected = {}
    verdicts: dict[str, NodeVerdict] = {}
    ended: dict[str, float] = {}  # node id -> end of its current or last quarantine
    for node in snapshot.nodes:
        marks = wanted[node.id]
        if panic is not None:
            held = held_in_panic(marks, _marks_in_force(node, now))
            decisions.extend(ignored(node, marks, held))
            marks = held
        worst = max((r.state for r in marks.values()), key=lambda s: s.severity, default=None)
        until = read_float(node.labels, QUARANTINE_UNTIL)
        if until is not None:
            ended[node.id] = until
        verdicts[node.id] = NodeVerdict(
            node_id=node.id,
            hostname=node.hostname,
            health=worst or HealthState.OK,
            marks=marks,
            quarantine_until=until if until is not None and until > now else None,
        )
        if worst is not None:
            why = "; ".join(
                f"{r.source}: {r.reason or 'no reason given'} (until {utc_time(r.until)})"
                for r in marks.values()
                if r.state is worst
            )
            effect = (
                "its tasks are evicted and it counts as down"
                if worst is HealthState.FAILED
                else "paused, preemptible work moves away within the budgets"
            )
            outcome = Outcome.FAILED if worst is HealthState.FAILED else Outcome.DEGRADED
            decisions.append(Decision(RULE, f"node {node.hostname}", outcome, f"{why}: {effect}"))

    for source in snapshot.unavailable_sources:
        decisions.append(
            Decision(
                f"{source.kind}s",
                f"{source.kind} {source.name}",
                Outcome.SKIP,
                f"{source.problem}: the controller goes on without it"
                + (
                    " (node load from reservations; an agent lost is no node failure)"
                    if source.kind == "agent"
                    else ""
                ),
            )
        )
    radius = BlastRadius(
        share=share,
        base=ready_and_active(snapshot.nodes, ours),
        alive=not_down(snapshot.nodes),
        hostnames={n.id: n.hostname for n in snapshot.nodes},
    )
    verdicts = _quarantine(
        snapshot,
        policy=policy,
        memory=memory,
        health_memory=health_memory,
        now=now,
        verdicts=verdicts,
        ended=ended,
        decisions=decisions,
        panic=panic is not None,
        room=_Room(radius, _node_wide(radius, verdicts, suspected), moved_off),
    )
    verdicts = _pauses(snapshot, verdicts, decisions)
    return Assessment(
        verdicts=verdicts,
        decisions=tuple(decisions),
        memory=health_memory,
        panic=panic,
        radius=replace(radius, taken=_node_wide(radius, verdicts, suspected)),
        suspected=suspected,
    )


def _node_wide(
    radius: BlastRadius, verdicts: Mapping[str, NodeVerdict], suspected: Mapping[str, Suspicion]
) -> dict[str, str]:
    """Node id -> what takes it from every service: the node-wide inputs acted on."""
    taken: dict[str, str] = {}
    for node_id, verdict in verdicts.items():
        if node_id not in radius.alive:
            continue
        if verdict.health is not HealthState.OK:
            taken[node_id] = verdict.health.value
        elif verdict.quarantined:
            taken[node_id] = "quarantined"
    for node_id in suspected:
        if node_id in radius.alive:
            taken.setdefault(node_id, "suspected")
    return taken


@dataclass(frozen=True, slots=True)
class _Room:
    """What a new quarantine must fit beside: the node-wide inputs acted on, and each
    service's move-offs in force (service name -> nodes)."""

    radius: BlastRadius
    taken: Mapping[str, str]
    moved_off: Mapping[str, frozenset[str]]

    def refusal(self, node_id: str) -> str | None:
        taken = {**self.taken, node_id: "quarantined"}
        worst, who = dict(taken), ""
        for name, nodes in sorted(self.moved_off.items()):
            with_moves = {**{n: "moved off" for n in nodes & self.radius.alive}, **taken}
            if len(with_moves) > len(worst):
                worst, who = with_moves, f" for service {name}"
        cap = self.radius.cap
        if len(worst) <= cap:
            return None
        del worst[node_id]
        return (
            f"a quarantine would make {len(worst) + 1} of the {len(self.radius.base)} ready "
            f"and active node(s) taken by outside inputs{who} "
            f"({named(worst, self.radius.hostnames)} already): "
            f"{SETTING} {self.radius.share:.0%} allows {cap}"
        )

    def take(self, node_id: str) -> _Room:
        return replace(self, taken={**self.taken, node_id: "quarantined"})


def _quarantine(
    snapshot: ClusterSnapshot,
    *,
    policy: Policy,
    memory: Memory,
    health_memory: HealthMemory,
    now: float,
    verdicts: dict[str, NodeVerdict],
    ended: Mapping[str, float],
    decisions: list[Decision],
    panic: bool,
    room: _Room,
) -> dict[str, NodeVerdict]:
    q = policy.quarantine
    window_start = now - q.period_seconds
    since = {n.id: max(window_start, ended.get(n.id, -math.inf)) for n in snapshot.nodes}
    failures = counted_failures(snapshot, replace(memory, health=health_memory), now, since=since)
    incidents: dict[str, tuple[int, int]] = {}
    for node in snapshot.nodes:
        exits = sum(1 for t in health_memory.exits.get(node.id, ()) if t > since[node.id])
        failed = len(failures.get(node.id, ()))
        if exits + failed >= q.failures and not verdicts[node.id].quarantined:
            incidents[node.id] = (exits, failed)
    active = sum(1 for v in verdicts.values() if v.quarantined)
    cap = math.floor(q.max_fraction * len(snapshot.nodes) + 1e-9)
    for node_id in sorted(incidents, key=lambda n: (-sum(incidents[n]), verdicts[n].hostname)):
        exits, failed = incidents[node_id]
        verdict = verdicts[node_id]
        what = (
            f"{exits} ungraceful exit(s) and {failed} task failure(s) "
            f"within {_span(q.period_seconds)}"
        )
        subject = f"node {verdict.hostname}"
        if panic:
            decisions.append(
                Decision(
                    RULE,
                    subject,
                    Outcome.KEEP,
                    f"{what}, but no quarantine starts in a health panic",
                )
            )
            continue
        if active >= cap:
            decisions.append(
                Decision(
                    RULE,
                    subject,
                    Outcome.KEEP,
                    f"{what}, but {active} of {len(snapshot.nodes)} node(s) are quarantined "
                    f"already (max-fraction {q.max_fraction:.0%})",
                )
            )
            continue
        refusal = room.refusal(node_id)
        if refusal is not None:
            decisions.append(Decision(RULE, subject, Outcome.KEEP, f"{what}, but {refusal}"))
            continue
        room = room.take(node_id)
        active += 1
        until = now + q.duration_seconds
        verdicts[node_id] = replace(verdict, quarantine_until=until, quarantine_reason=what)
        decisions.append(
            Decision(
                RULE,
                subject,
                Outcome.QUARANTINE,
                f"{what}: kept from managed services for {_span(q.duration_seconds)}, "
                f"until {utc_time(until)} (the node stays active for the rest)",
            )
        )
    return verdicts


def _pauses(
    snapshot: ClusterSnapshot, verdicts: dict[str, NodeVerdict], decisions: list[Decision]
) -> dict[str, NodeVerdict]:
    """Why each node should be held paused; never the last manager that takes tasks."""
    out = dict(verdicts)
    wanted: dict[str, frozenset[str]] = {}
    for node in snapshot.nodes:
        verdict = verdicts[node.id]
        reasons: set[str] = set()
        if verdict.health is not HealthState.OK:
            reasons.add(PAUSE_HEALTH)
        if reasons:
            wanted[node.id] = frozenset(reasons)
    # A quarantined manager takes no managed task: the rules and guards see it paused.
    takers = {
        n.id
        for n in snapshot.nodes
        if n.role is NodeRole.MANAGER and n.accepts_tasks and not verdicts[n.id].quarantined
    }
    for node in snapshot.nodes:
        pause = wanted.get(node.id)
        if not pause:
            continue
        # Pausing a manager must leave a manager that takes tasks (the guards insist).
        lone = not takers - {node.id} - set(wanted)
        if node.role is NodeRole.MANAGER and node.availability is Availability.ACTIVE and lone:
            decisions.append(
                Decision(
                    RULE,
                    f"node {node.hostname}",
                    Outcome.KEEP,
                    f"not paused ({', '.join(sorted(pause))}): no other manager takes tasks",
                )
            )
            continue
        out[node.id] = replace(verdicts[node.id], pause=pause)
    return out


def _span(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
