"""Small builders for snapshots in core tests: a swarm in a few lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from controller.core.constraints import node_filter, parse_constraint
from controller.core.model import (
    Availability,
    ClusterSnapshot,
    Node,
    NodeRole,
    NodeState,
    Service,
    ServiceMode,
    Task,
    TaskState,
)


def node(
    n: int,
    *,
    manager: bool = False,
    state: NodeState = NodeState.READY,
    availability: Availability = Availability.ACTIVE,
    labels: Mapping[str, str] | None = None,
) -> Node:
    return Node(
        id=f"n{n}",
        version=10 + n,
        hostname=f"node-{n}",
        role=NodeRole.MANAGER if manager else NodeRole.WORKER,
        availability=availability,
        state=state,
        labels=dict(labels or {}),
        leader=manager and n == 1,
        manager_reachable=manager,
    )


def service(
    name: str,
    *,
    replicas: int | None = 1,
    labels: Mapping[str, str] | None = None,
    constraints: Sequence[str] = (),
    update_state: str | None = None,
    mode: ServiceMode = ServiceMode.REPLICATED,
) -> Service:
    return Service(
        id=f"s-{name}",
        version=100,
        name=name,
        labels=dict(labels or {}),
        mode=mode
        if replicas is not None or mode is not ServiceMode.REPLICATED
        else ServiceMode.GLOBAL,
        replicas=replicas,
        constraints=tuple(constraints),
        update_order="start-first",
        update_state=update_state,
    )


def running(svc: Service, node_n: int, slot: int) -> Task:
    return Task(
        id=f"t-{svc.name}-{slot}",
        service_id=svc.id,
        node_id=f"n{node_n}",
        slot=slot,
        desired_state=TaskState.RUNNING,
        state=TaskState.RUNNING,
    )


def snapshot(
    nodes: Sequence[Node], services: Sequence[Service], tasks: Sequence[Task] = ()
) -> ClusterSnapshot:
    return ClusterSnapshot(nodes=tuple(nodes), services=tuple(services), tasks=tuple(tasks))


MANAGED = {"placement.managed": "true"}


def replaced(snap: ClusterSnapshot) -> ClusterSnapshot:
    """Swarm, once it has acted: each task on a node that is down, drained or refused by
    its service's constraints runs again on the first node that accepts it (or waits
    unassigned when none does)."""
    tasks: list[Task] = []
    for task in snap.tasks:
        svc = snap.service_by_id.get(task.service_id)
        host = snap.node_by_id.get(task.node_id)
        if svc is None or host is None:
            tasks.append(task)
            continue
        allows = node_filter(parse_constraint(c) for c in svc.constraints)
        if host.is_ready and host.availability is not Availability.DRAIN and allows(host):
            tasks.append(task)
            continue
        target = next((n for n in snap.nodes if n.accepts_tasks and allows(n)), None)
        if target is None:
            tasks.append(replace(task, node_id="", state=TaskState.PENDING))
        else:
            tasks.append(replace(task, node_id=target.id, state=TaskState.RUNNING))
    return replace(snap, tasks=tuple(tasks))
