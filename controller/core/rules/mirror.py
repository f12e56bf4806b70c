"""Mirror: keep a copy of what the controller wrote on every managed service (and the
nodes' recent downs, the services' recent moves and the replica records an operator
scaled over, core/memory), and put it back after a deploy.

A deploy (`docker stack deploy`, `docker service update`, any tool that sends a whole
spec) replaces a service's labels and constraints, and with them the controller's own:
what it decided, and why. Such a service is recognised by every label and constraint of
the controller's being gone from it while its copy in the mirror (core/mirror) still
holds them: a write of the controller's own always leaves at least the steering
constraint. It gets back, in one write:
- the copy's labels, so it keeps its policy outcome (`failback: never` keeps it where
  it failed over to), except a replica record: a deploy states the operator's count, and
  the operator's count wins over a preemption or hold (a decision says so);
- the controller's constraints that every node running a task of the service still
  satisfies, so putting them back moves no task; an exclusion of a node that runs a task
  since the deploy is dropped from the copy instead.

Runs after failover (a surge beats a recovery for the one write per service) and before
every rule that reads the controller's labels on a service.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.actions import Action, SetMirror, SetServiceConstraints
from controller.core.constraints import ConstraintError, parse_constraint
from controller.core.context import PlanContext, RuleOutput, RuleSpec
from controller.core.decisions import Decision, Outcome
from controller.core.labels import (
    EXCLUDED_LABEL,
    excluded_node_set,
    exclusion_constraint,
    format_exclusions,
)
from controller.core.mirror import (
    DOWNS_PREFIX,
    ENTRY_PREFIX,
    MIRROR_CONFIG,
    MOVES_PREFIX,
    OVERRIDDEN_PREFIX,
    Mirror,
    Move,
    ServiceCopy,
    copy_of,
    encode_downs,
    record_start,
)
from controller.core.model import ACTIVE_TASK_STATES, ClusterSnapshot, Service
from controller.core.replicas import (
    BASE_LABEL,
    OPERATION_LABEL,
    REPLICA_RECORD_LABELS,
    SET_LABEL,
    Operation,
)

RULE = "mirror"


def plan_mirror(ctx: PlanContext) -> RuleOutput:
    store = ctx.swarm.mirror
    if store is None:  # not observed (a snapshot file, a simulation): nothing to keep
        return RuleOutput()
    actions: list[Action] = []
    decisions: list[Decision] = []
    wanted: dict[str, str] = {}
    for service in ctx.managed_services():
        current = _copy_of(service)
        if not current.is_empty:
            wanted[service.id] = current.encode()
            continue
        if (unreadable := store.unreadable_copies.get(service.id)) is not None:
            decisions.append(Decision(RULE, f"service {service.name}", Outcome.SKIP, unreadable))
            continue
        saved = store.copies.get(service.id)
        if saved is None or saved.is_empty:
            continue
        wanted[service.id] = store.entries[service.id]  # kept until it has its labels back
        recovery = _recover(ctx.swarm, service, saved)
        actions.extend(recovery.actions)
        decisions.extend(recovery.decisions)
    overridden = {
        sid: record_start(since)
        for sid, since in sorted(ctx.memory.overridden.items())
        if sid in ctx.swarm.service_by_id
    }
    mirror = _mirror(store, wanted, ctx.memory.node_downs, _recent_moves(ctx), overridden)
    if mirror is not None:
        actions.append(mirror)
        decisions.append(
            Decision(
                RULE,
                f"config {MIRROR_CONFIG}",
                Outcome.MIRROR,
                "the managed services' copies, the nodes' recent downs, the services' "
                "recent moves and the replica records an operator scaled over, kept where "
                "neither a deploy nor a restart of the controller loses them",
                action=mirror,
            )
        )
    return RuleOutput(tuple(actions), tuple(decisions))


def _copy_of(service: Service) -> ServiceCopy:
    """The copy to keep: a surge's or a rebalance's replica record lives for a moment
    (copying it would add a write per failover), a preemption's or a hold's does not."""
    copy = copy_of(name=service.name, labels=service.labels, constraints=service.constraints)
    if copy.labels.get(OPERATION_LABEL) in (Operation.PREEMPT, Operation.HOLD):
        return copy
    labels = {k: v for k, v in copy.labels.items() if k not in REPLICA_RECORD_LABELS}
    return ServiceCopy(labels=labels, constraints=copy.constraints)


def _recent_moves(ctx: PlanContext) -> dict[str, str]:
    """Each service's last move while its cooldown or its way-back window (twice the
    cooldown, core/rules/rebalance) runs: what a new controller must not forget."""
    cooldown = ctx.policy.controller.move_cooldown_seconds
    memory, now = ctx.memory, ctx.now
    recent: dict[str, str] = {}
    for service_id, at in memory.last_move.items():
        left = memory.left.get(service_id)
        if service_id not in ctx.swarm.service_by_id:
            continue
        if now - at < cooldown or (left is not None and now - left[1] < 2 * cooldown):
            recent[service_id] = Move(at=at, left=left).encode()
    return recent


def _mirror(
    store: Mirror,
    wanted: Mapping[str, str],
    node_downs: Mapping[str, tuple[float, ...]],
    moves: Mapping[str, str],
    overridden: Mapping[str, str],
) -> SetMirror | None:
    have = store.entries
    put = {sid: raw for sid, raw in sorted(wanted.items()) if have.get(sid) != raw}
    drop = tuple(sorted(sid for sid in have if sid not in wanted))
    # A node's downs are written when it gains one, and dropped once memory has let go of
    # all of them: a down merely ageing writes nothing (the reader ignores old ones).
    encoded = {node_id: encode_downs(times) for node_id, times in sorted(node_downs.items())}
    put_downs = {
        node_id: raw
        for node_id, raw in encoded.items()
        if not set(raw.split(",")) <= set(store.downs.get(node_id, "").split(","))
    }
    drop_downs = tuple(sorted(n for n in store.downs if n not in node_downs))
    # A move is written once, and dropped once its windows are over: none ageing writes.
    put_moves = {sid: raw for sid, raw in sorted(moves.items()) if store.moves.get(sid) != raw}
    drop_moves = tuple(sorted(sid for sid in store.moves if sid not in moves))
    # A record scaled over is written the cycle it is seen, and dropped with the record.
    put_over = {s: v for s, v in overridden.items() if store.overridden.get(s) != v}
    drop_over = tuple(sorted(s for s in store.overridden if s not in overridden))
    sections = zip(
        (ENTRY_PREFIX, DOWNS_PREFIX, MOVES_PREFIX, OVERRIDDEN_PREFIX),
        ((put, drop), (put_downs, drop_downs), (put_moves, drop_moves), (put_over, drop_over)),
        strict=True,
    )
    save: dict[str, str] = {}
    gone: list[str] = []
    for prefix, (section_save, section_drop) in sections:
        save |= {prefix + key: raw for key, raw in section_save.items()}
        gone += [prefix + key for key in section_drop]
    if not save and not gone:
        return None  # also while there is nothing to keep: the config comes with the first
    return SetMirror(config_id=store.config_id, version=store.version, save=save, drop=tuple(gone))


def _recover(snapshot: ClusterSnapshot, service: Service, saved: ServiceCopy) -> RuleOutput:
    subject = f"service {service.name}"
    decisions: list[Decision] = []
    if BASE_LABEL in saved.labels:
        decisions.append(
            Decision(
                RULE,
                subject,
                Outcome.YIELD,
                f"a deploy set replicas to {service.replicas}: the operator's count wins over "
                f"the controller's replica record ({saved.labels.get(OPERATION_LABEL, '?')}, "
                f"operator's count {saved.labels[BASE_LABEL]}, "
                f"controller's {saved.labels.get(SET_LABEL, '?')})",
            )
        )
    if service.updating:
        decisions.append(
            Decision(
                RULE,
                subject,
                Outcome.WAIT,
                f"a deploy replaced the controller's labels and constraints; Swarm is rolling "
                f"it out ({service.update_state}), so they are put back once that ends",
            )
        )
        return RuleOutput(decisions=tuple(decisions))
    task_nodes = _task_nodes(snapshot, service.id)
    kept: list[str] = []
    dropped: list[str] = []
    for text in saved.constraints:
        if text in service.constraints:
            continue
        if _holds_everywhere(snapshot, text, task_nodes):
            kept.append(text)
        else:
            dropped.append(text)
    labels = {k: v for k, v in saved.labels.items() if k not in REPLICA_RECORD_LABELS}
    if EXCLUDED_LABEL in labels:
        still = {
            n
            for n in excluded_node_set(labels)
            if exclusion_constraint(n) in kept or exclusion_constraint(n) in service.constraints
        }
        labels[EXCLUDED_LABEL] = format_exclusions(still)
    action = SetServiceConstraints(
        service_id=service.id,
        service_name=service.name,
        version=service.version,
        constraints=(*service.constraints, *kept),
        set_labels=labels,
    )
    why = (
        "a deploy replaced the controller's labels and constraints; putting back its labels and "
        f"{len(kept)} constraint(s) that every node running a task satisfies, so no task moves"
    )
    if dropped:
        why += f" (not put back, a task runs where they would refuse it: {', '.join(dropped)})"
    decisions.append(Decision(RULE, subject, Outcome.RECOVER, why, action=action))
    return RuleOutput((action,), tuple(decisions))


def _task_nodes(snapshot: ClusterSnapshot, service_id: str) -> set[str]:
    return {
        t.node_id
        for t in snapshot.tasks_of(service_id)
        if t.node_id and t.desired_state in ACTIVE_TASK_STATES
    }


def _holds_everywhere(snapshot: ClusterSnapshot, text: str, node_ids: set[str]) -> bool:
    try:
        constraint = parse_constraint(text)
    except ConstraintError:
        return False
    for node_id in node_ids:
        node = snapshot.node_by_id.get(node_id)
        if node is None or not constraint.matches(node):
            return False
    return True


SPEC = RuleSpec(
    RULE,
    plan_mirror,
    outcomes=frozenset(
        {Outcome.MIRROR, Outcome.RECOVER, Outcome.SKIP, Outcome.WAIT, Outcome.YIELD}
    ),
)
