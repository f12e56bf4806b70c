"""What counts against a node for quarantine: its ungraceful exits (ready, then down,
while not drained by an operator) and the task failures there that are the node's own.

Failures in the first RETURN_GRACE_SECONDS after a node turns ready are its return's
(Swarm reports the tasks a crash killed only then), and a service that also fails on
other nodes is failing by itself, not because of the node: neither counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from controller.core.exit_history import HealthMemory
from controller.core.memory import Memory
from controller.core.model import Availability, ClusterSnapshot, Node
from controller.core.outside_inputs import WorkloadEvent

# Task failures this soon after a node turns ready belong to its return, not to it.
RETURN_GRACE_SECONDS = 30.0


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
