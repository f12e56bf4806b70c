"""Small builders for snapshots in core tests: a swarm in a few lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
