"""Every label of ours on a node, and its availability, in one write per node per cycle.

What a node should carry is computed from all its reasons at once: possible-owner marks
(the owners' hard constraint), health marks, quarantine, deny labels (failed or degraded
node, a service failing there, a plugin veto) and workload-health marks. One write per
node keeps every change version-checked against what was observed; it runs first, so
evictions land before failover's surge that replaces the evicted tasks at once. The
controller pauses no node in Swarm (see _pause).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.core.actions import Action, SetNodeAvailability, SetNodeLabels
from controller.core.clock import utc_time
from controller.core.context import PlanContext, RuleOutput
from controller.core.decisions import Decision, Outcome
from controller.core.guards import eviction_waits_for_rollout
from controller.core.health.assess import NodeVerdict
from controller.core.health.node_marks import (
    HEALTH_PREFIX,
    PAUSED,
    QUARANTINE_REASON,
    QUARANTINE_UNTIL,
    HealthMark,
    clean_reason,
    format_paused,
    health_key,
    paused_for,
    read_health_marks,
    unhealthy_key,
    unhealthy_marks,
)
from controller.core.kernel.ledger import AvailabilityLedger
from controller.core.labels import DENY_LABEL_PREFIX, DENY_VALUE, deny_label, possible_label
from controller.core.model import Availability, ClusterSnapshot, Node, Service
from controller.core.rules.nodes.deny import denied_on, plan_denials
from controller.core.rules.nodes.name import RULE
from controller.core.rules.nodes.possible_marks import MarkChange, possible_marks
from controller.core.rules.nodes.workload import plan_move_offs

# A health mark is rewritten when its end moves by more than this (a source repeating
# its report with a fresh ttl would otherwise write the node every time).
UNTIL_SLACK_SECONDS = 5.0


@dataclass
class _Change:
    put: dict[str, str] = field(default_factory=dict)
    drop: set[str] = field(default_factory=set)
    availability: Availability | None = None
    evicts: list[str] = field(default_factory=list)
    # Service id -> the labels this write sets or drops that stop its tasks here.
    evicting: dict[str, set[str]] = field(default_factory=dict)
    why: list[str] = field(default_factory=list)


def plan_nodes(ctx: PlanContext) -> RuleOutput:
    observed = ctx.swarm
    managed = ctx.managed_services()
    settings = {s.id: ctx.settings(s.id) for s in managed}
    # One blast-radius count per service: the node-wide inputs the health assessment acted
    # on, then its move-offs, then the plugins' vetoes (core/kernel/blast_radius.py).
    radii = {s.id: ctx.health.radius.for_service(observed, s) for s in managed}
    move_offs = plan_move_offs(
        snapshot=ctx.snapshot,
        services=managed,
        thresholds={s.name: settings[s.id].failover_threshold for s in managed},
        memory=ctx.memory,
        now=ctx.now,
        radii=radii,
    )
    denials = plan_denials(
        observed=observed,
        effective=ctx.snapshot,
        assessment=ctx.health,
        managed=managed,
        settings=settings,
        batch=ctx.policy.controller.budgets.actions_per_node,
        move_offs=move_offs.wanted,
        vetoes=ctx.snapshot.plugins.vetoes,
        radii=radii,
    )
    marks = possible_marks(ctx)
    decisions: list[Decision] = [*move_offs.decisions, *denials.decisions]
    decisions.extend(_kept_marks(observed, marks))
    actions: list[Action] = []
    by_name = {s.name: s for s in managed}
    ledger = ctx.budget()
    for node in observed.nodes:
        change = _Change()
        _health(change, node, ctx.health.verdict(node))
        _quarantine(change, node, ctx.health.verdict(node))
        _pause(change, node, ctx.health.verdict(node))
        _deny(change, node, denials.wanted.get(node.id, {}), by_name, observed)
        _unhealthy(change, node, move_offs.wanted.get(node.id, {}))
        _marks(change, marks.get(node.id), managed)
        held = "; ".join(
            filter(
                None,
                (_after_rollouts(change, observed), _within_ledger(change, node, ledger, observed)),
            )
        )
        _evict_first(change, node)
        action = _action(node, change)
        if action is None:
            if held:
                decisions.append(Decision(RULE, f"node {node.hostname}", Outcome.WAIT, held))
            continue
        ledger.spend(action)
        actions.append(action)
        decisions.append(
            Decision(RULE, f"node {node.hostname}", Outcome.LABEL, "; ".join(change.why), action)
        )
    return RuleOutput(tuple(actions), tuple(decisions))


def _within_ledger(
    change: _Change, node: Node, ledger: AvailabilityLedger, observed: ClusterSnapshot
) -> str:
    """Keep only the evictions the availability ledger allows now (core/kernel/ledger):
    a service whose tasks here would take it past max-unavailable, counting what is down
    already (a replica moved off another node a moment ago, still starting), keeps its
    tasks here this cycle; the rest of the write (a pause, health marks) goes, so a
    degraded node takes no new task meanwhile. Returns what was held back, as said."""
    allowed: list[str] = []
    held: list[str] = []
    for service_id in sorted(set(change.evicts)):
        probe = SetNodeLabels(
            node_id=node.id,
            hostname=node.hostname,
            version=node.version,
            evicts_services=(*allowed, service_id),
        )
        refusal = ledger.refusal(probe)
        if refusal is None:
            allowed.append(service_id)
            continue
        _hold(change, service_id)
        name = observed.service_by_id[service_id].name
        held.append(f"{name} keeps its tasks here for now ({refusal})")
    change.why.extend(held)
    change.evicts = allowed
    return "; ".join(held)


def _after_rollouts(change: _Change, observed: ClusterSnapshot) -> str:
    """A service in a rollout keeps its tasks here until Swarm finishes it (a task
    stopped now is replaced from the spec being rolled out); the rest of the write (the
    report's mark, a pause, the other services' evictions) goes, so the report is in
    force. Returns what was held back, as said."""
    held: list[str] = []
    for service_id in sorted(set(change.evicts)):
        service = observed.service_by_id.get(service_id)
        if service is None or not service.in_rollout:
            continue
        _hold(change, service_id)
        change.evicts = [s for s in change.evicts if s != service_id]
        held.append(eviction_waits_for_rollout(service))
    change.why.extend(held)
    return "; ".join(held)


def _hold(change: _Change, service_id: str) -> None:
    """Take the service's evicting labels out of the write."""
    for label in change.evicting.get(service_id, ()):
        if change.put.pop(label, None) is None:
            change.drop.discard(label)


