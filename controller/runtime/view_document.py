"""What the web view shows, as one JSON document built from the last cycle.

Nodes grouped by fault domain, each with its state, the controller's marks on it and the
tasks it runs; pending tasks with Swarm's reason and the filter that refuses each node;
every service with its owners, settings and explanation (core/explain.py); the recent
decisions. Built from what the cycle already holds, never from the Docker API.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.clock import utc_time
from controller.core.counts import is_active
from controller.core.decisions import Decision, Outcome
from controller.core.explain import cluster_scheduler, explain_service, explanation_document
from controller.core.health.node_marks import (
    PAUSED,
    QUARANTINE_UNTIL,
    read_health_marks,
)
from controller.core.kernel.candidates import NodeIndex, domain_of, expand_owner_list
from controller.core.kernel.possible_gaps import possible_gaps
from controller.core.labels import DENY_LABEL_PREFIX, DENY_VALUE
from controller.core.model import ClusterSnapshot, Node
from controller.core.plan import Plan
from controller.policy import Policy


@dataclass(frozen=True, slots=True)
class Logged:
    """A decision as the timeline keeps it: when it was logged, and in which trace."""

    time: float
    decision: Decision
    trace_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": utc_time(self.time),
            **self.decision.as_dict(),
            "trace_id": self.trace_id,
        }


HOLD_KINDS = ("paused", "quarantined", "failed", "degraded", "denying")


def held_nodes(snapshot: ClusterSnapshot, now: float) -> dict[str, int]:
    """How many nodes the controller holds, by what for (HOLD_KINDS), from their labels."""
    counts = dict.fromkeys(HOLD_KINDS, 0)
    for node in snapshot.nodes:
        marks = node_marks(node, (), now)
        counts["paused"] += "paused by the controller" in marks
        counts["quarantined"] += "quarantined" in marks
        counts["failed"] += any(m.startswith("failed (") for m in marks)
        counts["degraded"] += any(m.startswith("degraded (") for m in marks)
        counts["denying"] += any(m.startswith("denies ") for m in marks)
    return counts


def node_marks(node: Node, decisions: Sequence[Decision], now: float) -> list[str]:
    """What the controller holds on the node, read from the labels it keeps there (so a
    restarted controller shows the same) and, for suspicion, from this cycle."""
    marks = []
    if PAUSED in node.labels:
        marks.append("paused by the controller")
    try:
        until = float(node.labels.get(QUARANTINE_UNTIL, "nan"))
    except ValueError:
        until = math.nan
    if until > now:
        marks.append("quarantined")
    for mark in read_health_marks(node.labels):
        if mark.until > now:
            marks.append(f"{mark.state.value} ({mark.source})")
    denied = sorted(
        key.removeprefix(DENY_LABEL_PREFIX)
        for key, value in node.labels.items()
        if key.startswith(DENY_LABEL_PREFIX) and value == DENY_VALUE
    )
    if denied:
        marks.append("denies " + ", ".join(denied))
    subject = f"node {node.hostname}"
    if any(d.subject == subject and d.outcome is Outcome.SUSPECT for d in decisions):
        marks.append("suspected")
    return marks


def view_document(
    *,
    snapshot: ClusterSnapshot,
    plan: Plan,
    policy: Policy,
    timeline: Sequence[Logged],
    role: str,
    now: float,
    trace_url: str | None = None,
) -> dict[str, Any]:
    services = snapshot.service_by_id
    level = next(iter(policy.fault_domains), None)
    nodes = sorted(snapshot.nodes, key=lambda n: (domain_of(n, level, policy), n.hostname))
    tasks_on: dict[str, list[dict[str, Any]]] = {n.id: [] for n in nodes}
    for task in sorted(snapshot.tasks, key=lambda t: (t.service_id, t.slot)):
        if task.node_id in tasks_on and is_active(task) and task.service_id in services:
            tasks_on[task.node_id].append(
                {
                    "service": services[task.service_id].name,
                    "slot": task.slot,
                    "state": task.state.value,
                    "id": task.id,
                }
            )
    domains: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        domains.setdefault(domain_of(node, level, policy), []).append(
            {
                "id": node.id,
                "hostname": node.hostname,
                "role": node.role.value,
                "leader": node.leader,
                "state": node.state.value,
                "availability": node.availability.value,
                "marks": node_marks(node, plan.decisions, now),
                "tasks": tasks_on[node.id],
            }
        )
    return {
        "time": utc_time(now),
        "role": role,
        "fault_domain_level": level,
        "trace_url": trace_url,
        "domains": [{"name": name, "nodes": members} for name, members in domains.items()],
        "services": _services(snapshot, plan, policy),
        "decisions": [entry.as_dict() for entry in reversed(timeline)],
    }


def _hostnames(ids: Sequence[str], snapshot: ClusterSnapshot) -> list[str]:
    return [snapshot.node_by_id[i].hostname for i in ids if i in snapshot.node_by_id]


def _services(snapshot: ClusterSnapshot, plan: Plan, policy: Policy) -> list[dict[str, Any]]:
    resolved: Mapping[str, Any] = plan.resolved
    scheduler = cluster_scheduler(snapshot) if any(t.is_pending for t in snapshot.tasks) else None
    index = NodeIndex(snapshot.nodes)
    gaps = {g.service_id: g for g in possible_gaps(snapshot, policy, resolved, plan.decisions)}
    out = []
    for service in sorted(snapshot.services, key=lambda s: s.name):
        found = explain_service(
            service,
            snapshot=snapshot,
            policy=policy,
            resolved=plan.resolved,
            decisions=plan.decisions,
            scheduler=scheduler,
            index=index,
        )
        settings = resolved.get(service.id)
        preferred: list[str] = []
        possible: list[str] = []
        if settings is not None:
            preferred, possible = (
                _hostnames(expand_owner_list(names, (), policy.groups, index=index), snapshot)
                for names in (settings.settings.preferred_nodes, settings.settings.possible_nodes)
            )
        running = sum(1 for t in snapshot.tasks_of(service.id) if t.is_running)
        out.append(
            {
                **explanation_document(found),
                "mode": service.mode.value,
                "desired": service.replicas,
                "running": running,
                "active": sum(1 for t in snapshot.tasks_of(service.id) if is_active(t)),
                "preferred": preferred,
                "possible": possible,
                "possible_unenforced": (gaps[service.id].as_dict() if service.id in gaps else None),
            }
        )
    return out
