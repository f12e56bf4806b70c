"""What health assessment remembers between cycles: only what Swarm does not keep.

A node's ungraceful exits are seen only as transitions between two observations, so
they live here; a restarted controller starts counting afresh (it is only more patient).
Everything that decides something lasting (a failed node, a quarantine) is in labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class HealthMemory:
    # Node id -> when Swarm was first seen reporting it ready, for the nodes ready now
    # (whatever the health reports say); None before the first cycle.
    ready_since: Mapping[str, float] | None = None
    # Nodes that were drained by an operator when last seen ready: their exit is graceful.
    drained: frozenset[str] = frozenset()
    # Node id -> when it was seen leaving ungracefully (ready, then not, while not drained).
    exits: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    # Nodes last seen `unknown` after being ready: a new Raft leader had not heard from
    # them yet. One it then marks down (a healthy node that reported late is marked down
    # and ready again seconds later, measured) left with the leader, not by itself.
    unknown: frozenset[str] = frozenset()