def _evict_first(change: _Change, node: Node) -> None:
    """Swarm's constraint enforcer leaves a node alone while it is not active (swarmkit
    skips paused nodes): a node an operator paused keeps its refused tasks until it is
    active again, and the decision says so."""
    if change.evicts and node.availability is Availability.PAUSE and not paused_for(node.labels):
        change.why.append(
            "paused by an operator: Swarm evicts nothing there until it is active again"
        )


def _same(current: HealthMark | None, wanted: HealthMark) -> bool:
    return (
        current is not None
        and current.state is wanted.state
        and current.reason == clean_reason(wanted.reason)
        and abs(current.until - wanted.until) <= UNTIL_SLACK_SECONDS
    )


def _health(change: _Change, node: Node, verdict: NodeVerdict) -> None:
    current = {r.source: r for r in read_health_marks(node.labels)}
    for key in node.labels:
        source = key.removeprefix(HEALTH_PREFIX)
        if key.startswith(HEALTH_PREFIX) and source not in verdict.marks:
            change.drop.add(key)
            change.why.append(f"health from {source} is ok or lapsed")
    for source, mark in sorted(verdict.marks.items()):
        if not _same(current.get(source), mark):
            change.put[health_key(source)] = mark.value()
            change.why.append(f"{source} reports {mark.state.value} until {utc_time(mark.until)}")


def _quarantine(change: _Change, node: Node, verdict: NodeVerdict) -> None:
    if verdict.quarantine_reason and verdict.quarantine_until is not None:
        change.put[QUARANTINE_UNTIL] = f"{verdict.quarantine_until:.3f}"
        change.put[QUARANTINE_REASON] = clean_reason(verdict.quarantine_reason)
        change.why.append(f"quarantined until {utc_time(verdict.quarantine_until)}")


