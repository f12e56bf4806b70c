"""Why a service's tasks run where they run, and why pending ones run nowhere.

For each replica: the facts the rules weigh for its node (constraints met, preferred or
possible owner, fault domain, anti-affinity mates, what the current plan does about it)
and the recent decision that brought it there, if the decision log has one. For each
pending task: Swarm's own reason and, node by node, which of Swarm's filters refuses it
and whether the refusing constraint is the controller's. Settings come with where each
value came from (file rule, label or default). Pure: every input is given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.constraints import ConstraintError, parse_constraint
from controller.core.counts import is_active
from controller.core.decisions import Decision, LoggedDecision, Outcome
from controller.core.kernel.candidates import NodeIndex, domain_of, expand_owner_list
from controller.core.kernel.local_data import local_data
from controller.core.labels import is_own_constraint
from controller.core.model import (
    ClusterSnapshot,
    Node,
    Service,
    Task,
    TaskState,
)
from controller.core.simulate.scheduler import Scheduler
from controller.policy import Policy, ResolvedService, label_key

# Outcomes that move tasks: a recent one naming a node tells how a replica got there.
MOVING = frozenset(
    {
        Outcome.MOVE,
        Outcome.SURGE,
        Outcome.REBALANCE,
        Outcome.STEER,
        Outcome.TRIM,
        Outcome.RESTORE,
        Outcome.PREEMPT,
    }
)


@dataclass(frozen=True, slots=True)
class Past:
    """A decision from the controller's log, with its time as logged."""

    time: str
    decision: LoggedDecision


@dataclass(frozen=True, slots=True)
class ReplicaReasons:
    task: Task
    node: str  # hostname
    reasons: tuple[str, ...]
    arrived: Past | None = None  # the latest logged move that names this node


@dataclass(frozen=True, slots=True)
class PendingReasons:
    task: Task
    swarm: str  # Status.Err as Swarm reports it
    nodes: tuple[tuple[str, tuple[str, ...]], ...]  # hostname -> refusals (empty: eligible)


@dataclass(frozen=True)
class Explanation:
    service: Service
    settings: ResolvedService | None
    constraints: tuple[tuple[str, str], ...]  # (constraint, whose)
    record: str | None  # the controller's replica record, in words
    replicas: tuple[ReplicaReasons, ...]
    pending: tuple[PendingReasons, ...]
    now: tuple[Decision, ...]  # this cycle's decisions about the service
    recent: tuple[Past, ...]  # logged decisions about the service, oldest first


def _about(decision: Decision | LoggedDecision, service: Service) -> bool:
    # A logged decision's action is text only: both are matched by the text.
    subject = f"service {service.name}"
    text = decision.action_text
    return decision.subject == subject or (text is not None and text.startswith(f"{subject}:"))


def _whose(text: str, service: Service, hosts: Mapping[str, str]) -> str:
    if not is_own_constraint(text, service.name, service.labels):
        return "the operator's (the service spec)"
    if text.startswith("node.id!="):
        node = text.removeprefix("node.id!=")
        return f"the controller's: keeps tasks off {hosts.get(node, node)} (steering)"
    if ".possible." in text:
        return "the controller's: only possible owners (placement.possible-nodes)"
    return "the controller's: lets it deny a node by a node label (adoption)"


def _record(service: Service) -> str | None:
    if service.replica_record_error is not None:
        return service.replica_record_error
    record = service.replica_record
    if record is None:
        return None
    detail = f" ({record.detail})" if record.detail else ""
    return (
        f"the controller set its replica count to {record.written} for a {record.operation}"
        f"{detail}; the operator's count is {record.base}"
    )


