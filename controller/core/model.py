"""The cluster as the planner sees it: frozen values built by the adapters.

Only what placement needs is kept; everything is already normalised (enums, ints,
seconds), so rules never touch Docker's JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from controller.core.labels import operators_of, recorded_exclusions, spaced_as_written
from controller.core.mirror import Mirror
from controller.core.outside_inputs import (
    HealthReport,
    HealthState,
    LivenessSignal,
    PluginAdvice,
    SourceStatus,
    WorkloadEvent,
)
from controller.core.replica_record import ReplicaRecord, ReplicaRecordError, read_replica_record


class NodeRole(StrEnum):
    MANAGER = "manager"
    WORKER = "worker"


class Availability(StrEnum):
    ACTIVE = "active"
    PAUSE = "pause"
    DRAIN = "drain"


class NodeState(StrEnum):
    UNKNOWN = "unknown"
    DOWN = "down"
    READY = "ready"
    DISCONNECTED = "disconnected"


class ServiceMode(StrEnum):
    REPLICATED = "replicated"
    GLOBAL = "global"
    OTHER = "other"  # replicated-job / global-job: never planned


@dataclass(frozen=True, slots=True)
class Resources:
    """CPU in nano-CPUs, memory in bytes, discrete generic resources by kind."""

    nano_cpus: int = 0
    memory_bytes: int = 0
    generic: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: Resources) -> Resources:
        generic = dict(self.generic)
        for kind, amount in other.generic.items():
            generic[kind] = generic.get(kind, 0) + amount
        return Resources(
            self.nano_cpus + other.nano_cpus, self.memory_bytes + other.memory_bytes, generic
        )

    def fits_within(self, capacity: Resources) -> bool:
        return (
            self.nano_cpus <= capacity.nano_cpus
            and self.memory_bytes <= capacity.memory_bytes
            and all(capacity.generic.get(k, 0) >= v for k, v in self.generic.items())
        )


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    version: int
    hostname: str
    role: NodeRole
    availability: Availability
    state: NodeState
    labels: Mapping[str, str] = field(default_factory=dict)
    engine_labels: Mapping[str, str] = field(default_factory=dict)
    addr: str = ""
    leader: bool = False
    manager_reachable: bool = False
    capacity: Resources = field(default_factory=Resources)
    platform_os: str = ""
    platform_arch: str = ""
    updated_at: float = 0.0  # last change of the node object (status changes included)

    @property
    def is_ready(self) -> bool:
        return self.state is NodeState.READY

    @property
    def accepts_tasks(self) -> bool:
        return self.is_ready and self.availability is Availability.ACTIVE

    @property
    def holds_tasks(self) -> bool:
        """Swarm has not given up the tasks here: the node is ready, or `unknown` or
        `disconnected` (a new Raft leader has not heard from it yet, or it missed a
        heartbeat): its tasks may still run and are never counted as free."""
        return self.state is not NodeState.DOWN


@dataclass(frozen=True, slots=True)
class Service:
    id: str
    version: int
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    mode: ServiceMode = ServiceMode.REPLICATED
    replicas: int | None = None  # None for global services
    constraints: tuple[str, ...] = ()
    reservations: Resources = field(default_factory=Resources)
    update_order: str = "stop-first"
    restart_condition: str = "any"
    max_replicas_per_node: int = 0
    # Placement.Platforms as (os, arch), either may be "": Swarm runs a task only on a
    # node matching one of them. Empty: the image's platform is unknown, any node passes.
    platforms: tuple[tuple[str, str], ...] = ()
    # Host-mode published ports ("8080/tcp"): two tasks publishing one cannot share a node.
    host_ports: tuple[str, ...] = ()
    update_state: str | None = None  # UpdateStatus.State while Swarm rolls an update
    stack: str | None = None
    update_failure_action: str = "pause"  # UpdateConfig.FailureAction
    # The spec being rolled out differs from PreviousSpec only in the controller's own
    # constraints: a rollout the controller's write started, not an operator's.
    rollout_is_own: bool = False
    # The most tasks Swarm's updater has down at once rolling out a stop-first spec
    # change: each of UpdateConfig.Parallelism workers stops a task and waits for its
    # replacement to run before the next. 0: no bound (unlimited parallelism, or a
    # failure action or ratio that lets the update go on stopping tasks after a failure).
    update_batch: int = 0
    # Mounts whose data stays on the node a task runs on ("volume pgdata", "bind /srv"):
    # a named volume of the local driver, or a bind mount. A moved task starts without it.
    local_data: tuple[str, ...] = ()
    # Read from the labels once, when the value is made (and again by `replace`): the
    # controller's replica record (core/replica_record), or why it cannot be read, and
    # the nodes the controller keeps the service off (its `excluded` label).
    replica_record: ReplicaRecord | None = field(init=False, repr=False, compare=False)
    replica_record_error: str | None = field(init=False, repr=False, compare=False)
    excluded: frozenset[str] = field(init=False, repr=False, compare=False)
    # Whether it carries the `excluded` label at all (False: the controller never steered it).
    excluded_recorded: bool = field(init=False, repr=False, compare=False)
    # Its constraints without the controller's, spaced as the controller writes them
    # back (core/labels.operators_of, spaced_as_written): read once, here.
    operator_constraints: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            record, error = read_replica_record(self.labels), None
        except ReplicaRecordError as exc:
            record, error = None, str(exc)
        object.__setattr__(self, "replica_record", record)
        object.__setattr__(self, "replica_record_error", error)
        recorded = recorded_exclusions(self.labels)
        excluded = recorded if recorded is not None else frozenset()
        object.__setattr__(self, "excluded", excluded)
        object.__setattr__(self, "excluded_recorded", recorded is not None)
        operators = operators_of(self.name, excluded, self.constraints)
        object.__setattr__(self, "operator_constraints", tuple(map(spaced_as_written, operators)))

    @property
    def updating(self) -> bool:
        """Swarm is actively replacing tasks (an update or a rollback under way)."""
        return self.update_state in ACTIVE_ROLLOUT_STATES

    @property
    def in_rollout(self) -> bool:
        """An update or rollback is under way or paused: any spec write resets its
        UpdateStatus (a paused one resumes) and replaces its PreviousSpec.

        Not a paused rollout of the controller's own making: held, it would keep the
        controller from writing the service (even to undo the steering that started it)
        until an operator resumed it; resumed by the next write, it carries on with the
        controller's newer spec, and the spec `docker service rollback` returns to differs
        from the operator's only in the controller's constraints, as before it."""
        return self.update_state in ROLLOUT_STATES and not self.own_rollout_paused

    @property
    def own_rollout_paused(self) -> bool:
        """Swarm paused a rollout the controller's own write started."""
        return self.rollout_is_own and self.update_state in PAUSED_ROLLOUT_STATES


