"""Swarm placement constraints, evaluated the way swarmkit's constraint filter does.

`key==value` / `key!=value`, ANDed; keys `node.id`, `node.hostname`, `node.ip`,
`node.role`, `node.platform.os`, `node.platform.arch`, `node.labels.*` and
`engine.labels.*`. A missing label compares as the empty string, so `!=` matches an
unlabelled node. Every value compares case-insensitively (swarmkit uses EqualFold), and
`node.ip` also accepts a CIDR.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from controller.core.model import Node, Task

_OPERATOR = re.compile(r"(==|!=)")


class ConstraintError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Constraint:
    key: str
    equal: bool
    value: str
    # Derived once: constraints are matched against every node, every cycle.
    _lower: str = field(init=False, repr=False, compare=False)
    _folded: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_lower", self.key.lower())
        object.__setattr__(self, "_folded", self.value.casefold())

    def matches(self, node: Node) -> bool:
        if self._lower == "node.ip":
            return _ip_matches(node.addr, self.value) is self.equal
        if self._lower.startswith("node.labels."):
            value = node.labels.get(self.key[len("node.labels.") :], "")
        else:
            value = _node_value(node, self.key)
        return (value.casefold() == self._folded) is self.equal

    def __str__(self) -> str:
        return f"{self.key}{'==' if self.equal else '!='}{self.value}"


@lru_cache(maxsize=1 << 16)  # the same strings come back every cycle; Constraint is frozen
def parse_constraint(text: str) -> Constraint:
    parts = _OPERATOR.split(text, maxsplit=1)
    if len(parts) != 3:
        raise ConstraintError(f"constraint {text!r} has no == or !=")
    key, operator, value = (part.strip() for part in parts)
    if not key or not _is_known_key(key):
        raise ConstraintError(f"constraint {text!r} has an unknown key {key!r}")
    return Constraint(key=key, equal=operator == "==", value=value)


def _is_known_key(key: str) -> bool:
    lowered = key.lower()
    return lowered in {
        "node.id",
        "node.hostname",
        "node.ip",
        "node.role",
        "node.platform.os",
        "node.platform.arch",
    } or lowered.startswith(("node.labels.", "engine.labels."))


def _ip_matches(addr: str, expected: str) -> bool:
    try:
        network = ipaddress.ip_network(expected, strict=False)
        return ipaddress.ip_address(addr) in network
    except ValueError:
        return False


def _node_value(node: Node, key: str) -> str:
    lowered = key.lower()
    if lowered.startswith("node.labels."):
        return node.labels.get(key[len("node.labels.") :], "")
    if lowered.startswith("engine.labels."):
        return node.engine_labels.get(key[len("engine.labels.") :], "")
    if lowered == "node.id":
        return node.id
    if lowered == "node.hostname":
        return node.hostname
    if lowered == "node.role":
        return node.role.value
    if lowered == "node.platform.os":
        return node.platform_os
    if lowered == "node.platform.arch":
        return node.platform_arch
    raise KeyError(key)


def node_satisfies(node: Node, constraints: tuple[Constraint, ...]) -> bool:
    return all(c.matches(node) for c in constraints)


def refused_tasks(
    tasks: Iterable[Task], nodes: Mapping[str, Node], constraints: tuple[Constraint, ...]
) -> Iterator[tuple[Task, Node]]:
    """The tasks on a known node that the constraints refuse, each with its node: what
    Swarm's constraint enforcer (or an updater's pass) would replace under them."""
    for task in tasks:
        node = nodes.get(task.node_id or "")
        if node is not None and not node_satisfies(node, constraints):
            yield task, node


@dataclass(frozen=True, slots=True)
class NodeFilter:
    """Constraints compiled to test many nodes: the `node.id!=` ones (the controller's
    exclusions: one per excluded node, so hundreds on a large swarm) become one set."""

    excluded_ids: frozenset[str]  # casefolded, as every value compares
    others: tuple[Constraint, ...]

    def __call__(self, node: Node) -> bool:
        return node.id.casefold() not in self.excluded_ids and all(
            c.matches(node) for c in self.others
        )


def node_filter(constraints: Iterable[Constraint]) -> NodeFilter:
    """A test equal to `node_satisfies(node, constraints)`, cheaper per node."""
    excluded: set[str] = set()
    others: list[Constraint] = []
    for constraint in constraints:
        if constraint.key.lower() == "node.id" and not constraint.equal:
            excluded.add(constraint.value.casefold())
        else:
            others.append(constraint)
    return NodeFilter(frozenset(excluded), tuple(others))
