"""Names the controller writes into Swarm.

Operator settings live under `placement.`; everything the controller itself writes
(durable state, steering labels on nodes) lives under `swarm-placement.` so the two
can never collide and an operator can see at a glance what is ours.
"""

from __future__ import annotations

OWN_PREFIX = "swarm-placement."

# Service label: set once the controller has added its steering constraint.
ADOPTED_LABEL = OWN_PREFIX + "adopted"

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
