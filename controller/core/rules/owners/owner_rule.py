"""Possible and preferred owners, failback, anti-affinity and fault-domain spread.

Services are planned one at a time, highest priority first, so a service sees where
the ones planned before it will be (for anti-affinity) rather than where they were.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from controller.core.actions import Action, SetServiceConstraints, target_of
from controller.core.constraints import ConstraintError
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Decision, Outcome
from controller.core.kernel.candidates import (
    Candidates,
    NodeIndex,
    domain_of,
    find_candidates,
    operator_constraints,
)
from controller.core.kernel.levels import level_for
from controller.core.kernel.local_data import data_stays
from controller.core.kernel.settling import downs_of, is_settled
from controller.core.labels import (
    EXCLUDED_LABEL,
    POSSIBLE_VALUE,
    format_exclusions,
    possible_constraint,
    possible_label,
)
from controller.core.model import Service, ServiceMode
from controller.core.rules.owners.assign import (
    NodeOrder,
    PlacementInputs,
    assign,
    node_order,
)
from controller.core.rules.owners.fits import Fits, room_for
from controller.core.rules.owners.name import RULE
from controller.core.rules.owners.owner_gaps import possible_gap_note
from controller.core.rules.owners.owner_moves import (
    finish_stop_first,
    is_stop_first,
    stop_first_move,
    surge_to_reduce,
)
from controller.core.rules.owners.owner_notes import explain_placement
from controller.core.rules.owners.owner_waits import (
    cooldown_left,
    current_counts,
    failback_due,
    failback_ready_nodes,
    move_in_flight,
    settle_wait,
)
from controller.core.rules.owners.stalled_moves import stalled_on
from controller.core.rules.owners.steer import Steering, steer
from controller.core.rules.owners.widen_only import opening_ready_nodes
from controller.policy import AntiAffinityMode, ServiceSettings


@dataclass
class _Projection:
    """Where services planned so far in this cycle will run: class -> node -> tasks.

    `pending` holds, per class, the current tasks of members not planned yet, so hard
    anti-affinity also keeps clear of them (a tie on one node goes to the member
    planned first: the higher priority).
    """

    by_class: dict[str, Counter[str]] = field(default_factory=dict)
    pending: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)

    def not_yet_planned(self, classes: tuple[str, ...], service_id: str) -> Counter[str]:
        total: Counter[str] = Counter()
        for name in classes:
            for other, counts in self.pending.get(name, {}).items():
                if other != service_id:
                    total.update(counts)
        return total

    def planned(self, classes: tuple[str, ...], service_id: str) -> None:
        for name in classes:
            self.pending.get(name, {}).pop(service_id, None)

    def mates(self, classes: tuple[str, ...]) -> Counter[str]:
        total: Counter[str] = Counter()
        for name in classes:
            total.update(self.by_class.get(name, Counter()))
        return total

    def add(self, classes: tuple[str, ...], placement: Mapping[str, int]) -> None:
        for name in classes:
            self.by_class.setdefault(name, Counter()).update(placement)


def plan_owners(ctx: PlanContext) -> RuleOutput:
    actions: list[Action] = []
    decisions: list[Decision] = []
    projection = _Projection()
    services = sorted(
        (s for s in ctx.managed_services() if s.mode is ServiceMode.REPLICATED),
        key=lambda s: (-ctx.settings(s.id).priority, s.name),
    )
    for service in services:
        for name in ctx.settings(service.id).anti_affinity:
            projection.pending.setdefault(name, {})[service.id] = Counter(
                current_counts(ctx, service)
            )
    shared = _Shared(ctx)
    written = {target_of(a) for a in ctx.planned}
    # Just after a Raft leader change Swarm calls every node `unknown` until it reports
    # to the new leader: steering from that view would exclude nodes that are fine (the
    # guards refuse the worst of it) and write again as each node reports. Swarm's own
    # failover, and the failover rule's surges, go on meanwhile.
    unknown = ctx.snapshot.unknown_hostnames
    for service in services:
        settings = ctx.settings(service.id)
        projection.planned(settings.anti_affinity, service.id)
        if not settings.steered:
            continue
        action, notes = _plan_one(
            ctx, service, settings, projection, shared, written=written, unknown=unknown
        )
        if action is not None:
            actions.append(action)
        decisions.extend(notes)
        decisions.extend(possible_gap_note(ctx, service, settings, shared.index, notes))
    placing = dict(shared.placing)
    return RuleOutput(
        tuple(actions),
        tuple(decisions),
        remember=(lambda memory: memory.with_placing(placing)) if placing else None,
    )


def _plan_one(
    ctx: PlanContext,
    service: Service,
    settings: ServiceSettings,
    projection: _Projection,
    shared: _Shared,
    *,
    written: set[tuple[str, str]],
    unknown: tuple[str, ...],
) -> tuple[Action | None, list[Decision]]:
    """Plan one steered service: its write (if any) and its decisions."""
    notes: list[Decision] = []
    if unknown and ("service", service.id) not in written:
        opening = opening_ready_nodes(ctx, service)
        if opening is not None:
            notes.append(
                Decision(
                    RULE,
                    f"service {service.name}",
                    Outcome.STEER,
                    f"a replica waits for a node while Swarm calls {', '.join(unknown)} "
                    "unknown, and only the controller's exclusions keep it off nodes that "
                    "take tasks now: they are dropped (placement only widens); steering "
                    "resumes once every node has reported",
                    action=opening,
                )
            )
            return opening, notes
    if unknown:
        notes.append(
            Decision(
                RULE,
                f"service {service.name}",
                Outcome.WAIT,
                f"Swarm calls {', '.join(unknown)} unknown (a new Raft leader has not "
                "heard from them yet): steering waits for every node's state",
            )
        )
        return None, notes
    if ("service", service.id) in written:
        # An earlier rule writes it this cycle (a surge, a recovered record): plan it
        # on the next one, from what that write leaves, and remember no move for it.
        notes.append(
            Decision(RULE, f"service {service.name}", Outcome.DEFER, "written this cycle already")
        )
        return None, notes
    action, found, placement = _plan_service(ctx, service, settings, projection, shared)
    notes.extend(found)
    # Mates keep clear of where this service will be and of where it still is.
    current = current_counts(ctx, service)
    projection.add(
        settings.anti_affinity,
        {n: max(placement.get(n, 0), current.get(n, 0)) for n in {*placement, *current}},
    )
    if action is not None:  # its targets' room is spoken for, this cycle
        shared.fits = shared.fits.taken(
            service, {n: c - current.get(n, 0) for n, c in placement.items()}
        )
    return action, notes


def _hard_excluded(
    service: Service, settings: ServiceSettings, projection: _Projection, current: Mapping[str, int]
) -> frozenset[str]:
    if settings.anti_affinity_mode is not AntiAffinityMode.HARD:
        return frozenset()
    planned = {n for n, c in projection.mates(settings.anti_affinity).items() if c}
    later = {
        n
        for n, c in projection.not_yet_planned(settings.anti_affinity, service.id).items()
        if c and not current.get(n)
    }
    return frozenset(planned | later)


class _Shared:
    """What every service planned in one cycle reads alike: built once per cycle."""

    def __init__(self, ctx: PlanContext) -> None:
        self._ctx = ctx
        self.load: Counter[str] = Counter(t.node_id for t in ctx.snapshot.tasks if t.node_id)
        self.hostname = {n.id: n.hostname for n in ctx.snapshot.nodes}
        self.node_ids = frozenset(self.hostname)  # steering takes set differences of it
        self.index = NodeIndex(ctx.snapshot.nodes)
        self._orders: dict[str | None, NodeOrder] = {}
        self.fits = Fits.observe(ctx.snapshot)  # less what this cycle's moves take
        # Service id -> the placement its move is heading to (None: forget it).
        self.placing: dict[str, tuple[Mapping[str, int], float] | None] = {}
        # Node id -> services planned so far that keep it as their standby.
        self.standbys: Counter[str] = Counter()
        level = level_for(ctx.policy.controller.aggressiveness)
        memory, now = ctx.memory, ctx.now
        self.returning = frozenset(
            n.id
            for n in ctx.snapshot.nodes
            if n.is_ready and downs_of(memory, n.id) and not is_settled(level, memory, n.id, now)
        )

    def heading(self, service: Service, destination: dict[str, int]) -> None:
        """Remember where the service's move is heading, since when it has been."""
        before = self._ctx.memory.placing.get(service.id)
        since = before[1] if before is not None and before[0] == destination else self._ctx.now
        self.placing[service.id] = (destination, since)

    def domain(self, level: str | None) -> Callable[[str], str] | None:
        if level is None:
            return None
        nodes, policy = self._ctx.snapshot.node_by_id, self._ctx.policy
        return lambda n: domain_of(nodes[n], level, policy)

    def order(self, level: str | None) -> NodeOrder:
        if level not in self._orders:
            self._orders[level] = node_order(
                self.hostname, load=self.load, hostname=self.hostname, domain=self.domain(level)
            )
        return self._orders[level]


