"""Builders for capacity tests: nodes with slots, services reserving them, pending tasks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, Node, Resources, Service, Task, TaskState
from controller.core.plan import Plan, plan
from controller.core.rules import rules_named
from controller.policy import Policy

from .builders import MANAGED, node, service

SHORT = "no suitable node (insufficient resources on 3 nodes)"
# A victim whose max-unavailable lets a preemption take all it needs in one cycle: the
# tests of the search itself use it (the ledger's own limit is tested on its own).
ROOMY = {"placement.max-unavailable": "10"}
RULES = rules_named("failover", "preemption", "restore")


def slots(n: int) -> Resources:
    return Resources(generic={"slot": n})


def slot_nodes(*capacities: int) -> list[Node]:
    """node-1 (manager), node-2, ... with the given slot capacities."""
    return [
        replace(node(i, manager=i == 1), capacity=slots(c)) for i, c in enumerate(capacities, 1)
    ]


def svc(
    name: str,
    replicas: int,
    *,
    priority: str | int = "medium",
    reserve: int = 1,
    labels: Mapping[str, str] | None = None,
    constraints: Sequence[str] = (),
    preemptible: bool | None = None,
    managed: bool = True,
) -> Service:
    all_labels = {**(MANAGED if managed else {}), "placement.priority": str(priority)}
    if preemptible is not None:
        all_labels["placement.preemptible"] = "true" if preemptible else "false"
    all_labels.update(labels or {})
    return replace(
        service(name, replicas=replicas, labels=all_labels, constraints=constraints),
        reservations=slots(reserve),
    )


def on(s: Service, *node_numbers: int, first_slot: int = 1) -> list[Task]:
    """Running tasks of `s`, one per node number listed (repeat a number for two)."""
    return [
        Task(
            id=f"t-{s.name}-{slot}",
            service_id=s.id,
            node_id=f"n{n}",
            slot=slot,
            desired_state=TaskState.RUNNING,
            state=TaskState.RUNNING,
        )
        for slot, n in enumerate(node_numbers, first_slot)
    ]


def pending(s: Service, count: int, *, error: str = SHORT, first_slot: int = 100) -> list[Task]:
    return [
        Task(
            id=f"p-{s.name}-{slot}",
            service_id=s.id,
            node_id="",
            slot=slot,
            desired_state=TaskState.RUNNING,
            state=TaskState.PENDING,
            error=error,
        )
        for slot in range(first_slot, first_slot + count)
    ]


def run(
    snap: ClusterSnapshot,
    *,
    policy: Policy | None = None,
    now: float = 1000.0,
    memory: Memory | None = None,
) -> Plan:
    return plan(
        snapshot=snap,
        policy=policy or Policy.default(),
        memory=memory or Memory(),
        now=now,
        rules=RULES,
    )