def _replica_reasons(
    task: Task,
    service: Service,
    *,
    snapshot: ClusterSnapshot,
    policy: Policy,
    resolved: ResolvedService | None,
    all_resolved: Mapping[str, ResolvedService],
    now: Sequence[Decision],
    index: NodeIndex,
) -> list[str]:
    node = snapshot.node_by_id[task.node_id]
    out: list[str] = []
    settings = resolved.settings if resolved is not None else None
    if settings is None or not settings.managed:
        out.append("not managed by the controller: Swarm's scheduler placed it (fewest tasks")
        out[-1] += " of the service, then fewest tasks in all, among the nodes that qualify)"
    unmet = [c for c in service.constraints if not _meets(c, node)]
    if unmet:
        out.append(f"{node.hostname} no longer meets {', '.join(unmet)}: Swarm replaces it")
    elif service.constraints:
        out.append(f"{node.hostname} meets all {len(service.constraints)} constraint(s)")
    if settings is not None:
        out.extend(
            _policy_reasons(
                service,
                node,
                snapshot=snapshot,
                policy=policy,
                resolved=resolved,
                all_resolved=all_resolved,
                index=index,
            )
        )
    host = node.hostname
    for decision in now:
        if decision.rule != "guard" and host in decision.reason:
            out.append(f"now: [{decision.rule}] {decision.outcome} - {decision.reason}")
    return out


def _policy_reasons(
    service: Service,
    node: Node,
    *,
    snapshot: ClusterSnapshot,
    policy: Policy,
    resolved: ResolvedService | None,
    all_resolved: Mapping[str, ResolvedService],
    index: NodeIndex,
) -> list[str]:
    """What the service's settings say of a replica on this node: owner lists, spread,
    anti-affinity and local data, each with where the setting comes from."""
    out: list[str] = []
    settings = resolved.settings if resolved is not None else None
    if resolved is not None and settings is not None and settings.preferred_nodes:
        order = expand_owner_list(settings.preferred_nodes, (), policy.groups, index=index)
        where = resolved.origin("preferred-nodes")
        if node.id in order:
            out.append(f"preferred owner #{order.index(node.id) + 1} ({where})")
        else:
            names = ", ".join(snapshot.node_by_id[n].hostname for n in order) or "none present"
            out.append(f"not a preferred owner (preferred: {names}; {where})")
    if resolved is not None and settings is not None and settings.possible_nodes:
        possible = expand_owner_list(settings.possible_nodes, (), policy.groups, index=index)
        where = resolved.origin("possible-nodes")
        verdict = "a possible owner" if node.id in possible else "NOT a possible owner"
        out.append(f"{verdict} ({where})")
    if resolved is not None and settings is not None and settings.spread:
        out.append(
            _spread(
                service,
                snapshot,
                policy=policy,
                level=settings.spread,
                node_id=node.id,
                origin=resolved.source_of("spread"),
            )
        )
    if settings is not None and settings.anti_affinity:
        out.append(_mates(service, snapshot, all_resolved, settings.anti_affinity, node.id))
    if (
        resolved is not None
        and settings is not None
        and settings.managed
        and (data := local_data(service, settings))
    ):
        out.append(
            f"its data is on this node ({', '.join(data)}; {label_key('data')} "
            f"{settings.data} from {resolved.source_of('data')}): the controller's own moves "
            "leave it here, failover does not"
        )
    return out


def _meets(text: str, node: Node) -> bool:
    try:
        return parse_constraint(text).matches(node)
    except ConstraintError:
        return False


def _spread(
    service: Service,
    snapshot: ClusterSnapshot,
    *,
    policy: Policy,
    level: str,
    node_id: str,
    origin: str,
) -> str:
    counts: Counter[str] = Counter()
    for task in _active(snapshot, service):
        counts[domain_of(snapshot.node_by_id[task.node_id], level, policy) or "(unlabelled)"] += 1
    mine = domain_of(snapshot.node_by_id[node_id], level, policy) or "(unlabelled)"
    shape = ", ".join(f"{d} {c}" for d, c in sorted(counts.items()))
    return f"{level} {mine}; spread over {level} (from {origin}): {shape}"


def _mates(
    service: Service,
    snapshot: ClusterSnapshot,
    resolved: Mapping[str, ResolvedService],
    classes: tuple[str, ...],
    node: str,
) -> str:
    def shares(service_id: str) -> bool:
        other = resolved.get(service_id)
        return other is not None and bool(set(other.settings.anti_affinity) & set(classes))

    others = [
        snapshot.service_by_id[t.service_id].name
        for t in snapshot.tasks_on(node)
        if t.service_id != service.id
        and t.desired_state is TaskState.RUNNING
        and shares(t.service_id)
    ]
    names = ", ".join(classes)
    if not others:
        return f"anti-affinity {names}: no task of the same class on this node"
    return f"anti-affinity {names}: shares the node with {', '.join(sorted(set(others)))}"