def _allowed_now(service: Service, cands: Candidates) -> frozenset[str] | None:
    """The placeable nodes the service's recorded steering allows; None if never steered."""
    if EXCLUDED_LABEL not in service.labels:
        return None
    return cands.placeable - service.excluded


def _plan_service(
    ctx: PlanContext,
    service: Service,
    settings: ServiceSettings,
    projection: _Projection,
    shared: _Shared,
) -> tuple[Action | None, list[Decision], Mapping[str, int]]:
    subject = f"service {service.name}"
    notes: list[Decision] = []
    current = current_counts(ctx, service)
    try:
        constraints = operator_constraints(service)
    except ConstraintError as exc:
        notes.append(Decision(RULE, subject, Outcome.SKIP, f"cannot read its constraints: {exc}"))
        return None, notes, current
    finishing = finish_stop_first(ctx, service, current=current)
    if finishing is not None:
        action, note = finishing
        return action, [note], current
    cands = find_candidates(
        service,
        settings,
        ctx.snapshot.nodes,
        ctx.policy,
        constraints=constraints,
        hard_excluded=_hard_excluded(service, settings, projection, current),
        index=shared.index,
    )
    # Only nodes Swarm will accept a task on are targets: `room` (read as the placement
    # looks at nodes) lets a full node take no more. A full preferred owner is no target
    # for failback either, unless it holds the service's tasks: they keep their rank.
    room, full = room_for(service, cands.placeable, shared.fits, explain=cands.preferred)
    no_target = {n for n in full if not current.get(n)}
    fitting = replace(cands, placeable=cands.placeable - no_target) if no_target else cands
    failback_ready, failback_blocked = failback_ready_nodes(ctx, service, settings, fitting)
    busy = move_in_flight(ctx, service)
    if busy is not None:
        notes.append(Decision(RULE, subject, Outcome.WAIT, busy))
        return None, notes, current
    waiting = cooldown_left(ctx, service)
    last_move = ctx.memory.last_move.get(service.id)
    returned = frozenset(
        n
        for n in failback_ready
        if last_move is not None and ctx.memory.node_ready_since.get(n, -1.0) >= last_move
    )
    if waiting and failback_due(current, returned, cands):
        # A preferred owner came back after the last move (the failover's trim): failing
        # back has its own clock (failback-delay, the window), the cooldown must not hold
        # it for minutes more. A new placement (a policy change) still waits it out.
        waiting = None
    soft_mates = (
        projection.mates(settings.anti_affinity)
        if settings.anti_affinity_mode is AntiAffinityMode.SOFT
        else Counter()
    )
    nodes = ctx.snapshot.node_by_id
    level = settings.spread or None
    # A task whose data is on its node is not moved for the policy's preferences.
    data_reason = data_stays(service, settings)
    max_moves = 0 if data_reason else max(settings.max_unavailable, 0)
    inputs = PlacementInputs(
        replicas=service.replicas or 0,
        current=current,
        candidates=fitting,
        domain=shared.domain(level),
        mates=soft_mates,
        load=shared.load,
        hostname=shared.hostname,
        failback_ready=failback_ready,
        max_moves=0 if waiting else max_moves,
        order=shared.order(level),
        scores=ctx.snapshot.plugins.scores.get(service.id, {}),
        room=room,
        standbys=shared.standbys,
        allowed_now=_allowed_now(service, fitting),
        returning=shared.returning,
    )
    heading = ctx.memory.placing.get(service.id)
    target, since = heading if heading is not None else ({}, 0.0)
    ready_since = ctx.memory.node_ready_since
    if heading is not None and dict(current) == dict(target):
        shared.placing[service.id] = None  # arrived
    elif heading is not None and (waiting or failback_blocked) and max_moves:
        # The cooldown and the failback mode hold a new placement, not the rest of the one
        # the last move started (max-unavailable splits a placement into several moves):
        # while the destination is unchanged, and none of its nodes has gone down since
        # the placement began, the placement goes on.
        going_on = replace(
            inputs,
            failback_ready=failback_ready | (frozenset(target) & fitting.placeable),
            max_moves=max_moves,
        )
        settled = all(ready_since.get(n, float("inf")) <= since for n in target)
        if settled and _destination(going_on) == dict(target):
            inputs, waiting, failback_blocked = going_on, None, None
        else:
            shared.placing[service.id] = None
    result = assign(inputs)
    if waiting and max_moves:
        unheld = assign(replace(inputs, max_moves=max_moves))
        if dict(unheld.desired) != dict(result.desired):
            notes.append(
                Decision(RULE, subject, Outcome.KEEP, f"its tasks where they are: {waiting}")
            )
    if data_reason:
        unheld = assign(replace(inputs, max_moves=max(settings.max_unavailable, 1)))
        if dict(unheld.desired) != dict(result.desired):
            notes.append(
                Decision(RULE, subject, Outcome.KEEP, f"its tasks where they are: {data_reason}")
            )
    notes.extend(
        explain_placement(
            ctx,
            service,
            result=result,
            cands=cands,
            inputs=inputs,
            waiting=waiting,
            failback_blocked=failback_blocked,
            full=full,
        )
    )

    possible_wait = _possible_wait(ctx, service, cands, current, local=bool(data_reason))
    if possible_wait is not None:
        notes.append(Decision(RULE, subject, Outcome.WAIT, possible_wait))
    possible_ready = cands.possible is not None and possible_wait is None
    steering = steer(
        service_name=service.name,
        operator_constraints=[str(c) for c in constraints],
        assignment=result,
        current=current,
        all_nodes=shared.node_ids,
        prefers=settings.prefers,
        mode=ctx.policy.controller.steering,
        max_exclusions=ctx.policy.controller.steering_max_exclusions,
        possible=cands.possible,
        require_possible_label=possible_ready,
    )
    if steering.standby is not None:
        shared.standbys[steering.standby] += 1
    settling = settle_wait(
        ctx,
        settings,
        leaving={*steering.vacate, *steering.reduce},
        desired=result.desired,
        current=current,
        cands=cands,
    )
    if settling is not None:
        notes = [n for n in notes if n.outcome != Outcome.MOVE]
        notes.append(Decision(RULE, subject, Outcome.KEEP, f"its tasks where they are: {settling}"))
        return None, notes, current
    moved: tuple[Action | None, Decision] | None = None
    if steering.vacate and data_reason:
        return _keep_local_data(ctx, service, steering, notes, data_reason)
    if steering.vacate and is_stop_first(service):
        moved = stop_first_move(
            ctx,
            service,
            steering,
            current=current,
            desired=result.desired,
            fits=shared.fits,
            leaving=frozenset(steering.vacate) - cands.keepable,
        )
    elif steering.constraints == service.constraints:
        if not (steering.reduce and not steering.vacate):
            return None, notes, result.desired
        # Tasks over a node's share (after a failover, say) stay while moves are held, and
        # a move onto a preferred owner is a failback, whatever the share says.
        gains = [n for n, c in result.desired.items() if c > current.get(n, 0)]
        failback = failback_blocked if any(n in cands.preferred for n in gains) else None
        held = (
            data_reason
            or failback
            or waiting
            or ("max-unavailable is 0" if not inputs.max_moves else None)
        )
        if held is not None:
            hosts = ", ".join(nodes[n].hostname for n in steering.reduce)
            notes.append(
                Decision(RULE, subject, Outcome.KEEP, f"its extra task(s) on {hosts}: {held}")
            )
            return None, notes, current
        moved = surge_to_reduce(
            ctx,
            service,
            steering.reduce,
            current=current,
            desired=result.desired,
            fits=shared.fits,
        )
    if moved is not None:
        action, note = moved
        if action is None:  # the moves explained above are not made
            notes = [n for n in notes if n.outcome != Outcome.MOVE]
        notes.append(note)
        if action is not None:  # a step of the move: the rest follows, whatever the cooldown
            shared.heading(service, _destination(inputs))
        return action, notes, result.desired if action is not None else current
    action = SetServiceConstraints(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        constraints=steering.constraints,
        evicts_from=steering.vacate,
        set_labels={EXCLUDED_LABEL: format_exclusions(steering.excluded)},
    )
    stalled = stalled_on(ctx.snapshot, service)
    if steering.vacate:
        why = "steer Swarm to the desired placement"
        shared.heading(service, _destination(inputs))
    elif stalled:
        why = (
            f"call off the move onto {', '.join(sorted(nodes[n].hostname for n in stalled))}: "
            "every node the move allows went down before it finished; the tasks stay where "
            "they run"
        )
    elif steering.open_at_rest:
        why = (
            f"at rest, open: standby steering would exclude more than "
            f"{ctx.policy.controller.steering_max_exclusions} nodes (steering-max-exclusions), "
            "so Swarm fails over anywhere and the controller corrects it (no task moves)"
        )
    else:
        why = "keep Swarm's failover on the policy's nodes (no task moves)"
    notes.append(Decision(RULE, subject, Outcome.STEER, why, action=action))
    return action, notes, result.desired