# UpdateStatus.State values (the same on Docker 20.10 and 26.1); "completed" and
# "rollback_completed" (or no UpdateStatus at all) mean the service is at rest.
ACTIVE_ROLLOUT_STATES = frozenset({"updating", "rollback_started"})
PAUSED_ROLLOUT_STATES = frozenset({"paused", "rollback_paused"})
ROLLOUT_STATES = ACTIVE_ROLLOUT_STATES | PAUSED_ROLLOUT_STATES


class TaskState(StrEnum):
    """Swarm's task states, in Swarm's order; `OTHER` absorbs states added later."""

    NEW = "new"
    PENDING = "pending"
    ASSIGNED = "assigned"
    ACCEPTED = "accepted"
    PREPARING = "preparing"
    READY = "ready"
    STARTING = "starting"
    RUNNING = "running"
    COMPLETE = "complete"
    SHUTDOWN = "shutdown"
    FAILED = "failed"
    REJECTED = "rejected"
    REMOVE = "remove"
    ORPHANED = "orphaned"
    OTHER = "other"


ACTIVE_TASK_STATES = frozenset(
    {
        TaskState.NEW,
        TaskState.PENDING,
        TaskState.ASSIGNED,
        TaskState.ACCEPTED,
        TaskState.PREPARING,
        TaskState.READY,
        TaskState.STARTING,
        TaskState.RUNNING,
    }
)


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    service_id: str
    node_id: str  # "" while unassigned
    slot: int
    desired_state: TaskState
    state: TaskState
    error: str = ""
    updated_at: float = 0.0  # seconds since the epoch, from Status.Timestamp

    @property
    def is_running(self) -> bool:
        return self.state is TaskState.RUNNING and self.desired_state is TaskState.RUNNING

    @property
    def is_active(self) -> bool:
        """Swarm means it to run and it has not ended: it holds its place on its node."""
        return self.desired_state is TaskState.RUNNING and self.state in ACTIVE_TASK_STATES

    @property
    def is_pending(self) -> bool:
        return self.desired_state is TaskState.RUNNING and self.state in {
            TaskState.NEW,
            TaskState.PENDING,
        }


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """Measured load of one node as fractions of its capacity (1.0: fully used).

    Reported by the node agent; nodes without a report are loaded by reservations.
    """

    cpu: float
    memory: float


@dataclass(frozen=True, slots=True)
class Unreadable:
    """An object the adapters could not turn into a model value; it is skipped, not guessed."""

    kind: str  # "service" or "node"
    id: str
    name: str
    reason: str


