"""Builders for rebalance tests: services that opt in, nodes with capacity, settled memory."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from controller.core.labels import steering_constraint
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot, Node, Resources, Service, Task
from controller.core.plan import Plan, plan
from controller.core.rules import rules_named
from controller.core.rules.rebalance.rebalance_memory import REBALANCE_MEMORY, RebalanceMemory
from controller.policy import Budgets, ControllerSettings, Policy, RebalanceMode

from .builders import node, running

NOW = 1_796_152_964.0  # a moment of today: epoch seconds have ten digits
CPU = 1_000_000_000  # one CPU in nano-CPUs
GIB = 1 << 30
RULES = rules_named("failover", "rebalance")


def policy(
    *,
    mode: RebalanceMode = RebalanceMode.ON_JOIN,
    aggressiveness: int = 3,
    cooldown: float = 300.0,
    interval: float = 300.0,
    budgets: Budgets | None = None,
) -> Policy:
    return Policy(
        controller=ControllerSettings(
            rebalance_mode=mode,
            aggressiveness=aggressiveness,
            move_cooldown_seconds=cooldown,
            rebalance_interval_seconds=interval,
            budgets=budgets or Budgets(),
        )
    )


def nodes(
    n: int = 3, *, cpus: int = 0, labels: dict[int, dict[str, str]] | None = None
) -> list[Node]:
    """n ready nodes; with `cpus`, each has that many CPUs and 4 GiB of memory."""
    out = []
    for i in range(1, n + 1):
        made = node(i, manager=i == 1, labels=(labels or {}).get(i))
        if cpus:
            made = replace(made, capacity=Resources(cpus * CPU, 4 * GIB))
        out.append(made)
    return out


def rebalancing(
    name: str,
    replicas: int,
    *,
    cpu: float = 0.0,
    order: str = "start-first",
    constraints: Sequence[str] = (),
    **settings: str,
) -> Service:
    """A service opted in with `placement.rebalance=on` alone (plus any other settings),
    already adopted (it carries the steering constraint)."""
    labels = {"placement.rebalance": "on"}
    labels.update({f"placement.{k.replace('_', '-')}": v for k, v in settings.items()})
    return Service(
        id=f"s-{name}",
        version=100,
        name=name,
        labels=labels,
        replicas=replicas,
        constraints=(*constraints, steering_constraint(name)),
        reservations=Resources(int(cpu * CPU), 0),
        update_order=order,
    )


def layout(svc: Service, per_node: Sequence[int]) -> list[Task]:
    """Running tasks: per_node[i] tasks on node i+1."""
    tasks = []
    slot = 1
    for index, count in enumerate(per_node, start=1):
        for _ in range(count):
            tasks.append(running(svc, index, slot))
            slot += 1
    return tasks


def memory(
    node_list: Iterable[Node],
    *,
    returned: dict[str, float] | None = None,
    persisted: Iterable[str] = (),
    last_round: float | None = None,
    **fields: object,
) -> Memory:
    """Every node ready for long, but `returned` (node id -> seconds ago); the imbalance
    keys in `persisted` already seen for many cycles."""
    ready = {n.id: 0.0 for n in node_list}
    for node_id, ago in (returned or {}).items():
        ready[node_id] = NOW - ago
    rebalance = RebalanceMemory(
        streaks={key: (10, NOW - 100) for key in persisted}, last_round=last_round
    )
    return replace(
        Memory(node_ready_since=ready, started=True).with_slice(REBALANCE_MEMORY, rebalance),
        **fields,  # type: ignore[arg-type]
    )


def run(snap: ClusterSnapshot, mem: Memory, *, now: float = NOW, pol: Policy | None = None) -> Plan:
    return plan(snapshot=snap, policy=pol or policy(), memory=mem, now=now, rules=RULES)


def outcomes(result: Plan, rule: str = "rebalance") -> list[str]:
    return [d.outcome for d in result.decisions if d.rule == rule]


def reasons(result: Plan) -> str:
    return " | ".join(d.reason for d in result.decisions)
