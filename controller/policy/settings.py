"""Resolved settings: what the rules read once file rules and labels are merged.

These are plain frozen values with defaults filled in; parsing and provenance live in
the loader. Durations are seconds, times of day are minutes after midnight.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

PRIORITY_HIGH = 3000
PRIORITY_MEDIUM = 2000
PRIORITY_LOW = 1000
PRIORITY_NONE = 0


class FailbackMode(StrEnum):
    NEVER = "never"
    IMMEDIATE = "immediate"
    WINDOW = "window"


class AntiAffinityMode(StrEnum):
    SOFT = "soft"
    HARD = "hard"


class SteeringMode(StrEnum):
    """What a service with preferred owners may use at rest, besides its targets."""

    STANDBY = "standby"  # one standby node: Swarm fails over natively to the next owner
    STRICT = "strict"  # nothing: a lost replica waits for the controller to widen the set
    OPEN = "open"  # every node: Swarm fails over anywhere, the controller corrects later


class FailoverMode(StrEnum):
    """When a service's replicas on a lost node are replaced."""

    CONFIRMED = "confirmed"  # once Swarm (or the webhook) says the node is down
    SPECULATIVE = "speculative"  # already while the node is only suspected, without a stop
    # Speculative where a second copy for a while is harmless by the service's own spec
    # (replicated, more than one task allowed per node); confirmed for the rest.
    AUTO = "auto"


class DataMode(StrEnum):
    """Whether a service's data follows its tasks when the controller moves them."""

    # Local when the service mounts a named volume of the local driver or a bind mount
    # (the data stays on the node), shared otherwise.
    AUTO = "auto"
    LOCAL = "local"  # on the node: the controller starts no move of its tasks
    SHARED = "shared"  # reached from any node (a volume plugin, NFS, a replicated store)


class RebalanceMode(StrEnum):
    OFF = "off"
    ON_JOIN = "on-join"
    PERIODIC = "periodic"


@dataclass(frozen=True, slots=True)
class FailbackWindow:
    """A daily window [start, end) in minutes after midnight; may wrap past midnight."""

    start_minute: int
    end_minute: int

    def contains(self, minute_of_day: int) -> bool:
        if self.start_minute <= self.end_minute:
            return self.start_minute <= minute_of_day < self.end_minute
        return minute_of_day >= self.start_minute or minute_of_day < self.end_minute


@dataclass(frozen=True, slots=True)
class FailoverThreshold:
    failures: int
    period_seconds: float


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    """The effective placement settings of one service."""

    managed: bool = False
    priority: int = PRIORITY_MEDIUM
    preferred_nodes: tuple[str, ...] = ()
    possible_nodes: tuple[str, ...] = ()  # empty: every node is possible
    failback: FailbackMode = FailbackMode.NEVER
    failback_window: FailbackWindow | None = None
    failback_delay_seconds: float = 60.0
    anti_affinity: tuple[str, ...] = ()
    anti_affinity_mode: AntiAffinityMode = AntiAffinityMode.SOFT
    spread: str | None = None  # a fault-domain level name, e.g. "rack"
    preemptible: bool = True
    max_unavailable: int = 1
    failover_threshold: FailoverThreshold | None = None
    rebalance: bool = False
    failover_mode: FailoverMode = FailoverMode.AUTO
    data: DataMode = DataMode.AUTO

    @property
    def prefers(self) -> bool:
        """Preferred owners, spread or anti-affinity: the owners rule chooses the nodes its
        tasks run on, and steers them there. Possible owners alone only bound where Swarm
        places them."""
        return bool(self.preferred_nodes or self.spread or self.anti_affinity)

    @property
    def steered(self) -> bool:
        """A preference or possible owners: the owners rule steers its placement."""
        return self.prefers or bool(self.possible_nodes)


@dataclass(frozen=True, slots=True)
class Budgets:
    """Hard caps on disruptive actions, as the descheduler has."""

    actions_per_cycle: int = 10
    actions_per_node: int = 2
    actions_per_service: int = 1


@dataclass(frozen=True, slots=True)
class QuarantineSettings:
    failures: int = 3
    period_seconds: float = 3600.0
    duration_seconds: float = 7200.0
    max_fraction: float = 0.25


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """Nodes selected by hostname or by node label (`key=value`).

    Every selector adds nodes: a node is a member when its hostname is listed or when it
    carries any one of the listed labels with that exact value.
    """

    name: str
    hostnames: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()

    def contains(self, *, hostname: str, labels: Mapping[str, str]) -> bool:
        return hostname in self.hostnames or any(
            labels.get(key) == value for key, value in self.labels
        )


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    budgets: Budgets = field(default_factory=Budgets)
    resync_interval_seconds: float = 10.0
    rebalance_mode: RebalanceMode = RebalanceMode.ON_JOIN
    rebalance_interval_seconds: float = 300.0
    aggressiveness: int = 3
    move_cooldown_seconds: float = 300.0
    steering: SteeringMode = SteeringMode.STANDBY
    # Standby steering excludes every node but the targets and one standby, one
    # `node.id!=` each: on a large swarm a settled service that would carry more than
    # this many is steered open at rest instead, so specs (and Swarm's scheduler, which
    # reads them) stay small.
    steering_max_exclusions: int = 100
    # A service may preempt only services whose priority is lower by at least this much;
    # one named level by default, so finer numeric priorities order without evicting.
    preemption_gap: int = 1000
    # The one blast-radius cap (core/kernel/blast_radius.py): most of the ready and
    # active nodes that every outside input together (health reports, suspicions,
    # quarantine, move-offs, plugin vetoes) may keep one service off; more is held back.
    # A third, rounded up so that one node of three is within it.
    health_panic_threshold: float = 0.34
    # How long at least two independent signals must agree that a node is gone before
    # it is suspected (core/health/suspicion.py).
    suspect_after_seconds: float = 1.0
    timezone: str = "UTC"
