"""A simulated swarm: Swarm's orchestrators, scheduler and updater, driven by a clock.

Modelled on swarmkit (docs/failover.md describes the levers, measured on real swarms):
- a failed node is marked down 2.5 heartbeats after the failure (the grace is three
  heartbeats from the last one, on average half a period before the failure: measured
  10.8-12.0 s at the default 5 s, 1.8-3.1 s at 1 s; swarmkit draws each period from
  heartbeat ± 0.5 s, which the model does not: docs/availability.md gives the bounds,
  and tests/integration/test_model_conformance_swarm.py the timelines compared on a real
  swarm); its replicated tasks are replaced in
  the same slot (restart condition `none`: not at all); global tasks there just stop.
  As swarmkit's restart supervisor does, the replacement is created with desired state
  READY, assigned a node by the scheduler at once (it holds its reservations there), and
  started when the service's restart delay ends; the controller sees it in the
  snapshot's `delayed`, not among the tasks Swarm wants running. A scale-down counts it
  like any slot (slots.py): not running, it sorts after the running slots, but as a first
  copy on its node it outlasts a running node's second copy;
- a silent link cut leaves the node `ready` until its heartbeat grace expires, then
  `down` (swarmkit's dispatcher marks a node `disconnected` only when it ends a session
  it can see end); a new Raft leader calls every node `unknown` and gives it twice the
  grace, counted from the election (`nodeStore.AddUnknown`: 6 heartbeats): a live node
  is `ready` again once it reports, a dead one stays `unknown`, holding its tasks in the
  API, until that grace ends, then `down`;
- what Swarm's API lists is not what runs: a task on a node whose engine died or whose
  link is cut reads `running` until the node is down, but serves no one. `running()`
  counts what really runs (engine alive, link up), and a stop of such a task by a
  write costs nothing;
- a task assigned to a node whose engine has failed, before Swarm marks it down, never
  starts (it is replaced once the node is down, or starts if the node is back first);
- a restored node is ready JOIN_SECONDS later; nothing moves back to it by itself;
- drain stops the node's tasks and replaces them at once; pause only stops new ones;
- a replica count change adds or removes slots (see slots.py); the scheduler places
  unassigned tasks at once (see scheduler.py) and a task runs START_SECONDS after;
- a constraint change starts a rolling update of only the tasks whose node no longer
  meets the constraints, `parallelism` at a time, start-first or stop-first as the
  service says, each checked again when its turn comes (swarmkit's updater asks then,
  with the node as it is); the service stays `updating` for the monitor period after
  the last one;
- a node label change makes the constraint enforcer reject the tasks there whose
  constraints the node no longer meets; they are replaced after the restart delay;
- an operator's rollout (a spec change that dirties every task) replaces the tasks one at
  a time; one that fails pauses (failure action `pause`) or rolls back (`rollback`), and
  any later spec write, the controller's included, resets a paused one to `updating`;
- each running task stopped by a write of the controller (a scale-down, a rolling update
  its constraint write started, the enforcer after its label write, its drain) is counted
  in `stopped_by_writes`, and each task that starts in `started`, per service.
The orchestrators live in orchestrators.py, the timings and tasks in sim_values.py.
Not modelled: task failures and restart history, placement preferences, plugins, host
ports, platforms, real usage, stop grace periods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

from controller.core.actions import (
    Action,
    SetNodeAvailability,
    SetNodeLabels,
    SetReplicas,
    SetServiceConstraints,
    target_of,
)
from controller.core.apply import apply_actions
from controller.core.model import (
    Availability,
    ClusterSnapshot,
    NodeState,
    Task,
    TaskState,
)
from controller.core.simulate.orchestrators import Orchestrators, Update, on_node
from controller.core.simulate.sim_values import (
    JOIN_SECONDS,
    START_SECONDS,
    SimTask,
    SwarmTimings,
)


class SimSwarm(Orchestrators):
    def __init__(self, snapshot: ClusterSnapshot, timings: SwarmTimings, now: float) -> None:
        self.now, self.timings = now, timings
        self.nodes = {n.id: n for n in snapshot.nodes}
        self.services = {s.id: s for s in snapshot.services}
        self.tasks: dict[str, SimTask] = {}
        for t in (*snapshot.tasks, *snapshot.delayed):
            if t.desired_state is TaskState.RUNNING and t.service_id in self.services:
                state = t.state if t.node_id else TaskState.PENDING
                running_at = None if state is TaskState.RUNNING or not t.node_id else now
                self.tasks[t.id] = SimTask(
                    t.id, t.service_id, t.slot, t.node_id, state=state, error=t.error,
                    since=t.updated_at or now, running_at=running_at,
                )  # fmt: skip
            elif t.desired_state is TaskState.READY and t.service_id in self.services:
                self.tasks[t.id] = SimTask(
                    t.id, t.service_id, t.slot, t.node_id, desired=TaskState.READY,
                    state=t.state, since=t.updated_at or now, start_at=now,
                    running_at=now + START_SECONDS if t.node_id else None,
                )  # fmt: skip
        self.mirror = snapshot.mirror
        self.reporting: dict[str, float] = {}  # unknown node -> when it reports again
        # Per service: running tasks a write of the controller stopped, tasks started.
        self.stopped_by_writes: Counter[str] = Counter()
        self.started: Counter[str] = Counter()
        self._cause = "swarm"  # "write" while a write of the controller is applied
        # Nodes an outside source reports failed: their tasks serve no one, so they are
        # not counted as running, and stopping them costs nothing.
        self.written_off: frozenset[str] = frozenset()
        self.failing: dict[str, float] = {}  # node -> when Swarm marks it down
        # The ground truth Swarm's API hides: nodes whose engine died ("crash") or whose
        # link is cut ("cut"), until restored. Their tasks serve no one.
        self.broken: dict[str, str] = {}
        self.unknown_until: dict[str, float] = {}  # unknown node -> when it is marked down
        self.returning: dict[str, float] = {}  # node -> when it is ready again
        self.updates: dict[str, Update] = {}
        self.changed = False  # a node or service changed: Swarm would send an event
        self._serial = 0
        self.notes: list[str] = []

    # --- what the controller observes ----------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        listed = [
            Task(t.id, t.service_id, t.node_id, t.slot, t.desired, t.state, t.error, t.since)
            for t in sorted(self.tasks.values(), key=lambda t: t.id)
        ]
        nodes = tuple(sorted(self.nodes.values(), key=lambda n: n.hostname))
        services = tuple(sorted(self.services.values(), key=lambda s: s.name))
        return ClusterSnapshot(
            nodes=nodes,
            services=services,
            tasks=tuple(t for t in listed if t.desired_state is TaskState.RUNNING),
            mirror=self.mirror,
            delayed=tuple(t for t in listed if t.desired_state is TaskState.READY and t.node_id),
        )

    def running(self, service_id: str) -> int:
        """The service's tasks that really run: on a node Swarm has not marked down, whose
        engine is alive and link up (whatever the API says), and not written off."""
        return sum(1 for t in self.tasks.values() if t.service_id == service_id and self.serves(t))

    def placement(self) -> dict[str, dict[str, int]]:
        """Service name -> hostname -> running tasks."""
        out: dict[str, dict[str, int]] = {s.name: {} for s in self.services.values()}
        for t in self.tasks.values():
            if t.state is TaskState.RUNNING and t.node_id in self.nodes:
                per = out[self.services[t.service_id].name]
                host = self.nodes[t.node_id].hostname
                per[host] = per.get(host, 0) + 1
        return out

    # --- what the scenario does ------------------------------------------------------

    def fail(self, node_id: str) -> None:
        """The node's engine dies: Swarm marks it down once its grace ends."""
        self._break(node_id, "crash")

    def _break(self, node_id: str, how: str) -> None:
        node = self.nodes[node_id]
        if node_id in self.broken or node.state is NodeState.DOWN:
            self._say(f"{node.hostname} has already failed")
            return
        self.broken[node_id] = how
        self.reporting.pop(node_id, None)  # an unknown node that died never reports
        at = self.unknown_until.get(node_id, self.now + self.timings.down_after)
        self.failing[node_id] = at
        self._say(f"{node.hostname}: {how}; Swarm will mark it down in {at - self.now:g} s")

    def restore(self, node_id: str) -> None:
        node = self.nodes[node_id]
        self.broken.pop(node_id, None)
        if self.failing.pop(node_id, None) is not None:
            self._say(f"{node.hostname} is back before Swarm noticed it was gone")
            self.unknown_until.pop(node_id, None)
            if node.state is not NodeState.READY:  # an unknown node reports again
                self._node_state(node_id, NodeState.READY)
        elif not node.is_ready:
            self.returning[node_id] = self.now + JOIN_SECONDS
            self._say(f"{node.hostname} restarts; it rejoins in {JOIN_SECONDS:g} s")
        else:
            self._say(f"{node.hostname} is not failed: nothing to restore")

    def cut_link(self, node_id: str) -> None:
        """The node's link to the managers is cut, silently: the node stays `ready` until
        its heartbeat grace ends, then `down`; its tasks reach no one meanwhile."""
        self._break(node_id, "cut")

    def leader_change(self, node_id: str, reports_after: float) -> None:
        """A new Raft leader has not heard from the node yet: `unknown` until it reports,
        for at most twice the grace from now; a dead node never reports, so it is marked
        down then, whatever the old leader's timer said."""
        node = self.nodes[node_id]
        if node.state is NodeState.DOWN:
            return
        self.unknown_until[node_id] = self.now + self.timings.unknown_grace
        if node_id in self.broken:
            self.failing[node_id] = self.unknown_until[node_id]
        else:
            self.reporting[node_id] = self.now + reports_after
        self._node_state(node_id, NodeState.UNKNOWN)

    def operator_update(
        self,
        service_id: str,
        *,
        replicas: int | None = None,
        constraints: tuple[str, ...] | None = None,
        labels: Mapping[str, str] | None = None,
        failure_action: str | None = None,
    ) -> None:
        """An operator's `docker service update`/`scale` or `docker stack deploy`: the
        fields given replace the spec's; tasks follow as Swarm's orchestrators do."""
        service = self.services[service_id]
        changed = replace(
            service,
            replicas=service.replicas if replicas is None else replicas,
            constraints=service.constraints if constraints is None else constraints,
            labels=dict(service.labels if labels is None else labels),
            update_failure_action=failure_action or service.update_failure_action,
            version=service.version + 1,
        )
        self.services[service_id] = changed
        self.changed = True
        self._spec_written(service_id)
        if changed.replicas != service.replicas:
            self._scale(changed)
        if changed.constraints != service.constraints:
            self._start_update(changed, by_write=False)

    def rollout(self, service_id: str, *, fails: bool) -> None:
        """An operator's rollout of a new image: every task is replaced, one at a time; a
        failing one fails after its first task (then pauses or rolls back)."""
        service = self.services[service_id]
        self.services[service_id] = service = replace(service, version=service.version + 1)
        self._spec_written(service_id)
        tasks = sorted(
            (t for t in self.tasks.values() if t.service_id == service_id and t.node_id),
            key=lambda t: t.slot,
        )
        self.updates[service_id] = Update([t.id for t in tasks], fail_after=1 if fails else None)
        self._set_update_state(service_id, "updating")

    def set_availability(self, node_id: str, availability: Availability) -> None:
        node = self.nodes[node_id]
        self.nodes[node_id] = replace(node, availability=availability, version=node.version + 1)
        self.changed = True
        self._say(f"{node.hostname} availability -> {availability.value}")
        if availability is Availability.DRAIN:
            self._evict(on_node(node_id), "drained", delay=False)

    # --- what the controller writes ---------------------------------------------------

    def apply(self, actions: tuple[Action, ...]) -> None:
        if not actions:
            return
        before = self.snapshot()
        after = apply_actions(before, actions)
        self.nodes = {n.id: n for n in after.nodes}
        self.services = {s.id: s for s in after.services}
        self.mirror = after.mirror
        self.changed = True
        self._cause = "write"
        for action in actions:
            if target_of(action)[0] == "service":
                self._spec_written(target_of(action)[1])
            if isinstance(action, SetReplicas):
                self._scale(self.services[action.service_id])
            elif isinstance(action, SetServiceConstraints):
                self._start_update(self.services[action.service_id], by_write=True)
            elif isinstance(action, SetNodeLabels):
                self._enforce_constraints(action.node_id, before.node_by_id.get(action.node_id))
            elif (
                isinstance(action, SetNodeAvailability)
                and action.availability is Availability.DRAIN
            ):
                self._evict(on_node(action.node_id), "drained", delay=False)
        self._cause = "swarm"

    def _spec_written(self, service_id: str) -> None:
        """Any spec write resets a paused rollout's status: Swarm's updater starts again."""
        update = self.updates.get(service_id)
        if update is not None and update.paused:
            del self.updates[service_id]
            self.updates[service_id] = Update([])
            self._set_update_state(service_id, "updating")

    # --- time ---------------------------------------------------------------------------

    def step(self, now: float) -> None:
        """Everything Swarm does by `now`: node state changes, delayed starts, tasks
        turning running, rolling updates, then the scheduler."""
        self.now = now
        for node_id, at in sorted(self.failing.items(), key=lambda kv: kv[1]):
            if at <= now:
                del self.failing[node_id]
                self.unknown_until.pop(node_id, None)
                self._node_state(node_id, NodeState.DOWN)
                self._evict(on_node(node_id), "node down", delay=True)
        for node_id, at in sorted(self.returning.items(), key=lambda kv: kv[1]):
            if at <= now:
                del self.returning[node_id]
                self._node_state(node_id, NodeState.READY)
        for node_id, at in sorted(self.reporting.items(), key=lambda kv: kv[1]):
            if at <= now:
                del self.reporting[node_id]
                if self.nodes[node_id].state is NodeState.UNKNOWN and node_id not in self.failing:
                    self.unknown_until.pop(node_id, None)
                    self._node_state(node_id, NodeState.READY)
        for task in list(self.tasks.values()):
            if task.desired is TaskState.READY and task.start_at <= now:
                task.desired, task.since = TaskState.RUNNING, now
            if (
                task.desired is TaskState.RUNNING
                and task.running_at is not None
                and task.running_at <= now
                # A failed engine starts nothing: the task stays assigned until the node
                # is marked down (and it is replaced) or comes back before that.
                and task.node_id not in self.broken
            ):
                self._runs(task)
        self._progress_updates()
        self._reconcile_global()
        self._schedule()

    def _node_state(self, node_id: str, state: NodeState) -> None:
        node = self.nodes[node_id]
        self.nodes[node_id] = replace(
            node, state=state, version=node.version + 1, updated_at=self.now
        )
        self.changed = True
        self._say(f"{node.hostname} is {state.value}")

    def _runs(self, task: SimTask) -> None:
        task.state, task.running_at, task.since = TaskState.RUNNING, None, self.now
        self.started[task.service_id] += 1
        self._say(f"{self._name(task)} running on {self.nodes[task.node_id].hostname}")
        update = self.updates.get(task.service_id)
        old = update.in_flight.pop(task.id, None) if update else None
        if update is not None and old is not None:
            update.replaced.append(task.id)
        if task.replaces or old:
            self._cause = "write" if update is not None and update.by_write else "swarm"
            self._remove(self.tasks.get(task.replaces or old or ""), "replaced")
            self._cause = "swarm"