@dataclass(frozen=True)
class ClusterSnapshot:
    """Nodes, services and the tasks Swarm wants running, observed together."""

    nodes: tuple[Node, ...]
    services: tuple[Service, ...]
    tasks: tuple[Task, ...]
    unreadable: tuple[Unreadable, ...] = ()
    # Node id -> measured usage, where an agent reports it (empty: reservations only).
    usage: Mapping[str, NodeUsage] = field(default_factory=dict)
    # Outside health and placement intelligence (see core/outside_inputs), gathered by the
    # runtime before the plan: live health reports, task failures and unhealthy tasks,
    # placement plugin answers, and the sources that could not be read.
    health: tuple[HealthReport, ...] = ()
    workload: tuple[WorkloadEvent, ...] = ()
    plugins: PluginAdvice = field(default_factory=PluginAdvice)
    unavailable_sources: tuple[SourceStatus, ...] = ()
    # Whether each node looks alive to signals faster than Swarm's heartbeat (gossip
    # peers, TCP probes, agents), gathered by the runtime: see core/health/suspicion.
    liveness: tuple[LivenessSignal, ...] = ()
    # The mirror of what the controller wrote on each service (core/mirror); None: not observed.
    mirror: Mirror | None = None
    # Swarm's dispatcher heartbeat period (s); None: not observed.
    heartbeat_seconds: float | None = None
    # Replacements Swarm's restart supervisor holds back for the restart delay (desired
    # state READY): assigned a node at once, counted by a scale-down, not yet running.
    delayed: tuple[Task, ...] = ()

    @cached_property
    def node_by_id(self) -> Mapping[str, Node]:
        return {n.id: n for n in self.nodes}

    def unknown_among(self, ids: Iterable[str]) -> set[str]:
        """Those of `ids` Swarm calls `unknown`: after a Raft leadership change, a node is
        unknown until it reports to the new leader (or is marked down after the grace),
        neither gone nor back."""
        wanted = set(ids)
        return {n.id for n in self.nodes if n.state is NodeState.UNKNOWN and n.id in wanted}

    @cached_property
    def live_node_ids(self) -> frozenset[str]:
        """Nodes whose running tasks count as up for availability (core/kernel/ledger):
        Swarm calls them ready, and no liveness signal (its latest word per source) nor
        live health report says they are gone. A crashed engine's tasks read `running`
        until Swarm marks the node down; one signal that says gone is enough to doubt
        them (the ledger then does less, never more)."""
        latest: dict[tuple[str, str], LivenessSignal] = {}
        for signal in self.liveness:
            key = (signal.node_id, signal.source)
            if key not in latest or signal.since >= latest[key].since:
                latest[key] = signal
        doubted = {s.node_id for s in latest.values() if not s.alive}
        doubted.update(r.node_id for r in self.health if r.state is HealthState.FAILED)
        return frozenset(n.id for n in self.nodes if n.is_ready and n.id not in doubted)

    @cached_property
    def unknown_hostnames(self) -> tuple[str, ...]:
        """Every node Swarm calls `unknown`, by hostname: while there is one, the view is a
        new Raft leader's first and optional moves (steering, rebalancing) wait for it."""
        return tuple(sorted(n.hostname for n in self.nodes if n.state is NodeState.UNKNOWN))

    @cached_property
    def hostname_by_id(self) -> Mapping[str, str]:
        return {n.id: n.hostname for n in self.nodes}

    @cached_property
    def node_by_hostname(self) -> Mapping[str, Node]:
        return {n.hostname: n for n in self.nodes}

    @cached_property
    def service_by_id(self) -> Mapping[str, Service]:
        return {s.id: s for s in self.services}

    @cached_property
    def tasks_by_service(self) -> Mapping[str, tuple[Task, ...]]:
        grouped: dict[str, list[Task]] = {}
        for task in self.tasks:
            grouped.setdefault(task.service_id, []).append(task)
        return {sid: tuple(ts) for sid, ts in grouped.items()}

    def tasks_of(self, service_id: str) -> tuple[Task, ...]:
        return self.tasks_by_service.get(service_id, ())

    @cached_property
    def active_tasks(self) -> Mapping[str, Mapping[str, int]]:
        """Service id -> node id -> its active tasks there, on every node Swarm assigned
        them to: the one count of where each service runs, which every other reads."""
        out: dict[str, dict[str, int]] = {}
        for task in self.tasks:
            if task.node_id and task.is_active:
                per_node = out.setdefault(task.service_id, {})
                per_node[task.node_id] = per_node.get(task.node_id, 0) + 1
        return out

    def _on_nodes(self, keep: Callable[[Node], bool]) -> Mapping[str, Mapping[str, int]]:
        nodes = {n.id for n in self.nodes if keep(n)}
        out: dict[str, dict[str, int]] = {}
        for service_id, per_node in self.active_tasks.items():
            kept = {n: c for n, c in per_node.items() if n in nodes}
            if kept:
                out[service_id] = kept
        return out

    @cached_property
    def active_placement(self) -> Mapping[str, Mapping[str, int]]:
        """`active_tasks` on ready nodes: where the rules place from (tasks on a node that
        is not ready are Swarm's to replace)."""
        return self._on_nodes(lambda n: n.is_ready)

    @cached_property
    def held_placement(self) -> Mapping[str, Mapping[str, int]]:
        """`active_tasks` on nodes that hold tasks (ready, unknown or disconnected): what
        a write could still stop, so never counted as free."""
        return self._on_nodes(lambda n: n.holds_tasks)

    @cached_property
    def tasks_by_node(self) -> Mapping[str, tuple[Task, ...]]:
        grouped: dict[str, list[Task]] = {}
        for task in self.tasks:
            grouped.setdefault(task.node_id, []).append(task)
        return {nid: tuple(ts) for nid, ts in grouped.items()}

    def tasks_on(self, node_id: str) -> tuple[Task, ...]:
        return self.tasks_by_node.get(node_id, ())
