"""Health inside the workload: a service that keeps failing on one node leaves it.

`failover-threshold: N/PERIOD` on a service: once N of its tasks failed or turned
unhealthy on one node within PERIOD, the service is moved off that node (a deny label
the service's steering constraint rejects; the record `swarm-placement.unhealthy.<name>`
says since when). The node is the service's again PERIOD later.

A service that keeps failing wherever it goes is not chased from node to node: once it
has been moved off N nodes within PERIOD the threshold is reached, it is not moved again
(Swarm keeps restarting it where it is) and a decision says so, as a failover cluster
leaves a role that failed too often in the failed state. It is never moved off the last
node it could run on either, nor past the one blast-radius cap
(core/kernel/blast_radius.py): the nodes it is kept off by every outside input together
(reported, suspected or quarantined nodes first, then its move-offs, then plugin vetoes)
stay within `controller.health-panic-threshold` of the ready and active nodes it may run
on. Failures everywhere at once (a dependency down, an agent gone wrong) must not take a
service off every node.

Failures count once per task (an unhealthy task that Swarm then kills is one failure),
and not in the first moments after the node turned ready (see assess.RETURN_GRACE_SECONDS).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.constraints import ConstraintError, node_satisfies, parse_constraint
from controller.core.decisions import Decision, Outcome
from controller.core.health.incidents import RETURN_GRACE_SECONDS, ready_since
from controller.core.health.node_marks import unhealthy_marks
from controller.core.kernel.blast_radius import ServiceRadius
from controller.core.labels import DENY_VALUE, deny_label
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, Service, ServiceMode
from controller.policy import FailoverThreshold

RULE = "workload-health"


@dataclass
class MoveOffs:
    """Per node, the services kept off it for failing there: name -> since."""

    wanted: dict[str, dict[str, float]] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)

    def keep(self, node_id: str, service_name: str, since: float) -> None:
        self.wanted.setdefault(node_id, {})[service_name] = since


def _span(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:.0f} s"


def _failures_by_node(
    snapshot: ClusterSnapshot,
    memory: Memory,
    service: Service,
    now: float,
    since: Mapping[str, float],
) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for event in snapshot.workload:
        node = snapshot.node_by_id.get(event.node_id)
        if event.service_id != service.id or node is None or event.at > now:
            continue
        if event.at <= since.get(node.id, 0.0):
            continue
        if event.at < ready_since(memory, node, now) + RETURN_GRACE_SECONDS:
            continue
        out.setdefault(node.id, set()).add(event.task_id)
    return out


def _other_homes(snapshot: ClusterSnapshot, service: Service, leaving: set[str]) -> int:
    """Nodes the service could still run on if it left `leaving` (unreadable: assume many)."""
    try:
        constraints = tuple(parse_constraint(c) for c in service.constraints)
    except ConstraintError:
        return len(snapshot.nodes)
    return sum(
        1
        for n in snapshot.nodes
        if n.accepts_tasks
        and n.id not in leaving
        and n.labels.get(deny_label(service.name)) != DENY_VALUE
        and node_satisfies(n, constraints)
    )


def plan_move_offs(
    *,
    snapshot: ClusterSnapshot,
    services: tuple[Service, ...],
    thresholds: Mapping[str, FailoverThreshold | None],
    memory: Memory,
    now: float,
    radii: Mapping[str, ServiceRadius],
) -> MoveOffs:
    """`snapshot`: as the rules see it (failed nodes down, held nodes paused); `radii`:
    per service id, its blast-radius count, which the move-offs in force and new ones
    are added to."""
    result = MoveOffs()
    by_name = {s.name: s for s in services}
    for node in snapshot.nodes:
        for name, since in unhealthy_marks(node.labels).items():
            if name not in by_name:
                continue  # not managed any more: the record goes with the deny label
            threshold = thresholds.get(name)
            period = threshold.period_seconds if threshold else 0.0
            if now - since < period:
                result.keep(node.id, name, since)
                radii[by_name[name].id].keep(node.id, "moved off")
    for service in services:
        threshold = thresholds.get(service.name)
        if threshold is None or service.mode is ServiceMode.OTHER:
            continue
        _plan_service(
            snapshot,
            memory,
            service,
            threshold=threshold,
            now=now,
            radius=radii[service.id],
            result=result,
        )
    return result


def _plan_service(
    snapshot: ClusterSnapshot,
    memory: Memory,
    service: Service,
    *,
    threshold: FailoverThreshold,
    now: float,
    radius: ServiceRadius,
    result: MoveOffs,
) -> None:
    period = threshold.period_seconds
    off = {n for n, names in result.wanted.items() if service.name in names}
    since = _counted_since(snapshot, service, now - period)
    failures = _failures_by_node(snapshot, memory, service, now, since)
    subject = f"service {service.name}"
    for node_id in sorted(failures, key=lambda n: snapshot.node_by_id[n].hostname):
        count = len(failures[node_id])
        if count < threshold.failures or node_id in off:
            continue
        host = snapshot.node_by_id[node_id].hostname
        what = f"{count} task failure(s) on {host} within {_span(period)}"
        held = _held_on(snapshot, service, node_id, off=off, threshold=threshold, radius=radius)
        if held is not None:
            outcome, why = held
            result.decisions.append(Decision(RULE, subject, outcome, f"{what}, but {why}"))
            continue
        radius.take({node_id: "moved off"})
        off.add(node_id)
        result.keep(node_id, service.name, now)
        result.decisions.append(
            Decision(
                RULE,
                subject,
                Outcome.MOVE_OFF,
                f"{what} (failover-threshold {threshold.failures}/{_span(period)}): "
                f"kept off {host} for {_span(period)}",
            )
        )


def _counted_since(
    snapshot: ClusterSnapshot, service: Service, window_start: float
) -> dict[str, float]:
    """Node id -> the earliest failure time that counts there: the period's start, or
    the service's last move-off from it (that move's reason never counts twice)."""
    since = {n.id: window_start for n in snapshot.nodes}
    for node in snapshot.nodes:
        recorded = unhealthy_marks(node.labels).get(service.name)
        if recorded is not None:
            since[node.id] = max(since[node.id], recorded)
    return since


def _held_on(
    snapshot: ClusterSnapshot,
    service: Service,
    node_id: str,
    *,
    off: set[str],
    threshold: FailoverThreshold,
    radius: ServiceRadius,
) -> tuple[Outcome, str] | None:
    """Why a service failing on a node is not moved off it, or None when it is."""
    period = threshold.period_seconds
    if len(off) >= threshold.failures:
        hosts = ", ".join(sorted(snapshot.node_by_id[n].hostname for n in off))
        return (
            Outcome.HOLD,
            f"it was moved off {len(off)} node(s) ({hosts}) within "
            f"{_span(period)} already: failover-threshold "
            f"{threshold.failures}/{_span(period)} reached, it fails wherever it runs "
            "and is not moved again (Swarm keeps restarting it)",
        )
    if not _other_homes(snapshot, service, {*off, node_id}):
        return Outcome.KEEP, "no other node may run it"
    refusal = radius.refusal({node_id: "moved off"})
    if refusal is not None:
        return (
            Outcome.HOLD,
            f"{refusal}: it is not moved off (Swarm keeps restarting it)",
        )
    return None
