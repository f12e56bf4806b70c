"""Health and placement intelligence from outside Swarm, as the planner sees it.

The runtime gathers these before each plan (webhook reports, plugin answers, node agent
reports, Swarm's own task history) and hands them over as frozen values inside the
snapshot: the planner reads them like any other observation and never asks for more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class HealthState(StrEnum):
    """A node's health as an outside source reports it, worst last."""

    OK = "ok"
    DEGRADED = "degraded"
    FAILED = "failed"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]


_SEVERITY = {HealthState.OK: 0, HealthState.DEGRADED: 1, HealthState.FAILED: 2}


@dataclass(frozen=True, slots=True)
class HealthReport:
    """The latest word of one source about one node; it lapses at `expires_at`."""

    node_id: str
    state: HealthState
    source: str  # "webhook", "plugin.<name>": letters, digits, '.', '-' and '_' only
    expires_at: float  # epoch seconds
    reason: str = ""


class WorkloadEventKind(StrEnum):
    FAILED = "failed"  # Swarm task history: the task ended in state failed
    UNHEALTHY = "unhealthy"  # a node agent saw health_status: unhealthy


@dataclass(frozen=True, slots=True)
class WorkloadEvent:
    """A task of a service failed or turned unhealthy on a node, at a time."""

    task_id: str
    service_id: str
    node_id: str
    at: float  # epoch seconds
    kind: WorkloadEventKind = WorkloadEventKind.FAILED
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PluginVeto:
    """A placement plugin forbids one service on one node."""

    plugin: str
    service_id: str
    node_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class LivenessSignal:
    """One independent signal's view of whether a node is alive (core/health/suspicion).

    `source`: "gossip" (the overlay's gossip peers), "probe" (a TCP connect to the node's
    address), "agent" (its node agent answers); `since`: when this signal last changed
    its mind, as the runtime saw it (epoch seconds)."""

    node_id: str
    source: str
    alive: bool
    since: float
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """A source of outside information that could not be read this cycle."""

    kind: str  # "plugin", "agent" or "probe" (the liveness probes of node addresses)
    name: str
    problem: str  # what went wrong, for the decision that says the controller went on


@dataclass(frozen=True, slots=True)
class PluginAdvice:
    """What the placement plugins that answered said, merged."""

    vetoes: tuple[PluginVeto, ...] = ()
    # Service id -> node id -> score (higher is better), summed over the plugins.
    scores: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # Plugins that answered this cycle, by name (to tell "no veto" from "no answer").
    answered: tuple[str, ...] = ()
