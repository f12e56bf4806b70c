"""The possible-owner marks that services' constraints need on nodes.

A service limited to its possible owners carries `node.labels.swarm-placement.possible.
<name>==true`, and the nodes rule keeps that mark on every node a constraint still
requires: the nodes rule and a release read the same requirements, built once per cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.core.constraints import ConstraintError, parse_constraint
from controller.core.labels import POSSIBLE_LABEL_PREFIX, possible_label
from controller.core.model import Node, Service

MarkRequirements = Mapping[str, tuple[tuple[str | None, str], ...]]


def mark_requirements(
    services: Iterable[Service], unreadable: Iterable[str] = ()
) -> MarkRequirements:
    """Possible-owner marks that services' constraints require: label -> (value, service
    name) for each `node.labels.<label>==value`. Built once per cycle; a service without
    such a constraint costs one substring test per constraint. A service that could not
    be read (by name) may require its own mark with any value."""
    out: dict[str, list[tuple[str | None, str]]] = {}
    for service in services:
        for text in service.constraints:
            if POSSIBLE_LABEL_PREFIX not in text:
                continue
            try:
                constraint = parse_constraint(text)
            except ConstraintError:
                continue  # Swarm refuses such a constraint: it requires nothing
            if not (constraint.equal and constraint.key.lower().startswith("node.labels.")):
                continue
            label = constraint.key[len("node.labels.") :]
            if label.startswith(POSSIBLE_LABEL_PREFIX):
                out.setdefault(label, []).append((constraint.value.casefold(), service.name))
    for name in unreadable:
        out.setdefault(possible_label(name), []).append((None, name))
    return {label: tuple(reqs) for label, reqs in out.items()}


def required_on(requirements: MarkRequirements, node: Node) -> dict[str, list[str]]:
    """Marks on `node` that a constraint requires there: label -> the services' names."""
    out: dict[str, list[str]] = {}
    for label, value in node.labels.items():
        for wanted, name in requirements.get(label, ()):
            if wanted is None or value.casefold() == wanted:
                out.setdefault(label, []).append(name)
    return out
