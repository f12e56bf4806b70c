"""Count skew, fixed by surge-and-trim: Swarm's own scale-up and scale-down, simulated.

Two swarmkit behaviours do the moving (DESIGN §3): raising only the replica count
places each new task on the eligible node with the fewest tasks of the service (then
the fewest tasks overall), and lowering it removes tasks from the nodes with the most
tasks of the service. So surging by k and trimming by k moves k tasks from the busiest
nodes to the emptiest, restarting nothing else. The smallest k that balances the
service is the minimum number of moves: a move can lower the skew by at most one task.

Swarm breaks ties its own way, so besides one predicted outcome the simulation returns
every node that *could* receive or lose a task under any tie-break; the checks that
matter (never onto a hot node, never straight back) use those sets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.core.constraints import node_filter, parse_constraint
from controller.core.model import (
    ACTIVE_TASK_STATES,
    ClusterSnapshot,
    Resources,
    Service,
    Task,
    TaskState,
)
from controller.core.snapshot_cache import per_snapshot

# Room on a node with no limit from reservations or max-replicas-per-node.
UNLIMITED = 1 << 30


@dataclass(frozen=True, slots=True)
class SurgeTrim:
    surge: int  # tasks added, then trimmed: the number of tasks that move
    before: Mapping[str, int]  # node id -> tasks of the service now
    after: Mapping[str, int]  # node id -> tasks once trimmed (one tie-break)
    at_most: Mapping[str, int]  # node id -> most new tasks it may get (any tie-break)
    sources: frozenset[str]  # nodes that may lose a task in the trim
    nodes: frozenset[str]  # the nodes the balance is measured over

    @property
    def receivers(self) -> frozenset[str]:
        """Every node that may get a new task."""
        return frozenset(self.at_most)

    @property
    def spread_before(self) -> int:
        return spread(self.before, self.nodes)

    @property
    def spread_after(self) -> int:
        return spread(self.after, self.nodes)


def spread(counts: Mapping[str, int], nodes: Iterable[str]) -> int:
    """Tasks on the busiest node minus tasks on the emptiest, over `nodes`."""
    values = [counts.get(n, 0) for n in nodes]
    return max(values) - min(values) if values else 0


def is_active(task: Task) -> bool:
    """Swarm means it to run and it has not ended: it holds its place on its node."""
    return task.is_active


def active_placement(snapshot: ClusterSnapshot) -> Mapping[str, Mapping[str, int]]:
    """Service id -> ready node id -> its active tasks (see ClusterSnapshot.active_placement)."""
    return snapshot.active_placement


def active_counts(snapshot: ClusterSnapshot, service_id: str) -> dict[str, int]:
    """Node id -> tasks of the service meant to run there, on ready nodes (a copy)."""
    return dict(active_placement(snapshot).get(service_id, {}))


@per_snapshot  # the same for every service of a cycle: computed once
def running_by_node(snapshot: ClusterSnapshot) -> Mapping[str, int]:
    """Node id -> running tasks there, all services together."""
    total: dict[str, int] = {}
    for task in snapshot.tasks:
        if task.node_id and task.is_running:
            total[task.node_id] = total.get(task.node_id, 0) + 1
    return total


@per_snapshot  # the same for every service of a cycle: computed once
def reserved_by_node(snapshot: ClusterSnapshot) -> Mapping[str, Resources]:
    """Node id -> reservations of the active tasks there, all services together."""
    # Plain sums per node, made into Resources once: one object per node, not per task.
    cpus: dict[str, int] = {}
    memory: dict[str, int] = {}
    generic: dict[str, dict[str, int]] = {}
    services = snapshot.service_by_id
    for task in snapshot.tasks:
        node = task.node_id
        if (
            not node
            or task.desired_state is not TaskState.RUNNING
            or task.state not in ACTIVE_TASK_STATES
            or task.service_id not in services
        ):
            continue
        need = services[task.service_id].reservations
        cpus[node] = cpus.get(node, 0) + need.nano_cpus
        memory[node] = memory.get(node, 0) + need.memory_bytes
        kinds = generic.setdefault(node, {})
        for kind, amount in need.generic.items():
            kinds[kind] = kinds.get(kind, 0) + amount
    return {node: Resources(cpus[node], memory[node], generic[node]) for node in cpus}


def _fits(free: Resources, need: Resources) -> int:
    """How many tasks needing `need` fit in `free`."""
    limits = [UNLIMITED]
    if need.nano_cpus:
        limits.append(max(free.nano_cpus, 0) // need.nano_cpus)
    if need.memory_bytes:
        limits.append(max(free.memory_bytes, 0) // need.memory_bytes)
    for kind, amount in need.generic.items():
        if amount:
            limits.append(max(free.generic.get(kind, 0), 0) // amount)
    return min(limits)


def placement_room(
    snapshot: ClusterSnapshot,
    service: Service,
    counts: Mapping[str, int],
    *,
    without: frozenset[str] = frozenset(),
    promised: Mapping[str, Resources] | None = None,
    released: Mapping[str, Resources] | None = None,
) -> dict[str, int]:
    """Node id -> how many more tasks of the service Swarm would place there now.

    As swarmkit's filters do: ready and active, every constraint met, reservations
    fitting in what is left, under max-replicas-per-node. `without`: nodes left out (as
    an added `node.id!=` would); `promised`: reservations that moves already planned
    this cycle may start there; `released`: reservations they may stop there. Raises
    ConstraintError on a constraint it cannot read.
    """
    satisfies = node_filter(parse_constraint(text) for text in service.constraints)
    reserved = reserved_by_node(snapshot)
    room: dict[str, int] = {}
    for node in snapshot.nodes:
        if node.id in without or not node.accepts_tasks:
            continue
        if not satisfies(node):
            continue
        used = reserved.get(node.id, Resources()) + (promised or {}).get(node.id, Resources())
        freed = (released or {}).get(node.id)
        if freed is not None:
            used = Resources(
                used.nano_cpus - freed.nano_cpus,
                used.memory_bytes - freed.memory_bytes,
                {k: v - freed.generic.get(k, 0) for k, v in used.generic.items()},
            )
        free = Resources(
            node.capacity.nano_cpus - used.nano_cpus,
            node.capacity.memory_bytes - used.memory_bytes,
            {k: v - used.generic.get(k, 0) for k, v in node.capacity.generic.items()},
        )
        fit = _fits(free, service.reservations)
        if service.max_replicas_per_node:
            fit = min(fit, service.max_replicas_per_node - counts.get(node.id, 0))
        if fit > 0:
            room[node.id] = fit
    return room


def room_in_doubt(
    counts: Mapping[str, int],
    at_most: Mapping[str, int],
    least: Mapping[str, int],
    most: Mapping[str, int],
    k: int,
) -> frozenset[str]:
    """The nodes where Swarm may place k new tasks otherwise than planned, because their
    room lies between `least` and `most` (what moves planned before this one may take or
    leave there: their tie-breaks are not known when planning).

    A node's room matters only up to k (it cannot get more), and only on a node whose
    count is below the level the planned scale-up reaches with the least room (`at_most`):
    more room only lowers that level, so no other node can get a task whatever the room.
    Where no node is in doubt, Swarm places the tasks as planned in every case.
    """
    reach = max((counts.get(n, 0) + m for n, m in at_most.items()), default=0)
    return frozenset(
        n
        for n in least.keys() | most.keys()
        if counts.get(n, 0) < reach and min(least.get(n, 0), k) != min(most.get(n, 0), k)
    )


@dataclass(frozen=True, slots=True)
class ScaleUp:
    after: Mapping[str, int]  # node id -> tasks after placing (one tie-break)
    # Node id -> the most new tasks it can get under any tie-break; keys: every node
    # that may receive one. Each node at the lowest level takes one task before the level
    # rises, whichever the ties, so no node can end above the highest level reached + 1.
    at_most: Mapping[str, int]

    @property
    def receivers(self) -> frozenset[str]:
        return frozenset(self.at_most)


def scale_up(
    counts: Mapping[str, int], room: Mapping[str, int], k: int, total: Mapping[str, int]
) -> ScaleUp | None:
    """Place k new tasks as Swarm's scheduler does; None if some would stay pending."""
    after = dict(counts)
    added: dict[str, int] = {}
    receivers: set[str] = set()
    top = 0
    for _ in range(k):
        open_nodes = [n for n in room if room[n] - added.get(n, 0) > 0]
        if not open_nodes:
            return None
        low = min(after.get(n, 0) for n in open_nodes)
        top = max(top, low)
        ties = [n for n in open_nodes if after.get(n, 0) == low]
        receivers.update(ties)
        pick = min(ties, key=lambda n: (total.get(n, 0) + added.get(n, 0), n))
        after[pick] = after.get(pick, 0) + 1
        added[pick] = added.get(pick, 0) + 1
    at_most = {n: min(room[n], top + 1 - counts.get(n, 0), k) for n in receivers}
    return ScaleUp(after, at_most)


