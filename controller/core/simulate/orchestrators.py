"""What Swarm's orchestrators do on their own in the simulated swarm: tasks created and
stopped, replicated slots replaced, rolling updates, the constraint enforcer, the global
orchestrator and the scheduler (see swarm_model.py for what is modelled and how)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from controller.core.constraints import ConstraintError, node_filter, parse_constraint
from controller.core.model import Node, NodeState, Service, ServiceMode, TaskState
from controller.core.simulate.scheduler import Scheduler
from controller.core.simulate.sim_values import (
    DEFAULT_MONITOR,
    DEFAULT_RESTART_DELAY,
    START_SECONDS,
    SimTask,
    SwarmTimings,
)
from controller.core.simulate.slots import SlotTask, new_slots, slots_to_remove


@dataclass
class Update:
    queue: list[str]  # tasks still to replace
    in_flight: dict[str, str] = field(default_factory=dict)  # new task -> old task
    done_at: float | None = None
    by_write: bool = False  # started by a write of the controller
    fail_after: int | None = None  # an operator's rollout that fails after this many
    replaced: list[str] = field(default_factory=list)  # slots' new tasks, for a rollback
    paused: bool = False
    # A constraint change: swarmkit's updater asks again, as it reaches each queued
    # task, whether its node still fails the constraints (a label may have changed).
    placement_only: bool = False


def allows(service: Service) -> Callable[[Node], bool] | None:
    """The service's constraints as a node test; None when Swarm could not read them."""
    try:
        return node_filter(parse_constraint(c) for c in service.constraints)
    except ConstraintError:
        return None


def on_node(node_id: str) -> Callable[[SimTask], bool]:
    return lambda task: task.node_id == node_id


