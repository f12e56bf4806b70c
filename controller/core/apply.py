"""Apply actions to a snapshot, as Swarm would apply the writes to specs.

Used to check plans (re-planning after applying must propose nothing) and as the spec
half of what-if simulation. Task movement is the scheduler's business and not modelled
here: a constraint or label change that evicts tasks leaves them in place.
"""

from __future__ import annotations

from dataclasses import replace

from controller.core.actions import (
    Action,
    SetMirror,
    SetNodeAvailability,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
)
from controller.core.mirror import Mirror, patched
from controller.core.model import ClusterSnapshot, Node, Service


def _merged(
    labels: dict[str, str], set_: dict[str, str], remove: tuple[str, ...]
) -> dict[str, str]:
    out = {k: v for k, v in labels.items() if k not in remove}
    out.update(set_)
    return out


def _apply_to_service(service: Service, action: Action) -> Service:
    bumped = service.version + 1
    match action:
        case SetServiceConstraints(constraints=constraints, set_labels=s, remove_labels=r):
            labels = _merged(dict(service.labels), dict(s), r)
            return replace(service, version=bumped, constraints=constraints, labels=labels)
        case SetReplicas(replicas=replicas, set_labels=s, remove_labels=r):
            labels = _merged(dict(service.labels), dict(s), r)
            return replace(service, version=bumped, replicas=replicas, labels=labels)
    return service


def _apply_to_node(node: Node, action: Action) -> Node:
    bumped = node.version + 1
    match action:
        case SetNodeLabels(set_labels=set_, remove_labels=remove):
            return replace(
                node, version=bumped, labels=_merged(dict(node.labels), dict(set_), remove)
            )
        case SetNodeAvailability(availability=availability, set_labels=s, remove_labels=r):
            labels = _merged(dict(node.labels), dict(s), r)
            return replace(node, version=bumped, availability=availability, labels=labels)
    return node


def apply_actions(snapshot: ClusterSnapshot, actions: tuple[Action, ...]) -> ClusterSnapshot:
    services = {s.id: s for s in snapshot.services}
    nodes = {n.id: n for n in snapshot.nodes}
    mirror = snapshot.mirror
    for action in actions:
        if isinstance(action, SetMirror):
            mirror = _apply_to_mirror(mirror, action)
        elif isinstance(action, SetNodeLabels | SetNodeAvailability):
            if action.node_id in nodes:
                nodes[action.node_id] = _apply_to_node(nodes[action.node_id], action)
        elif action.service_id in services:
            services[action.service_id] = _apply_to_service(services[action.service_id], action)
    return replace(
        snapshot,
        nodes=tuple(nodes[n.id] for n in snapshot.nodes),
        services=tuple(services[s.id] for s in snapshot.services),
        mirror=mirror,
    )


def _apply_to_mirror(mirror: Mirror | None, action: SetMirror) -> Mirror:
    labels = patched(mirror.labels() if mirror else {}, action.drop, action.save)
    return Mirror.from_labels(action.config_id or "mirror", action.version + 1, labels)