def _active(snapshot: ClusterSnapshot, service: Service) -> list[Task]:
    return [
        t
        for t in snapshot.tasks_of(service.id)
        if t.node_id in snapshot.node_by_id
        and snapshot.node_by_id[t.node_id].is_ready
        and is_active(t)
    ]


def cluster_scheduler(snapshot: ClusterSnapshot) -> Scheduler:
    """Every node's room and task counts as Swarm's filters see them."""
    assigned = [(t.service_id, t.node_id) for t in snapshot.tasks if t.node_id and is_active(t)]
    return Scheduler(snapshot.nodes, snapshot.service_by_id, assigned)


def explain_service(
    service: Service,
    *,
    snapshot: ClusterSnapshot,
    policy: Policy,
    resolved: Mapping[str, ResolvedService],
    decisions: Sequence[Decision],
    history: Sequence[Past] = (),
    scheduler: Scheduler | None = None,
    index: NodeIndex | None = None,
) -> Explanation:
    """`scheduler` and `index`: the cluster's room and counts, and its nodes by name,
    shared when explaining every service (they are read, never changed); the scheduler
    is built here only for a service with a pending task."""
    hosts = snapshot.hostname_by_id
    index = index or NodeIndex(snapshot.nodes)
    now = tuple(d for d in decisions if _about(d, service))
    recent = tuple(p for p in history if _about(p.decision, service))
    settings = resolved.get(service.id)
    replicas = []
    for task in sorted(_active(snapshot, service), key=lambda t: (t.slot, t.id)):
        host = hosts[task.node_id]
        arrived = next(
            (
                p
                for p in reversed(recent)
                if p.decision.outcome in MOVING and f"to {host}" in p.decision.reason
            ),
            None,
        )
        reasons = _replica_reasons(
            task,
            service,
            snapshot=snapshot,
            policy=policy,
            resolved=settings,
            all_resolved=resolved,
            now=now,
            index=index,
        )
        replicas.append(ReplicaReasons(task, host, tuple(reasons), arrived))
    pending = _pending_reasons(service, snapshot, scheduler)
    constraints = tuple((c, _whose(c, service, hosts)) for c in service.constraints)
    return Explanation(
        service=service,
        settings=settings,
        constraints=constraints,
        record=_record(service),
        replicas=tuple(replicas),
        pending=tuple(pending),
        now=now,
        recent=recent,
    )


def _pending_reasons(
    service: Service, snapshot: ClusterSnapshot, scheduler: Scheduler | None
) -> list[PendingReasons]:
    """Each pending task, with why every node refuses it (the scheduler is built here
    only when there is one)."""
    pending = []
    for task in snapshot.tasks_of(service.id):
        if task.node_id or not task.is_pending:
            continue
        scheduler = scheduler or cluster_scheduler(snapshot)
        nodes = tuple(
            (
                node.hostname,
                tuple(
                    r.reason + (" (the controller's)" if r.own else "")
                    for r in scheduler.refusals(node, service)
                ),
            )
            for node in scheduler.nodes
        )
        pending.append(PendingReasons(task, task.error or "(no reason given yet)", nodes))
    return pending


def explanation_document(found: Explanation) -> dict[str, Any]:
    """The explanation as JSON (`explain --json`, the web view)."""
    settings = found.settings
    return {
        "service": {"id": found.service.id, "name": found.service.name},
        "managed": settings is not None and settings.settings.managed,
        "record": found.record,
        "settings": [
            {"setting": name, "value": value, "source": source}
            for name, value, source in (settings.setting_rows() if settings else [])
        ],
        "constraints": [{"constraint": c, "whose": w} for c, w in found.constraints],
        "replicas": [
            {
                "task": r.task.id,
                "slot": r.task.slot,
                "node": r.node,
                "state": r.task.state.value,
                "reasons": list(r.reasons),
                "arrived": (
                    {"time": r.arrived.time, **r.arrived.decision.as_dict()} if r.arrived else None
                ),
            }
            for r in found.replicas
        ],
        "pending": [
            {
                "task": p.task.id,
                "slot": p.task.slot,
                "swarm": p.swarm,
                "nodes": {host: list(refusals) for host, refusals in p.nodes},
            }
            for p in found.pending
        ],
        "now": [d.as_dict() for d in found.now],
        "recent": [{"time": p.time, **p.decision.as_dict()} for p in found.recent],
    }
