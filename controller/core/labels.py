"""Names the controller writes into Swarm.

Operator settings live under `placement.`; everything the controller itself writes
(durable state, steering labels on nodes) lives under `swarm-placement.` so the two
can never collide and an operator can see at a glance what is ours.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

OWN_PREFIX = "swarm-placement."

# Service label: set once the controller has added its steering constraint.
ADOPTED_LABEL = OWN_PREFIX + "adopted"

# Service label: when the controller last wrote a service again to have Swarm's updater
# take out the extra task of a slot running two (core/rules/tidy.py).
TIDIED_LABEL = OWN_PREFIX + "tidied"

# Node label family: `swarm-placement.deny.<service>=true` keeps that service's tasks off
# the node. Missing labels compare as "", so the constraint below matches every node
# until the controller labels one: adding it restarts nothing.
DENY_LABEL_PREFIX = OWN_PREFIX + "deny."
DENY_VALUE = "true"


def deny_label(service_name: str) -> str:
    return DENY_LABEL_PREFIX + service_name


def steering_constraint(service_name: str) -> str:
    return f"node.labels.{deny_label(service_name)}!={DENY_VALUE}"


def is_own_label(key: str) -> bool:
    return key.startswith(OWN_PREFIX)


# Node label family for hard possible owners: the service's constraint requires it, so a
# node the controller has not labelled (a new one included) can never run the service.
POSSIBLE_LABEL_PREFIX = OWN_PREFIX + "possible."
POSSIBLE_VALUE = "true"

# Service label: the node IDs the controller currently excludes with `node.id!=ID`.
# Recorded in the same write as the constraints, so ours are always told from the
# operator's, even after a crash.
EXCLUDED_LABEL = OWN_PREFIX + "excluded"
# Service label: when the rebalancer excluded a node to take load off it (epoch seconds);
# the exclusion is lifted once move-cooldown has passed.
EXCLUDED_SINCE_LABEL = OWN_PREFIX + "excluded-since"


def possible_label(service_name: str) -> str:
    return POSSIBLE_LABEL_PREFIX + service_name


def possible_constraint(service_name: str) -> str:
    return f"node.labels.{possible_label(service_name)}=={POSSIBLE_VALUE}"


@lru_cache(maxsize=1 << 16)  # one string per node, shared by every service that excludes it
def exclusion_constraint(node_id: str) -> str:
    return f"node.id!={node_id}"


def excluded_nodes(labels: Mapping[str, str]) -> tuple[str, ...]:
    return _parse_exclusions(labels.get(EXCLUDED_LABEL, ""))


def excluded_node_set(labels: Mapping[str, str]) -> frozenset[str]:
    """The excluded nodes of a label set; a service's own are read once (`Service.excluded`)."""
    return frozenset(_parse_exclusions(labels.get(EXCLUDED_LABEL, "")))


def recorded_exclusions(labels: Mapping[str, str]) -> frozenset[str] | None:
    """The excluded nodes of a label set, or None when it has no such label (a service
    the controller never steered)."""
    raw = labels.get(EXCLUDED_LABEL)
    return None if raw is None else frozenset(_parse_exclusions(raw))


def _parse_exclusions(raw: str) -> tuple[str, ...]:
    return tuple(sorted(part for part in raw.split(",") if part))


def format_exclusions(node_ids: Iterable[str]) -> str:
    return ",".join(sorted(set(node_ids)))


@lru_cache(maxsize=4096)  # at rest a service excludes the same nodes cycle after cycle
def exclusion_constraints(excluded: frozenset[str]) -> tuple[str, ...]:
    """`node.id!=X` for each excluded node, in the order the controller writes them."""
    return tuple(map(exclusion_constraint, sorted(excluded)))


def is_own_constraint(text: str, service_name: str, labels: Mapping[str, str]) -> bool:
    """A constraint the controller may have written on the service."""
    if text.startswith(_EXCLUSION_PREFIX):
        return text[len(_EXCLUSION_PREFIX) :] in excluded_node_set(labels)
    return text in (steering_constraint(service_name), possible_constraint(service_name))


_EXCLUSION_PREFIX = exclusion_constraint("")


def operator_texts(
    service_name: str, labels: Mapping[str, str], constraints: tuple[str, ...]
) -> tuple[str, ...]:
    """The operator's constraints, in their order: the service's without the controller's.

    The controller writes its exclusions last, so at scale (thousands of them on a
    service) they are recognised by one tuple comparison rather than one by one.
    """
    return operators_of(service_name, excluded_node_set(labels), constraints)


def operators_of(
    service_name: str, excluded: frozenset[str], constraints: tuple[str, ...]
) -> tuple[str, ...]:
    """`operator_texts` with the excluded nodes already read (`Service.excluded`)."""
    ours = (steering_constraint(service_name), possible_constraint(service_name))
    return tuple(
        c
        for c in without_exclusions(constraints, excluded)
        if c not in ours
        and not (c.startswith(_EXCLUSION_PREFIX) and c[len(_EXCLUSION_PREFIX) :] in excluded)
    )


_OPERATOR = re.compile(r"(==|!=)")


def spaced_as_written(text: str) -> str:
    """A constraint as the controller writes it back: `node.role==manager` for
    `node.role == manager` (its key and value stripped, as Swarm reads them). One without
    an operator is left as it is (it cannot be read: core/constraints says why)."""
    parts = _OPERATOR.split(text, maxsplit=1)
    if len(parts) != 3:
        return text
    key, operator, value = parts
    return f"{key.strip()}{operator}{value.strip()}"


def without_exclusions(constraints: tuple[str, ...], excluded: frozenset[str]) -> tuple[str, ...]:
    """`constraints` without the `node.id!=X` of the excluded nodes."""
    ours = exclusion_constraints(excluded)
    rest = len(constraints) - len(ours)
    if rest >= 0 and constraints[rest:] == ours:
        return constraints[:rest]  # written last, as the controller does: one comparison
    drop = frozenset(ours)
    return tuple(c for c in constraints if c not in drop)
