"""Release: take back what the controller wrote, and nothing else.

A service leaves management (`placement.managed=false`, a policy that no longer selects
it, labels that never resolved) still carrying the controller's constraints: the
steering constraint, the possible-owner constraint that requires a node mark, and the
`node.id!=` exclusions recorded in `swarm-placement.excluded`. Its node marks may go
only once no constraint needs them (core/rules/nodes/possible_marks.py), so the
constraints go first, each release in its own write:

1. `ReleaseConstraints`: the operator's constraints exactly as they are (ours dropped,
   theirs kept in order) and our service labels removed. Dropping a constraint only
   widens placement, and a single spec write has no intermediate state: no task stops.
2. `ReleaseReplicas`: a replica count the controller changed goes back to the
   operator's recorded count, the record removed with it (a count the operator changed
   since stands; its record goes with step 1).

Both are distinct action kinds, and `release_refusal` checks one against the service as
observed: the guard lets an unmanaged service be written only by such a take-back.
`release_node` is `release --all`'s node half: every label of ours and a pause the
controller itself recorded, never an operator's pause or drain.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.actions import (
    Action,
    SetNodeAvailability,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
)
from controller.core.decisions import Decision, Outcome
from controller.core.health.node_marks import PAUSED, paused_for
from controller.core.kernel.mark_needs import MarkRequirements, required_on
from controller.core.labels import (
    is_own_constraint,
    is_own_label,
)
from controller.core.model import Availability, Node, Service, ServiceMode
from controller.core.replicas import (
    REPLICA_RECORD_LABELS,
    ReplicaRecord,
    operator_changed,
)
from controller.core.rules.release.name import RULE


@dataclass(frozen=True, slots=True)
class ReleaseConstraints(SetServiceConstraints):
    """Drop the controller's constraints and service labels; keep everything else."""

    kind = "release-constraints"


@dataclass(frozen=True, slots=True)
class ReleaseReplicas(SetReplicas):
    """Put back the operator's recorded replica count and remove the record."""

    kind = "release-replicas"


ReleaseAction = ReleaseConstraints | ReleaseReplicas


def _restorable(service: Service) -> tuple[ReplicaRecord | None, str | None]:
    """The record whose count a release puts back, or why the record is left alone."""
    if service.replica_record_error is not None:
        return None, service.replica_record_error
    record = service.replica_record
    if record is None or operator_changed(service, record):
        return None, None
    if service.mode is not ServiceMode.REPLICATED:
        return None, "a replica record on a service that is not replicated"
    return record, None


def release_service(service: Service) -> tuple[ReleaseAction | None, Decision | None]:
    """The next write that takes back what the controller wrote on `service`."""
    subject = f"service {service.name}"
    ours = tuple(
        c for c in service.constraints if is_own_constraint(c, service.name, service.labels)
    )
    labels = tuple(sorted(k for k in service.labels if is_own_label(k)))
    if not ours and not labels:
        return None, None
    if service.in_rollout:  # a write would resume or change it (not one of our own)
        return None, Decision(
            RULE,
            subject,
            Outcome.WAIT,
            f"Swarm's rollout is {service.update_state}: a write now would resume or change "
            "it; the release follows once it ends (the node marks its constraints need stay)",
        )
    record, unreadable = _restorable(service)
    keep = REPLICA_RECORD_LABELS if record is not None or unreadable is not None else ()
    drop = tuple(k for k in labels if k not in keep)
    if ours or drop:
        action: ReleaseAction = ReleaseConstraints(
            service_id=service.id,
            service_name=service.name,
            version=service.version,
            constraints=tuple(c for c in service.constraints if c not in ours),
            remove_labels=drop,
        )
        then = f"; its replica count {record.base} follows" if record is not None else ""
        return action, Decision(
            RULE,
            subject,
            Outcome.RELEASE,
            f"taking back the controller's {len(ours)} constraint(s) and {len(drop)} "
            "label(s), the operator's kept; dropping constraints only widens placement, so "
            f"no task stops, and node marks go once no constraint needs them{then}",
            action=action,
        )
    if record is not None:
        action = ReleaseReplicas(
            service_id=service.id,
            service_name=service.name,
            version=service.version,
            replicas=record.base,
            remove_labels=tuple(k for k in REPLICA_RECORD_LABELS if k in service.labels),
        )
        return action, Decision(
            RULE,
            subject,
            Outcome.RELEASE,
            f"replicas back to the operator's recorded {record.base} "
            f"(the controller's {record.operation} set {record.written}), record removed",
            action=action,
        )
    return None, Decision(
        RULE,
        subject,
        Outcome.KEEP,
        f"released but for its replica record, left for the operator: {unreadable}",
    )


def release_refusal(service: Service | None, action: Action) -> str | None:
    """Why `action` is not a pure take-back on `service` as observed; None if it is."""
    if not isinstance(action, ReleaseConstraints | ReleaseReplicas):
        return "the service is not managed by the controller"
    if service is None or service.id != action.service_id:
        return "release of a service that was not observed"
    if action.version != service.version:
        return f"release planned against version {action.version}, observed {service.version}"
    if action.set_labels or action.evicts_from:
        return "a release only removes: it sets no label and moves no task"
    foreign = [k for k in action.remove_labels if not is_own_label(k)]
    if foreign:
        return f"a release may remove only the controller's labels, not {foreign}"
    if isinstance(action, ReleaseReplicas):
        record, _ = _restorable(service)
        if record is None or action.replicas != record.base:
            return "a release may set replicas only to the operator's recorded count"
        return None
    dropped = _dropped(service.constraints, action.constraints)
    if dropped is None:
        return "a release may only drop constraints, keeping the rest in order"
    foreign = [c for c in dropped if not is_own_constraint(c, service.name, service.labels)]
    if foreign:
        return f"a release may drop only the controller's constraints, not {foreign}"
    return None


def _dropped(before: tuple[str, ...], after: tuple[str, ...]) -> list[str] | None:
    """What `after` leaves out of `before` if it is `before` with items dropped, in order."""
    dropped: list[str] = []
    rest = iter(after)
    wanted = next(rest, None)
    for item in before:
        if item == wanted:
            wanted = next(rest, None)
        else:
            dropped.append(item)
    return dropped if wanted is None else None


def release_node(
    node: Node, requirements: MarkRequirements
) -> tuple[Action | None, Decision | None]:
    """Every label of ours on `node` and a pause the controller recorded, taken back;
    a mark a service's constraint still requires stays (its release failed or waits)."""
    subject = f"node {node.hostname}"
    ours = {k for k in node.labels if is_own_label(k)}
    if not ours:
        return None, None
    needed = required_on(requirements, node)
    remove = tuple(sorted(ours - set(needed)))
    held = [f"{k} (required by {', '.join(v)})" for k, v in sorted(needed.items())]
    kept = f"; kept, still required: {'; '.join(held)}" if held else ""
    if not remove:
        return None, Decision(
            RULE, subject, Outcome.KEEP, f"every label of ours left is required{kept}"
        )
    action: Action
    if paused_for(node.labels) and node.availability is Availability.PAUSE:
        action = SetNodeAvailability(
            node_id=node.id,
            hostname=node.hostname,
            version=node.version,
            availability=Availability.ACTIVE,
            remove_labels=remove,
        )
        why = f"the controller paused it ({node.labels[PAUSED]}): active again, labels removed"
    else:
        action = SetNodeLabels(
            node_id=node.id, hostname=node.hostname, version=node.version, remove_labels=remove
        )
        why = "labels of the controller's removed (widens placement only)"
    return action, Decision(RULE, subject, Outcome.RELEASE, why + kept, action=action)