class Orchestrators:
    """Swarm's own control loops, for SimSwarm; the state they read and change is the
    simulated swarm's (declared here, set in SimSwarm.__init__)."""

    now: float
    timings: SwarmTimings
    nodes: dict[str, Node]
    services: dict[str, Service]
    tasks: dict[str, SimTask]
    updates: dict[str, Update]
    broken: dict[str, str]
    written_off: frozenset[str]
    stopped_by_writes: Counter[str]
    notes: list[str]
    changed: bool
    _cause: str
    _serial: int

    def serves(self, task: SimTask) -> bool:
        return (
            task.state is TaskState.RUNNING
            and task.desired is TaskState.RUNNING
            and task.node_id in self.nodes
            and self.nodes[task.node_id].state is not NodeState.DOWN
            and task.node_id not in self.broken
            and task.node_id not in self.written_off
        )

    def _new_task(self, service: Service, slot: int, *, delay: float = 0.0) -> SimTask:
        self._serial += 1
        task = SimTask(
            f"sim{self._serial}", service.id, slot, since=self.now, start_at=self.now + delay
        )
        if delay > 0:  # swarmkit's restart supervisor: desired READY, scheduled at once
            task.desired = TaskState.READY
        self.tasks[task.id] = task
        return task

    def _remove(self, task: SimTask | None, why: str) -> None:
        if task is None or task.id not in self.tasks:
            return
        del self.tasks[task.id]
        if self._cause == "write" and self.serves(task):
            self.stopped_by_writes[task.service_id] += 1
        where = self.nodes[task.node_id].hostname if task.node_id in self.nodes else "no node"
        self._say(f"{self._name(task)} on {where} stopped ({why})")

    def _evict(self, which: Callable[[SimTask], bool], why: str, *, delay: bool) -> None:
        """Stop the matching tasks; replicated ones are replaced in their slot."""
        for task in sorted((t for t in self.tasks.values() if which(t)), key=lambda t: t.id):
            service = self.services[task.service_id]
            self._remove(task, why)
            if service.mode is not ServiceMode.REPLICATED or service.restart_condition == "none":
                continue
            wait = self.timings.restart_delay.get(service.id, DEFAULT_RESTART_DELAY)
            new = self._new_task(service, task.slot, delay=wait if delay else 0.0)
            if delay:
                self._say(f"{self._name(new)} will be replaced after the {wait:g} s restart delay")

    def _scale(self, service: Service) -> None:
        mine = [t for t in self.tasks.values() if t.service_id == service.id]
        wanted = service.replicas or 0
        slots = {t.slot for t in mine}
        if len(slots) > wanted:
            gone = set(
                slots_to_remove((SlotTask(t.id, t.slot, t.node_id, t.state) for t in mine), wanted)
            )
            for task in sorted(mine, key=lambda t: t.slot):
                if task.slot in gone:
                    self._remove(task, f"scaled down to {wanted}")
        for slot in new_slots(slots, max(0, wanted - len(slots))):
            self._new_task(service, slot)

    def _start_update(self, service: Service, *, by_write: bool) -> None:
        allowed = allows(service)
        if allowed is None:
            return
        dirty = sorted(
            (
                t
                for t in self.tasks.values()
                if t.service_id == service.id
                and t.node_id in self.nodes
                and not allowed(self.nodes[t.node_id])
                and t.id not in self.updates.get(service.id, Update([])).in_flight.values()
            ),
            key=lambda t: t.slot,
        )
        if service.mode is ServiceMode.GLOBAL:
            # The global orchestrator stops a task on a node the service no longer
            # accepts, and starts none elsewhere.
            self._cause = "write" if by_write else "swarm"
            for task in dirty:
                self._remove(task, "its node no longer meets the constraints")
            self._cause = "swarm"
            return
        if not dirty and service.id not in self.updates:
            return
        # A new spec supersedes the update under way: only the tasks it rules out go.
        update = self.updates.setdefault(service.id, Update([]))
        update.queue, update.done_at, update.by_write = [t.id for t in dirty], None, by_write
        update.placement_only = True
        self._set_update_state(service.id, "updating")

    def _meets(self, service: Service, task: SimTask) -> bool:
        """Whether the task's node satisfies the service's constraints now."""
        node, allowed = self.nodes.get(task.node_id), allows(service)
        return allowed is None or (node is not None and allowed(node))

    def _set_update_state(self, service_id: str, state: str) -> None:
        service = self.services[service_id]
        if service.update_state != state:
            self.services[service_id] = replace(
                service, update_state=state, version=service.version + 1
            )
            self.changed = True
            self._say(f"service {service.name}: update {state}")

    def _progress_updates(self) -> None:
        for service_id, update in list(self.updates.items()):
            service = self.services[service_id]
            if update.paused:
                continue
            if update.fail_after is not None and len(update.replaced) >= update.fail_after:
                self._rollout_failed(service, update)
                continue
            limit = self.timings.update_parallelism.get(service_id, 1) or len(update.queue)
            while update.queue and len(update.in_flight) < limit:
                old = self.tasks.get(update.queue.pop(0))
                if old is None or (update.placement_only and self._meets(service, old)):
                    continue
                new = self._new_task(service, old.slot)
                if service.mode is ServiceMode.GLOBAL:  # a global task stays on its node
                    new.node_id, new.state = old.node_id, TaskState.ASSIGNED
                    new.running_at = self.now + START_SECONDS
                if service.update_order == "start-first":
                    new.replaces = old.id
                else:
                    self._cause = "write" if update.by_write else "swarm"
                    self._remove(old, "rolling update")
                    self._cause = "swarm"
                update.in_flight[new.id] = old.id
            update.in_flight = {n: o for n, o in update.in_flight.items() if n in self.tasks}
            if update.queue or update.in_flight:
                continue
            if update.done_at is None:
                update.done_at = self.now
            monitor = self.timings.update_monitor.get(service_id, DEFAULT_MONITOR)
            if self.now >= update.done_at + monitor:
                del self.updates[service_id]
                rolled_back = service.update_state == "rollback_started"
                self._set_update_state(
                    service_id, "rollback_completed" if rolled_back else "completed"
                )

    def _rollout_failed(self, service: Service, update: Update) -> None:
        if service.update_failure_action == "rollback":
            rollback = Update([t for t in update.replaced if t in self.tasks])
            self.updates[service.id] = rollback
            self._set_update_state(service.id, "rollback_started")
            return
        update.paused, update.queue = True, []
        self._set_update_state(service.id, "paused")

    def _enforce_constraints(self, node_id: str, before: Node | None = None) -> None:
        """The constraint enforcer, after the node's labels changed. A task that its
        service's constraints refused on the node as it was `before` the write too (an
        operator's constraint edit, its rolling update not there yet) is the operator's
        stop, which the write only brought forward: not counted as the write's."""
        node = self.nodes[node_id]

        def refused_on(host: Node) -> Callable[[SimTask], bool]:
            def refused(task: SimTask) -> bool:
                if task.node_id != node_id:
                    return False
                allowed = allows(self.services[task.service_id])
                return allowed is not None and not allowed(host)

            return refused

        why = "its node no longer meets the constraints"
        if before is not None and self._cause == "write":
            self._cause = "swarm"
            self._evict(lambda t: refused_on(node)(t) and refused_on(before)(t), why, delay=True)
            self._cause = "write"
        self._evict(refused_on(node), why, delay=True)

    def _reconcile_global(self) -> None:
        for service in self.services.values():
            if service.mode is not ServiceMode.GLOBAL:
                continue
            allowed = allows(service)
            if allowed is None:
                continue
            have = {t.node_id for t in self.tasks.values() if t.service_id == service.id}
            for node in sorted(self.nodes.values(), key=lambda n: n.hostname):
                if node.id not in have and node.accepts_tasks and allowed(node):
                    task = self._new_task(service, 0)
                    task.node_id = node.id
                    task.state, task.running_at = TaskState.ASSIGNED, self.now + START_SECONDS

    def _schedule(self) -> None:
        assigned = [(t.service_id, t.node_id) for t in self.tasks.values() if t.node_id]
        scheduler = Scheduler(self.nodes.values(), self.services, assigned)
        waiting = sorted(
            (t for t in self.tasks.values() if not t.node_id),
            key=lambda t: (self.services[t.service_id].name, t.slot, t.id),
        )
        for task in waiting:
            node_id, error = scheduler.place(self.services[task.service_id])
            if node_id is None:
                if task.error != error:
                    task.error = error
                    self._say(f"{self._name(task)} pending: {error}")
                continue
            task.node_id, task.error, task.since = node_id, "", self.now
            # A delayed replacement is prepared on its node and starts when its delay ends.
            task.state = TaskState.ASSIGNED
            task.running_at = max(self.now + START_SECONDS, task.start_at)
            self._say(f"{self._name(task)} assigned to {self.nodes[node_id].hostname}")

    def _name(self, task: SimTask) -> str:
        service = self.services.get(task.service_id)
        name = service.name if service else task.service_id
        if task.slot:
            return f"{name}.{task.slot}"
        return f"{name}@{self.nodes[task.node_id].hostname}" if task.node_id else name

    def _say(self, text: str) -> None:
        self.notes.append(text)
