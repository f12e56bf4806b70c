"""Choosing the move that takes load off a hot node.

The lever is the exclusion constraint: adding `node.id!=HOT` to a service moves exactly
its tasks on that node (a start-first service starts each replacement before stopping
the old task), and Swarm places the replacements on the eligible nodes with the fewest
tasks of the service. Surge-and-trim cannot aim at a node: its trim takes tasks from
whichever nodes hold the most tasks of the service, which need not be the hot one.

A candidate move is kept only if no node that could receive a task becomes hot, the
move lowers the larger of the source's and the receivers' loads by the level's minimum
improvement, it respects the service's max-unavailable, and where its tasks may go does
not hang on where the moves planned before it this cycle put or take theirs (see
`counts.room_in_doubt`). Of those, the move leaving
the lowest such load wins, then the one moving fewer tasks, then by name: deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from controller.core.constraints import ConstraintError
from controller.core.counts import active_counts, placement_room, room_in_doubt, scale_up
from controller.core.kernel.levels import Level
from controller.core.model import ClusterSnapshot, Resources, Service
from controller.core.rules.rebalance.load import Load, Projection, project_move, task_demand


@dataclass(frozen=True, slots=True)
class LoadMove:
    service: Service
    projection: Projection


@dataclass(frozen=True, slots=True)
class MoveRules:
    """What the rule knows about each service and node that the chooser must respect."""

    level: Level
    mean: float
    # Nodes a service's tasks left recently and may not go straight back to.
    forbidden: Callable[[Service], frozenset[str]]
    # Whether a node has been ready long enough to receive tasks.
    settled: Callable[[str], bool]
    # Reservations the moves already planned this cycle may start (promised) and stop
    # (released) on each node.
    promised: Mapping[str, Resources]
    released: Mapping[str, Resources]


def _refusal(
    snapshot: ClusterSnapshot,
    service: Service,
    *,
    source: str,
    loads: Mapping[str, Load],
    total: Mapping[str, int],
    rules: MoveRules,
    max_unavailable: int,
) -> tuple[Projection | None, str]:
    counts = active_counts(snapshot, service.id)
    moved = counts.get(source, 0)
    if service.update_order != "start-first":
        # A load move excludes the node: Swarm would stop these tasks before their
        # replacements have a node. Count skew moves it start-first (surge-and-trim).
        return None, (
            f"stop-first: a load move would stop its {moved} task(s) there before their "
            "replacements run"
        )
    if task_demand(snapshot, service, snapshot.node_by_id[source]).is_zero:
        return None, "no reservation and no measured usage to move"
    rest = {n: c for n, c in counts.items() if n != source}
    without = frozenset({source})
    try:
        room = placement_room(snapshot, service, rest, without=without, promised=rules.promised)
        most_room = placement_room(
            snapshot, service, rest, without=without, released=rules.released
        )
    except ConstraintError as exc:
        return None, f"unreadable constraint: {exc}"
    up = scale_up(rest, room, moved, total)
    if up is None:
        return None, "no other node has room for its tasks"
    if room_in_doubt(rest, up.at_most, room, most_room, moved):
        return None, (
            "whether another node can take its tasks depends on where Swarm puts the "
            "tasks moved before it this cycle"
        )
    receivers = up.receivers
    if receivers & rules.forbidden(service):
        return None, "it would go straight back to a node it just left"
    if not all(rules.settled(n) for n in receivers):
        return None, "a node it could go to has not been ready long enough"
    projection = project_move(snapshot, service, source=source, loads=loads, at_most=up.at_most)
    for target in receivers:
        if rules.level.is_hot(projection.loads[target].score, rules.mean):
            return None, "it would make another node hot"
    if loads[source].score - projection.worst() < rules.level.min_improvement:
        return None, "the improvement is below the minimum"
    return projection, ""


def choose_move(
    snapshot: ClusterSnapshot,
    *,
    source: str,
    services: Sequence[Service],
    loads: Mapping[str, Load],
    rules: MoveRules,
    max_unavailable: Callable[[Service], int],
) -> tuple[LoadMove | None, dict[str, str]]:
    """The best move off `source`, and why each other service could not go."""
    total: dict[str, int] = {}
    for task in snapshot.tasks:
        if task.node_id and task.is_running:
            total[task.node_id] = total.get(task.node_id, 0) + 1
    best: tuple[tuple[float, int, str], LoadMove] | None = None
    refused: dict[str, str] = {}
    for service in services:
        if not active_counts(snapshot, service.id).get(source):
            continue
        projection, why = _refusal(
            snapshot,
            service,
            source=source,
            loads=loads,
            total=total,
            rules=rules,
            max_unavailable=max_unavailable(service),
        )
        if projection is None:
            refused[service.name] = why
            continue
        key = (round(projection.worst(), 6), projection.moved, service.name)
        if best is None or key < best[0]:
            best = (key, LoadMove(service, projection))
    return (best[1] if best else None), refused