def _possible_wait(
    ctx: PlanContext,
    service: Service,
    cands: Candidates,
    current: Mapping[str, int],
    *,
    local: bool,
) -> str | None:
    """Why the possible-owner constraint is not required yet, for a service that has
    possible owners: their labels are not all written, or it would stop tasks first (a
    stop-first task, or one whose data is on its node)."""
    if cands.possible is None:
        return None
    label = possible_label(service.name)
    nodes = ctx.snapshot.node_by_id
    if not all(nodes[n].labels.get(label) == POSSIBLE_VALUE for n in cands.possible):
        return "possible-owner labels are being written"
    if unmarked := _unmarked(ctx, service, current, local=local):
        if local:
            return (
                f"the possible-owner constraint follows once its task(s) on "
                f"{', '.join(unmarked)}, whose data is there, have left: required now, it "
                "would move them"
            )
        return (
            f"the possible-owner constraint follows once its stop-first task(s) on "
            f"{', '.join(unmarked)} have moved: required now, it would stop them first"
        )
    return None


def _unmarked(
    ctx: PlanContext, service: Service, current: Mapping[str, int], *, local: bool
) -> list[str]:
    """Hosts whose stop-first tasks of the service a new possible-owner constraint would
    reject (they lack its mark): Swarm's updater would stop each before its replacement
    starts. Until they have moved by surge, the exclusions alone keep the service on its
    possible owners. A task whose data is on its node is not moved at all (`local`).
    Empty when the constraint is already there: nothing changes then."""
    required = possible_constraint(service.name)
    if not (local or is_stop_first(service)) or required in service.constraints:
        return []
    label = possible_label(service.name)
    nodes = ctx.snapshot.node_by_id
    return sorted(
        nodes[n].hostname
        for n, count in current.items()
        if count and nodes[n].labels.get(label) != POSSIBLE_VALUE
    )


