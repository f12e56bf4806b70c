"""Node health, before any rule runs: failed, degraded, quarantined or fine.

Inputs are pure values: live reports (webhook, plugins), the durable marks on the nodes,
Swarm's task history, the node exits remembered, the policy and `now`.

- Health: per source, the live report wins over the recorded one; a report lapses at
  its ttl. The node's health is the worst of its sources. `failed` makes every rule see
  the node as down (so failover surges at once), `degraded` as paused. What the rules
  read of it, `NodeVerdict` and `Assessment`, is declared in verdicts.py.
- Quarantine (quarantine.py, `nodes.quarantine`): a node with at least `failures` incidents within
  `period` is kept from the managed services for `duration`, never more than
  `max-fraction` of the nodes at once, and only within the room the blast-radius cap
  (core/kernel/blast_radius.py) leaves beside the nodes reported, suspected, quarantined
  and each service's move-offs. The rules see it paused; Swarm does not: the node
  stays active, so services the controller does not manage keep it as Swarm alone would.
  An incident (incidents.py) is an ungraceful exit (ready, then down, while not drained
  by an operator) or a task failure there. Failures in the first RETURN_GRACE seconds
  after a node turns ready are its return's (Swarm reports the tasks a crash killed only
  then), and a service that also fails on other nodes is failing by itself, not because
  of the node: neither counts.
- Panic (panic.py): when the outside inputs together would take more than
  `controller.health-panic-threshold` of the ready and active nodes, no new report is
  taken, no suspicion acted on and no new quarantine starts; what is in force stays and
  releases go on.
- The node-wide inputs acted on make the cycle's `BlastRadius`: a service's own inputs
  (move-offs, plugin vetoes) get only the room it leaves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controller.core.clock import utc_time
from controller.core.decisions import Decision, Outcome
from controller.core.health.incidents import track_exits
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
from controller.core.health.quarantine import QuarantineRoom, quarantine
from controller.core.health.suspicion import (
    Suspicion,
    as_panic_marks,
    dropped_in_panic,
    suspect_nodes,
)
from controller.core.health.verdicts import RULE, Assessment, NodeVerdict
from controller.core.kernel.blast_radius import BlastRadius, not_down, ready_and_active
from controller.core.memory import Memory
from controller.core.model import Availability, ClusterSnapshot, Node, NodeRole, ServiceMode
from controller.core.outside_inputs import HealthState
from controller.policy import Policy, ResolvedService

# The assessment's values are declared in `verdicts`; the rules and the context import
# them from here, with the function that makes them.
__all__ = ["Assessment", "NodeVerdict", "assess_nodes", "moves_in_force"]


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
    health_memory = track_exits(snapshot, memory.health, now, keep=q.period_seconds)
    live = _live_reports(snapshot)
    wanted = {n.id: _health_marks(n, live.get(n.id, {}), now) for n in snapshot.nodes}
    suspected, suspicion_notes = suspect_nodes(
        snapshot, suspect_after=policy.controller.suspect_after_seconds, now=now
    )
    panic = _panic(
        snapshot, wanted, suspected, share=share, ours=ours, moved_off=moved_off, now=now
    )
    decisions: list[Decision] = [] if panic is None else [panic.decision()]
    decisions.extend(suspicion_notes)
    if panic is not None:
        decisions.extend(dropped_in_panic(suspected))
        suspected = {}
    verdicts, ended = _verdicts(
        snapshot, wanted, in_panic=panic is not None, now=now, decisions=decisions
    )
    decisions.extend(_unavailable_sources(snapshot))
    radius = BlastRadius(
        share=share,
        base=ready_and_active(snapshot.nodes, ours),
        alive=not_down(snapshot.nodes),
        hostnames={n.id: n.hostname for n in snapshot.nodes},
    )
    verdicts = quarantine(
        snapshot,
        policy=policy,
        memory=memory,
        health_memory=health_memory,
        now=now,
        verdicts=verdicts,
        ended=ended,
        decisions=decisions,
        panic=panic is not None,
        room=QuarantineRoom(radius, _node_wide(radius, verdicts, suspected), moved_off),
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


def _panic(
    snapshot: ClusterSnapshot,
    wanted: Mapping[str, dict[str, HealthMark]],
    suspected: Mapping[str, Suspicion],
    *,
    share: float,
    ours: frozenset[str],
    moved_off: Mapping[str, frozenset[str]],
    now: float,
) -> Panic | None:
    """A health panic, when the outside inputs together would take too many nodes."""
    quarantined = frozenset(
        n.id for n in snapshot.nodes if (read_float(n.labels, QUARANTINE_UNTIL) or 0.0) > now
    )
    # A suspicion counts against the panic share like a report of failure.
    counted = {**as_panic_marks(suspected), **{k: v for k, v in wanted.items() if v}}
    return detect_panic(
        snapshot.nodes,
        counted,
        share,
        held=ours,
        quarantined=quarantined,
        moved_off=moved_off,
    )


def _verdicts(
    snapshot: ClusterSnapshot,
    wanted: Mapping[str, dict[str, HealthMark]],
    *,
    in_panic: bool,
    now: float,
    decisions: list[Decision],
) -> tuple[dict[str, NodeVerdict], dict[str, float]]:
    """Each node's verdict from the marks acted on (in a panic, only those in force), and
    node id -> the end of its current or last quarantine."""
    verdicts: dict[str, NodeVerdict] = {}
    ended: dict[str, float] = {}
    for node in snapshot.nodes:
        marks = wanted[node.id]
        if in_panic:
            held = held_in_panic(marks, _marks_in_force(node, now))
            decisions.extend(ignored(node, marks, held))
            marks = held
        until = read_float(node.labels, QUARANTINE_UNTIL)
        if until is not None:
            ended[node.id] = until
        verdicts[node.id] = _verdict(node, marks, until, now, decisions)
    return verdicts, ended


def _verdict(
    node: Node,
    marks: dict[str, HealthMark],
    until: float | None,
    now: float,
    decisions: list[Decision],
) -> NodeVerdict:
    """The node's health from the marks acted on, the worst of them, with a decision
    that says what it means when it is not ok."""
    worst = max((r.state for r in marks.values()), key=lambda s: s.severity, default=None)
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
    return NodeVerdict(
        node_id=node.id,
        hostname=node.hostname,
        health=worst or HealthState.OK,
        marks=marks,
        quarantine_until=until if until is not None and until > now else None,
    )


def _unavailable_sources(snapshot: ClusterSnapshot) -> list[Decision]:
    """A skip for each outside source that could not be read: the cycle goes on."""
    return [
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
        for source in snapshot.unavailable_sources
    ]


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
