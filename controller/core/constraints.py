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
from dataclasses import dataclass

from controller.core.model import Node

_OPERATOR = re.compile(r"(==|!=)")


class ConstraintError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Constraint:
    key: str
    equal: bool
    value: str

    def matches(self, node: Node) -> bool:
        if self.key.lower() == "node.ip":
            return _ip_matches(node.addr, self.value) is self.equal
        return (_node_value(node, self.key).casefold() == self.value.casefold()) is self.equal

    def __str__(self) -> str:
        return f"{self.key}{'==' if self.equal else '!='}{self.value}"


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
    simple = {
        "node.id": node.id,
        "node.hostname": node.hostname,
        "node.role": node.role.value,
        "node.platform.os": node.platform_os,
        "node.platform.arch": node.platform_arch,
    }
    return simple[lowered]


def node_satisfies(node: Node, constraints: tuple[Constraint, ...]) -> bool:
    return all(c.matches(node) for c in constraints)