def _keep_local_data(
    ctx: PlanContext,
    service: Service,
    steering: Steering,
    notes: list[Decision],
    why: str,
) -> tuple[Action | None, list[Decision], Mapping[str, int]]:
    """Tasks with their data on nodes the service may not stay on (no possible owner,
    say) stay until they stop for another reason: the constraints keep those nodes
    allowed and leave out every other node the policy excludes, so no new task goes
    there."""
    subject = f"service {service.name}"
    nodes = ctx.snapshot.node_by_id
    hosts = ", ".join(sorted(nodes[n].hostname for n in steering.vacate))
    current = current_counts(ctx, service)
    notes = [n for n in notes if n.outcome != Outcome.MOVE]
    notes.append(
        Decision(
            RULE,
            subject,
            Outcome.KEEP,
            f"its task(s) on {hosts}, though the policy would move them: {why}; they leave "
            "when they stop for another reason (the node fails or is drained, or the "
            "operator moves them)",
        )
    )
    kept = steering.keeping(steering.vacate)
    if kept.constraints == service.constraints:
        return None, notes, current
    action = SetServiceConstraints(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        constraints=kept.constraints,
        set_labels={EXCLUDED_LABEL: format_exclusions(kept.excluded)},
    )
    notes.append(
        Decision(
            RULE,
            subject,
            Outcome.STEER,
            f"keep new tasks on the policy's nodes; the task(s) on {hosts} stay (no task moves)",
            action=action,
        )
    )
    return action, notes, current


def _destination(inputs: PlacementInputs) -> dict[str, int]:
    """Where the service ends once every permitted step is made (moves not capped)."""
    unlimited = inputs.replicas + sum(inputs.current.values())
    return dict(assign(replace(inputs, max_moves=unlimited)).desired)