def scale_down(counts: Mapping[str, int], k: int) -> tuple[dict[str, int], frozenset[str]]:
    """Remove k tasks as Swarm's orchestrator does: from the nodes with the most."""
    after = {n: c for n, c in counts.items() if c}
    sources: set[str] = set()
    for _ in range(k):
        if not after:
            break
        high = max(after.values())
        ties = sorted(n for n, c in after.items() if c == high)
        sources.update(ties)
        after[ties[0]] -= 1
        if not after[ties[0]]:
            del after[ties[0]]
    return after, frozenset(sources)


def plan_surge_trim(
    counts: Mapping[str, int],
    room: Mapping[str, int],
    total: Mapping[str, int],
    *,
    max_surge: int,
) -> SurgeTrim | None:
    """The smallest surge that leaves the service as balanced as it can get, if that is
    better than now; None when no surge improves it."""
    nodes = frozenset(room) | frozenset(n for n, c in counts.items() if c)
    now = spread(counts, nodes)
    best: SurgeTrim | None = None
    for k in range(1, max_surge + 1):
        up = scale_up(counts, room, k, total)
        if up is None:
            break
        after, sources = scale_down(up.after, k)
        candidate = SurgeTrim(k, dict(counts), after, up.at_most, sources, nodes)
        if best is None or candidate.spread_after < best.spread_after:
            best = candidate
        if candidate.spread_after <= 1:
            break
    if best is None or best.spread_after >= now:
        return None
    return best