def _pause(change: _Change, node: Node, verdict: NodeVerdict) -> None:
    """The controller never pauses a node in Swarm: a pause keeps the tasks of every
    service away, those it does not manage too (an unmanaged global service's task, an
    unmanaged service failing over). The rules see a node held for health paused
    (Assessment.effective), and deny labels keep the managed services it refuses off
    it. A node an earlier version paused is set active again."""
    ours = paused_for(node.labels)
    if not ours:
        return
    change.drop.add(PAUSED)
    if node.availability is Availability.PAUSE:
        change.availability = Availability.ACTIVE
    held = f"; still held for the rules ({format_paused(verdict.pause)})" if verdict.pause else ""
    change.why.append(f"released (the controller no longer pauses nodes in Swarm{held})")


def _deny(
    change: _Change,
    node: Node,
    wanted: dict[str, str],
    by_name: dict[str, Service],
    observed: ClusterSnapshot,
) -> None:
    have = denied_on(node.labels)
    stale = {
        k
        for k, v in node.labels.items()
        if k.startswith(DENY_LABEL_PREFIX)
        and (k.removeprefix(DENY_LABEL_PREFIX) not in wanted or v != DENY_VALUE)
    }
    if stale:
        change.drop.update(stale)
        names = sorted(k.removeprefix(DENY_LABEL_PREFIX) for k in stale)
        change.why.append(f"{', '.join(names)} may run here again")
    reasons: dict[str, list[str]] = {}
    for name, why in sorted(wanted.items()):
        if name in have:
            continue
        change.put[deny_label(name)] = DENY_VALUE
        reasons.setdefault(why, []).append(name)
        service = by_name.get(name)
        if service is not None and observed.held_placement.get(service.id, {}).get(node.id):
            change.evicts.append(service.id)
            change.evicting.setdefault(service.id, set()).add(deny_label(name))
    for why, names in sorted(reasons.items()):
        change.why.append(f"refuse {', '.join(names)} ({why})")


def _unhealthy(change: _Change, node: Node, wanted: dict[str, float]) -> None:
    have = unhealthy_marks(node.labels)
    for name in sorted(set(have) - set(wanted)):
        change.drop.add(unhealthy_key(name))
    for name, since in sorted(wanted.items()):
        if name not in have:
            change.put[unhealthy_key(name)] = f"{since:.3f}"


def _marks(change: _Change, marks: MarkChange | None, managed: tuple[Service, ...]) -> None:
    if marks is None or not (marks.add or marks.remove):
        return  # only kept or moving marks: said by _kept_marks
    change.put.update(marks.add)
    change.drop.update(marks.remove)
    change.evicts.extend(e for e in marks.evicts if e not in change.evicts)
    names = {s.id: s.name for s in managed}
    for service_id in marks.evicts:
        label = possible_label(names[service_id])
        change.evicting.setdefault(service_id, set()).add(label)
    change.why.append(
        "possible-owner marks follow the policy; a mark no constraint requires any more goes"
    )


def _kept_marks(observed: ClusterSnapshot, marks: dict[str, MarkChange]) -> list[Decision]:
    out = []
    for node in observed.nodes:
        change = marks.get(node.id)
        for label, names in sorted(change.kept.items() if change else ()):
            out.append(
                Decision(
                    RULE,
                    f"node {node.hostname}",
                    Outcome.KEEP,
                    f"{label} stays while a constraint requires it ({', '.join(names)}): "
                    "removing it would stop their tasks here; it goes once they are released",
                )
            )
        for label, name in sorted(change.moving.items() if change else ()):
            out.append(
                Decision(
                    RULE,
                    f"node {node.hostname}",
                    Outcome.KEEP,
                    f"{label} stays while {name} still runs tasks here: removing it would "
                    "stop them before their replacements start; it goes once they have moved",
                )
            )
    return out


def _action(node: Node, change: _Change) -> Action | None:
    remove = tuple(sorted(k for k in change.drop if k in node.labels and k not in change.put))
    to_set = {k: v for k, v in sorted(change.put.items()) if node.labels.get(k) != v}
    evicts = tuple(sorted(set(change.evicts)))
    if change.availability is not None and change.availability is not node.availability:
        return SetNodeAvailability(
            node_id=node.id,
            hostname=node.hostname,
            version=node.version,
            availability=change.availability,
            set_labels=to_set,
            remove_labels=remove,
            evicts_services=evicts,
        )
    if not to_set and not remove:
        return None
    return SetNodeLabels(
        node_id=node.id,
        hostname=node.hostname,
        version=node.version,
        set_labels=to_set,
        remove_labels=remove,
        evicts_services=evicts,
    )
