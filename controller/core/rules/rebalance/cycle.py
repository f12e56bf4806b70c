"""The rebalance rule's working state for one cycle, and the checks every move passes.

A move needs: a service at rest and out of its cooldown, not placed by the owners rule,
with max-unavailable above 0; an imbalance seen for the level's cycles; a trigger the
mode allows (a join or return, or a periodic round); and targets that are not nodes the
service's tasks just left, chosen by room that does not hang on Swarm's tie-breaks for
the moves planned before it in the cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.actions import Action
from controller.core.clock import time_of_day
from controller.core.context import PlanContext
from controller.core.counts import active_counts, placement_room
from controller.core.decisions import Decision, Outcome
from controller.core.kernel.ledger import AvailabilityLedger
from controller.core.kernel.levels import Level
from controller.core.model import Resources, Service
from controller.core.rules.rebalance.load import Load, task_demand
from controller.core.rules.rebalance.name import RULE
from controller.core.rules.rebalance.triggers import Joins, streak
from controller.policy import RebalanceMode


@dataclass
class RebalanceCycle:
    """What the rule has planned so far this cycle, and what it may still spend."""

    ctx: PlanContext
    level: Level
    joins: Joins
    round_now: bool
    loads: dict[str, Load]
    # The one disruption budget (core/budget), less what earlier rules planned: the rule
    # spends it as it plans, so it proposes only what the guards will let through.
    budget: AvailabilityLedger
    actions: list[Action] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    joins_used: dict[str, float] = field(default_factory=dict)
    written: set[str] = field(default_factory=set)
    # Node id -> reservations of the tasks moves planned this cycle may start there.
    promised: dict[str, Resources] = field(default_factory=dict)
    # Node id -> reservations of the tasks moves planned this cycle may stop there.
    released: dict[str, Resources] = field(default_factory=dict)

    def promise(self, service: Service, at_most: Mapping[str, int]) -> None:
        """Reserve room for a planned move on every node that may receive it, as much as
        it may get: Swarm's tie-breaks are not known."""
        _charge(self.promised, service, at_most)

    def release(self, service: Service, at_most: Mapping[str, int]) -> None:
        """Note the room a planned move may free on every node it may take tasks from,
        as much as it may take."""
        _charge(self.released, service, at_most)

    def room_bounds(
        self, service: Service, counts: Mapping[str, int]
    ) -> tuple[dict[str, int], dict[str, int]]:
        """The service's room on each node with the least and with the most the moves
        planned so far may leave (raises ConstraintError as placement_room does)."""
        snapshot = self.ctx.snapshot
        least = placement_room(snapshot, service, counts, promised=self.promised)
        most = placement_room(snapshot, service, counts, released=self.released)
        return least, most

    def note(
        self, subject: str, outcome: Outcome, reason: str, action: Action | None = None
    ) -> None:
        self.decisions.append(Decision(RULE, subject, outcome, reason, action))

    def host(self, node_id: str) -> str:
        node = self.ctx.snapshot.node_by_id.get(node_id)
        return node.hostname if node else node_id

    def hosts(self, node_ids: frozenset[str] | set[str]) -> str:
        return ", ".join(sorted(self.host(n) for n in node_ids))

    def add(self, service: Service, action: Action, outcome: Outcome, reason: str) -> None:
        self.actions.append(action)
        self.written.add(service.id)
        self.note(f"service {service.name}", outcome, reason, action)


def _charge(by_node: dict[str, Resources], service: Service, tasks: Mapping[str, int]) -> None:
    for node_id, count in tasks.items():
        extra = Resources()
        for _ in range(count):
            extra = extra + service.reservations
        by_node[node_id] = by_node.get(node_id, Resources()) + extra


