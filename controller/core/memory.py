"""What the controller remembers between cycles, as a value.

Almost nothing here is durable: a restarted controller starts empty and is still
correct, only more patient (a node counts as ready from the first time it is seen
ready). Durable state lives in Swarm's labels. The exceptions are the nodes' recent
downs, the services' recent moves and the replica records an operator scaled over, kept
in the mirror (core/mirror). Flap damping
forgotten at every restart would trust a failing node again just when it matters, since
the controller most often restarts because a node died: the downs are read back at the
first observation (a standby sees nodes go down itself). A move's cooldown and "never
straight back" forgotten would let a new controller, or a standby that takes over (it
plans but never writes, so it never notes a move), move a service again a second after
the last move: the moves are read back at every observation. So are the records scaled
over: forgotten, the operator's count would read as the controller's own raise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar, cast

from controller.core.counts import active_placement
from controller.core.exit_history import HealthMemory
from controller.core.mirror import record_start
from controller.core.model import ClusterSnapshot, NodeState
from controller.core.replicas import OPERATION_LABEL, SINCE_LABEL, Operation
from controller.policy import ResolvedService

# How long a node loss is remembered for failover: past this, Swarm has long replaced
# the tasks itself and surging would only add replicas.
LOST_MEMORY_SECONDS = 60.0
# How long a node's down transitions are remembered: rebalancing damps nodes that flap.
FLAP_MEMORY_SECONDS = 600.0


S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class MemorySlice(Generic[S]):
    """A rule's own part of the memory, declared in the rule's package (its type there,
    below the rules, would be out of this module's reach): the memory keeps it by this
    declaration and hands it back typed. What several rules share stays a field of
    `Memory`."""

    rule: str  # the rule that keeps it (its spec's name)
    empty: Callable[[], S]  # what a controller that has not run the rule yet holds
    # What a standby that has just taken the lease keeps of it (None: all of it).
    taking_over: Callable[[S], S] | None = None


@dataclass(frozen=True, slots=True)
class Memory:
    # Node id -> when it was last seen turning ready; a flap restarts the clock.
    node_ready_since: Mapping[str, float] = field(default_factory=dict)
    # Service id -> when the controller last moved one of its tasks (cooldowns).
    last_move: Mapping[str, float] = field(default_factory=dict)
    # Service id -> last settings that resolved cleanly, kept while its labels are bad.
    resolved: Mapping[str, ResolvedService] = field(default_factory=dict)
    # False until the first observation: nodes ready then date from their last update.
    started: bool = False
    # A long-running controller's memory: from its first observation it watches the swarm
    # a while before moving tasks (rules/owners); one-shot plans (`plan`, `run --once`)
    # do not. `watching_since`: when it first observed, if it watches.
    watches: bool = False
    watching_since: float | None = None
    # Service id -> node id -> active tasks, as last observed (to know what a node held).
    placement: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # Service id -> (tasks lost with nodes that went down, when first lost).
    lost: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    # Node id -> when it went down, within FLAP_MEMORY_SECONDS (flap damping).
    node_downs: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    # Service id -> (nodes a controller move took its tasks off, when): never straight back.
    left: Mapping[str, tuple[tuple[str, ...], float]] = field(default_factory=dict)
    # Service id -> (node id -> replicas, since when): the placement a move of the owners
    # rule is taking the service to, while it takes more than one step (rules/owners).
    placing: Mapping[str, tuple[Mapping[str, int], float]] = field(default_factory=dict)
    # Node exits seen by health assessment (quarantine; see core/health).
    health: HealthMemory = field(default_factory=HealthMemory)
    # Service id -> the start (`since`) of a replica record whose count an operator
    # changed while it stood: once their scale is seen, the record no longer tells the
    # controller's count from theirs, even if they scale back to the count it wrote
    # (the write that forgets the record may wait, for a rollout say). Kept in the
    # mirror too: a restarted controller or a new leader must not read the operator's
    # count as its own raise.
    overridden: Mapping[str, float] = field(default_factory=dict)
    # Each rule's own memory, by its declaration (`slice`, `with_slice`).
    slices: Mapping[MemorySlice[Any], object] = field(default_factory=dict)

    def observe(self, snapshot: ClusterSnapshot, now: float) -> Memory:
        """Track when each node turned ready. At the first observation a ready node is
        dated from Swarm's UpdatedAt (its last status or spec change, so never too early);
        afterwards from the cycle that first sees it ready, so a flap restarts the clock."""
        # After a Raft leadership change Swarm calls every node `unknown` until it reports
        # to the new leader, and marks the silent ones down after the grace period: a
        # node ready before and unknown now has neither come back nor gone. It keeps its
        # ready-since and its tasks, and only a later `down` makes it a loss.
        pending = snapshot.unknown_among(self.node_ready_since)
        went_down = {
            n.id
            for n in snapshot.nodes
            if n.id in self.node_ready_since and not n.is_ready and n.id not in pending
        }
        last_move, left = _with_mirrored_moves(self.last_move, self.left, snapshot, now)
        return replace(
            self,
            overridden=_overridden(snapshot, self.overridden),
            node_ready_since=_ready_since(self, snapshot, pending, now),
            started=True,
            last_move=last_move,
            left=left,
            watching_since=self.watching_since if self.started or not self.watches else now,
            placement=_placement(snapshot, self.placement, pending),
            lost=_lost(self, snapshot, went_down, now),
            node_downs=_downs(self, snapshot, went_down, now),
            placing={k: v for k, v in self.placing.items() if k in snapshot.service_by_id},
        )

    def note_move(self, service_id: str, now: float, left: tuple[str, ...] = ()) -> Memory:
        """A disruptive write went out: start the service's cooldown, and remember the
        nodes its tasks are leaving so the next move does not take them straight back."""
        moved = replace(self, last_move={**self.last_move, service_id: now})
        if left:
            moved = replace(moved, left={**self.left, service_id: (left, now)})
        return moved

    def with_placing(self, updates: Mapping[str, tuple[Mapping[str, int], float] | None]) -> Memory:
        """Remember (or, for None, forget) the placement each service is being moved to."""
        placing = {**self.placing, **{k: v for k, v in updates.items() if v is not None}}
        for service_id, target in updates.items():
            if target is None:
                placing.pop(service_id, None)
        return replace(self, placing=placing)

    def slice(self, kind: MemorySlice[S]) -> S:
        """The rule's own memory, or its empty one before the rule first keeps any."""
        if kind in self.slices:
            return cast(S, self.slices[kind])
        return kind.empty()

    def with_slice(self, kind: MemorySlice[S], value: S) -> Memory:
        return replace(self, slices={**self.slices, kind: value})

    def with_health(self, health: HealthMemory) -> Memory:
        return replace(self, health=health)

    def taking_over(self) -> Memory:
        """The memory of a standby that has just taken the lease: each rule keeps of its
        own what its declaration says (speculative failover's wait starts again: what a
        standby saw of the liveness signals may not be what the leader acts on)."""
        slices = {
            kind: value if kind.taking_over is None else kind.taking_over(value)
            for kind, value in self.slices.items()
        }
        return replace(self, slices=slices)

    def with_resolved(self, resolved: Mapping[str, ResolvedService]) -> Memory:
        return replace(self, resolved=resolved)


# A down a previous controller recorded within this long of a down node's last status
# change is the same down, not a second one.
SAME_DOWN_SECONDS = 60.0


def _ready_since(
    memory: Memory, snapshot: ClusterSnapshot, pending: Collection[str], now: float
) -> dict[str, float]:
    ready_since = {n: memory.node_ready_since[n] for n in pending}
    for node in snapshot.nodes:
        if not node.is_ready:
            continue
        if node.id in memory.node_ready_since:
            ready_since[node.id] = memory.node_ready_since[node.id]
        elif not memory.started and node.updated_at:
            ready_since[node.id] = min(node.updated_at, now)
        else:
            ready_since[node.id] = now
    return ready_since


def _lost(
    memory: Memory, snapshot: ClusterSnapshot, went_down: set[str], now: float
) -> dict[str, tuple[int, float]]:
    """The replicas each service lost with the nodes that went down, remembered a while."""
    # A hold settles a loss: remembered past it, the loss would be held a second
    # time right after `swarm-placement start` gives the replicas back. So does the
    # surge that answered it: remembered past its trim, the loss would start a second
    # surge whenever the trimmed service briefly runs short (a replacement still
    # unassigned, a task still stopping). A loss after the surge began still counts.
    held = {s.id for s in snapshot.services if s.labels.get(OPERATION_LABEL) == Operation.HOLD}
    surged = {
        s.id: _since(s.labels)
        for s in snapshot.services
        if s.labels.get(OPERATION_LABEL) == Operation.SURGE
    }
    lost = {
        k: v
        for k, v in memory.lost.items()
        if now - v[1] < LOST_MEMORY_SECONDS
        and k not in held
        and not (k in surged and v[1] <= surged[k])
    }
    for service_id, per_node in memory.placement.items():
        count = sum(c for node_id, c in per_node.items() if node_id in went_down)
        if count:
            before, since = lost.get(service_id, (0, now))
            lost[service_id] = (before + count, since)
    return lost


def _downs(
    memory: Memory, snapshot: ClusterSnapshot, went_down: set[str], now: float
) -> dict[str, tuple[float, ...]]:
    """When each node went down lately (a flapping node's record)."""
    downs = {
        node_id: kept
        for node_id, times in memory.node_downs.items()
        if (kept := tuple(t for t in times if now - t < FLAP_MEMORY_SECONDS))
    }
    if not memory.started:
        downs = _remembered_downs(snapshot, now)
    for node_id in sorted(went_down):
        downs[node_id] = (*downs.get(node_id, ()), now)
    return downs


def _remembered_downs(snapshot: ClusterSnapshot, now: float) -> dict[str, tuple[float, ...]]:
    """At the first observation: the downs an earlier controller recorded, and a node that
    is down now (the one whose death restarted this controller, often) dated from its
    last change, unless a recorded down covers it. A spec change after the down makes
    that date later, and a down counted twice only makes damping more patient."""
    recorded = snapshot.mirror.node_downs if snapshot.mirror is not None else {}
    downs = {
        node_id: kept
        for node_id, times in recorded.items()
        if (kept := tuple(t for t in times if 0 <= now - t < FLAP_MEMORY_SECONDS))
    }
    for node in snapshot.nodes:
        if node.state is not NodeState.DOWN or not node.updated_at:
            continue
        at = min(node.updated_at, now)
        before = downs.get(node.id, ())
        if now - at < FLAP_MEMORY_SECONDS and not any(t >= at - SAME_DOWN_SECONDS for t in before):
            downs[node.id] = tuple(sorted((*before, at)))
    return downs


def _with_mirrored_moves(
    last_move: Mapping[str, float],
    left: Mapping[str, tuple[tuple[str, ...], float]],
    snapshot: ClusterSnapshot,
    now: float,
) -> tuple[Mapping[str, float], Mapping[str, tuple[tuple[str, ...], float]]]:
    """The moves this controller remembers, and the newer ones the mirror holds (another
    controller's, or its own before a restart). A time ahead of this clock (another
    machine's, or an edit) counts from now: it never holds a service longer than that."""
    mirrored = snapshot.mirror.service_moves if snapshot.mirror is not None else {}
    if not mirrored:
        return last_move, left
    moved, gone = dict(last_move), dict(left)
    for service_id, move in mirrored.items():
        at = min(move.at, now)
        if at > moved.get(service_id, -math.inf):
            moved[service_id] = at
        if move.left is not None:
            nodes, when = move.left[0], min(move.left[1], now)
            if when > gone.get(service_id, ((), -math.inf))[1]:
                gone[service_id] = (nodes, when)
    return moved, gone


def _overridden(snapshot: ClusterSnapshot, before: Mapping[str, float]) -> dict[str, float]:
    """The replica records an operator has scaled over, kept while each stands: seen
    now, remembered, or in the mirror (seen by another controller, or by this one before
    a restart)."""
    mirrored = snapshot.mirror.overridden if snapshot.mirror is not None else {}
    found: dict[str, float] = {}
    for service in snapshot.services:
        record = service.replica_record
        if record is None:
            continue
        if (
            service.replicas != record.written
            or before.get(service.id) == record.since
            or mirrored.get(service.id) == record_start(record.since)
        ):
            found[service.id] = record.since
    return found


def _since(labels: Mapping[str, str]) -> float:
    try:
        return float(labels.get(SINCE_LABEL, ""))
    except ValueError:
        return float("inf")  # an unreadable start settles every loss before it


def _placement(
    snapshot: ClusterSnapshot,
    before: Mapping[str, Mapping[str, int]],
    pending: set[str],
) -> dict[str, dict[str, int]]:
    """Active tasks per ready node, and what a node of unknown state held when last ready
    (Swarm has not given those tasks up: if it marks the node down they are the loss)."""
    placement = {k: dict(v) for k, v in active_placement(snapshot).items()}
    for service_id, per_node in before.items():
        for node_id in pending & per_node.keys():
            placement.setdefault(service_id, {})[node_id] = per_node[node_id]
    return placement
