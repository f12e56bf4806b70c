"""The simulated swarm's plain values: its timings and its tasks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.model import TaskState

START_SECONDS = 0.5
JOIN_SECONDS = 1.0
DEFAULT_RESTART_DELAY = 5.0  # swarmkit's DefaultRestartDelay
DEFAULT_MONITOR = 5.0  # UpdateConfig.Monitor's default


@dataclass(frozen=True)
class SwarmTimings:
    heartbeat_seconds: float = 5.0
    restart_delay: Mapping[str, float] = field(default_factory=dict)  # service id -> s
    update_monitor: Mapping[str, float] = field(default_factory=dict)  # service id -> s
    update_parallelism: Mapping[str, int] = field(default_factory=dict)  # 0: all at once

    @property
    def down_after(self) -> float:
        return 2.5 * self.heartbeat_seconds

    @property
    def unknown_grace(self) -> float:
        """How long a new leader waits for an `unknown` node (from the election)."""
        return 6.0 * self.heartbeat_seconds


@dataclass
class SimTask:
    id: str
    service_id: str
    slot: int
    node_id: str = ""
    desired: TaskState = TaskState.RUNNING  # READY while its restart delay runs
    state: TaskState = TaskState.PENDING
    error: str = ""
    since: float = 0.0
    start_at: float = 0.0  # a delayed replacement is scheduled from then
    running_at: float | None = None
    replaces: str = ""  # start-first: the task it stops once it runs