def unsettled(cycle: RebalanceCycle, service: Service) -> str | None:
    """Why the service is not at rest (a move now could compound one under way)."""
    if service.in_rollout:
        return f"Swarm is rolling an update ({service.update_state})"
    if service.replica_record_error is not None:
        return service.replica_record_error
    record = service.replica_record
    if record is not None:
        return f"a replica operation ({record.operation}) is in flight"
    snapshot = cycle.ctx.snapshot
    live = snapshot.live_node_ids  # as the availability ledger counts what runs
    running = sum(1 for t in snapshot.tasks_of(service.id) if t.is_running and t.node_id in live)
    active = sum(active_counts(snapshot, service.id).values())
    if running != (service.replicas or 0) or active != running:
        return f"{running} of {service.replicas} tasks running"
    return None


def blocked(cycle: RebalanceCycle, service: Service) -> tuple[Outcome, str] | None:
    """(outcome, reason) when the service may not be moved now, else None."""
    ctx = cycle.ctx
    settings = ctx.settings(service.id)
    if settings.steered:
        return Outcome.SKIP, (
            "placed by the owners rule (preferred or possible owners, spread or "
            "anti-affinity), which moves it itself"
        )
    if settings.max_unavailable <= 0:
        return Outcome.SKIP, "max-unavailable is 0: the controller never stops its tasks"
    restless = unsettled(cycle, service)
    if restless is not None:
        return Outcome.WAIT, restless
    last = ctx.memory.last_move.get(service.id)
    cooldown = ctx.policy.controller.move_cooldown_seconds
    if last is not None and ctx.now - last < cooldown:
        return Outcome.WAIT, f"moved at {time_of_day(last)}, cooldown {cooldown:.0f} s"
    return None


def forbidden(ctx: PlanContext, service: Service) -> frozenset[str]:
    """Nodes the service's tasks left through a controller move and may not go straight
    back to: for twice the cooldown, unless the node went down (and came back) since.
    Told by the node's downs, which survive a restart in the mirror as the move does: a
    new controller dates every node's readiness from its first look."""
    found = ctx.memory.left.get(service.id)
    if found is None:
        return frozenset()
    nodes, when = found
    if ctx.now - when >= 2 * ctx.policy.controller.move_cooldown_seconds:
        return frozenset()
    downs = ctx.memory.node_downs
    return frozenset(n for n in nodes if not any(t >= when for t in downs.get(n, ())))


def gate(cycle: RebalanceCycle, nodes: frozenset[str] | None) -> tuple[frozenset[str] | None, str]:
    """Whether the mode lets rebalancing act now: the join nodes that allow it (empty for a
    periodic round), or None and why not. `nodes`: joins that count (None: any)."""
    mode = cycle.ctx.policy.controller.rebalance_mode
    if mode is RebalanceMode.OFF:
        return None, "rebalance-mode is off"
    if cycle.round_now:
        return frozenset(), ""
    joined = frozenset(n for n in cycle.joins.active if nodes is None or n in nodes)
    if joined:
        return joined, ""
    for notes in (cycle.joins.damped, cycle.joins.settling):
        found = [why for n, why in sorted(notes.items()) if nodes is None or n in nodes]
        if found:
            return None, found[0]
    if mode is RebalanceMode.PERIODIC:
        return None, "waiting for the next periodic round"
    return None, "rebalance-mode is on-join and no node joined or returned recently"


def persisted(cycle: RebalanceCycle, key: str) -> bool:
    cycle.seen.add(key)
    return streak(cycle.ctx.memory, key) + 1 >= cycle.level.persist_cycles


def receiver_loads(
    cycle: RebalanceCycle, service: Service, at_most: Mapping[str, int]
) -> dict[str, Load]:
    """Loads of the nodes that may receive new tasks, each charged the most it may get."""
    nodes = cycle.ctx.snapshot.node_by_id
    out: dict[str, Load] = {}
    for node_id, most in at_most.items():
        if node_id in cycle.loads:
            one = task_demand(cycle.ctx.snapshot, service, nodes[node_id]).on(nodes[node_id])
            out[node_id] = cycle.loads[node_id] + one.times(most)
    return out
