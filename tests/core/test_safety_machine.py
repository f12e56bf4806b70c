"""Model-checked safety: the real plan() on a simulated swarm, beside a Swarm-alone twin.

A Hypothesis state machine draws random sequences of what happens to a swarm and runs
each one twice on the what-if simulator (core/simulate): once with the controller (a
`plan()` cycle after every step, every node or service change and every resync
interval, its writes applied to the simulated swarm), once with Swarm alone. Both start
from the same six-node swarm and see the same steps:

- a node crashes, or its link is cut silently (both stay `ready` to Swarm until the
  grace ends, then `down`), and later returns; a new Raft leader calls a node `unknown`
  until it reports, or (an election) calls every node `unknown`, each reporting in its
  own time, a dead one never: it is `down` twice the grace after the election;
- a `failed` or `degraded` health report on a node, or its end (an `ok` report); a
  placement plugin vetoes a node for a service, or all vetoes end (the controller alone
  sees these);
- the liveness signals (gossip, probe, agent: core/health/suspicion) follow each crash,
  cut and return, and also lie: they call a live node gone (a false alarm), one of them
  has no word on a node, or the gossip lists a dead node again; a restarted controller
  or a new leader has none until its first poll (a false alarm, and a crash followed by
  an election, are also drawn as one step each, so that sequences reach their ends);
- an operator scales a service, edits its constraints (keeps `api` off a node or off
  the manager) or its possible owners, or redeploys the stack (`docker stack deploy`:
  every spec replaced by the stack file's, without the controller's labels and
  constraints);
- an operator's rollout, which may fail: failure action `pause` or `rollback`; and,
  whenever a replica record of the controller's stands, a rollout with a new count in
  one update (the record then stands until the rollout ends, the operator's count over
  it);
- a report on a node that runs two tasks of one service, drawn on its own since a
  uniform pick seldom lands there;
- the controller restarts (its memory lost) or a standby takes the lease over (with
  the memory it built watching); both read the mirror (core/mirror) back, as the real
  one does;
- not drawn: reports on more than two nodes at once (a health panic, in which the
  controller rightly distrusts the reports this test trusts); an operator's scale to
  the very count the controller set (its replica record cannot tell that from its own
  write).
- time passes (0.5 s ticks).

The services: `api` (3 replicas, max-unavailable 1), `web` (3, max-unavailable 0, two
tasks on one node so that failover's trim has a second copy to drop), `db` (1,
max-unavailable 0, possible owners node-2 and node-3), `one` (3, max-unavailable 1,
max-replicas-per-node 1, failover `confirmed`), `agent` (global, max-unavailable 1),
`pg` (1, max-unavailable 0, a local volume), all stop-first (Swarm's default), and
`other`, which the controller does not manage.

What runs is the ground truth, not the API's word: a task on a node whose engine died
or whose link is cut is listed `running` until Swarm marks the node down, and serves
no one meanwhile (core/simulate's `running()`), in both twins. A global service wants
one task on each node Swarm alone has not marked down.

Invariants, checked after every step, every cycle and every tick, for every managed
service:

1. The cap. The simulator counts each running task that a write of the controller
   stopped (a scale-down, the rolling update its constraint write started, the
   constraint enforcer after its node-label write, its drain); any task of the service
   that starts pays one back. `owed` is that balance, and it is cleared whenever the
   service runs its operator's count. Tasks stopped by the controller and not yet
   replaced are `min(owed, wanted - running)` (wanted: the operator's count; running:
   tasks running on nodes that hold their tasks, so not down, and that no `failed`
   report writes off: stopping a task there costs nothing): never more than the
   service's max-unavailable. This is the rule the issue states; it is counted, not
   compared, because once the controller has moved a task the two runs place tasks
   differently and a crash then takes different tasks from each: a bare comparison
   would blame the controller for where a fault fell.
   The same against the twin ("never worse than Swarm alone"): what the controller's
   writes stopped and the twin still runs, `min(owed, twin running - running)`, never
   exceeds the cap either. It is weaker than the first (a trim that stops a running
   original while Swarm alone is short too breaks only the first).
1b. At the write. Right after a cycle's writes stopped running tasks of a service, it
   runs at least min(Swarm alone, wanted - max-unavailable): a stop spends only what
   faults have left of the budget. (1 cannot see this: a fault's loss is not `owed`.)
2. No write reaches a service the controller does not manage, and no write stops a
   task of it; it runs as many tasks as its Swarm-alone twin, but for at most OTHER_LAG
   (Swarm's own slowest replacement) after a fault took one from one twin only.
3. No service write while the service's rollout is paused (it would resume it), unless
   the paused rollout is the controller's own.
4. Every write is named by a decision, and not by the planner's "the rule gave no
   reason" fallback.
5. Once faults stop (teardown: nodes back, reports and vetoes gone, then two minutes),
   both twins run every service at the operator's count, and the controller's replica
   counts are the operator's again.

Bounded for CI: `derandomize=True` fixes the examples (Hypothesis derives them from the
test's name), so every run explores the same sequences and a failure reproduces; it
also means no example database is read or written. The draws also depend on Python's
hash seed, so `./dev test` runs the exploration as its own step, with PYTHONHASHSEED=0
and SAFETY_MACHINE_EXAMPLES=150. Without SAFETY_MACHINE_EXAMPLES the
exploration is skipped and only the sequences in FOUND are replayed. SAFETY_MACHINE_SEED=S
draws random examples from seed S, to explore further.
SAFETY_MACHINE_NO_SHRINK=1 reports a failing sequence as found: shrinking a long one can
take minutes.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from controller.core.actions import Action, SetReplicas, describe, target_of
from controller.core.kernel.ledger import moved_from
from controller.core.labels import (
    is_own_constraint,
    is_own_label,
    possible_constraint,
    possible_label,
    steering_constraint,
)
from controller.core.memory import Memory
from controller.core.mirror import Mirror
from controller.core.model import (
    ClusterSnapshot,
    NodeState,
    Service,
    ServiceMode,
    Task,
    TaskState,
)
from controller.core.outside_inputs import (
    HealthReport,
    HealthState,
    LivenessSignal,
    PluginAdvice,
    PluginVeto,
)
from controller.core.plan import Plan, plan
from controller.core.replica_operations import allowed, edges_of
from controller.core.simulate import SimSwarm, SwarmTimings
from controller.policy import policy_from_data

from .builders import MANAGED, node, service, snapshot

T0 = 1_000_000.0
TICK = 0.5
RESYNC = 2.0
SETTLE_SECONDS = 90.0
POLICY = policy_from_data(
    {"apiVersion": "placement/v1", "controller": {"resync-interval": f"{RESYNC:g}s"}}
)
TIMINGS = SwarmTimings(heartbeat_seconds=1.0)
WORKERS = ("n2", "n3", "n4", "n5", "n6")  # node-1, the manager, runs the controller
PAUSED = frozenset({"paused", "rollback_paused"})
NO_REASON = "the rule gave no reason"
POSSIBLE_PAIRS = ("node-2,node-3", "node-3,node-4", "node-4,node-5")
SOURCES = ("gossip", "probe", "agent")
POLL = 0.5  # a restarted controller's first liveness poll


def _stop_first(svc: Service) -> Service:
    return replace(svc, update_order="stop-first")


def _task(svc: Service, node_n: int, slot: int) -> Task:
    name = f"t-{svc.name}-{slot or node_n}"
    return Task(name, svc.id, f"n{node_n}", slot, TaskState.RUNNING, TaskState.RUNNING)


def initial() -> ClusterSnapshot:
    api = service(
        "api",
        replicas=3,
        labels={**MANAGED, "placement.max-unavailable": "1"},
        constraints=[steering_constraint("api")],
    )
    web = service(
        "web",
        replicas=3,
        labels={**MANAGED, "placement.max-unavailable": "0"},
        constraints=[steering_constraint("web")],
    )
    db = service(
        "db",
        replicas=1,
        labels={
            **MANAGED,
            "placement.max-unavailable": "0",
            "placement.possible-nodes": POSSIBLE_PAIRS[0],
        },
        constraints=[steering_constraint("db"), possible_constraint("db")],
    )
    other = service("other", replicas=2)
    # Finding 1's layout: one task per node, confirmed failover, max-unavailable 1.
    one = replace(
        service(
            "one",
            replicas=3,
            labels={
                **MANAGED,
                "placement.max-unavailable": "1",
                "placement.failover-mode": "confirmed",
            },
            constraints=[steering_constraint("one")],
        ),
        max_replicas_per_node=1,
    )
    agent = service(
        "agent",
        replicas=None,
        mode=ServiceMode.GLOBAL,
        labels={**MANAGED, "placement.max-unavailable": "1"},
        constraints=[steering_constraint("agent")],
    )
    pg = replace(
        service(
            "pg",
            replicas=1,
            labels={**MANAGED, "placement.max-unavailable": "0"},
            constraints=[steering_constraint("pg")],
        ),
        local_data=("volume pg-data",),
    )
    services = [_stop_first(s) for s in (api, web, db, other, one, agent, pg)]
    api, web, db, other, one, agent, pg = services
    mark = {possible_label("db"): "true"}
    nodes = [
        node(1, manager=True),
        node(2, labels=mark),
        node(3, labels=mark),
        *(node(n) for n in (4, 5, 6)),
    ]
    tasks = [
        _task(api, 2, 1),
        _task(api, 3, 2),
        _task(api, 4, 3),
        _task(web, 5, 1),
        _task(web, 5, 2),
        _task(web, 6, 3),
        _task(db, 2, 1),
        _task(other, 3, 1),
        _task(other, 4, 2),
        _task(one, 4, 1),
        _task(one, 5, 2),
        _task(one, 6, 3),
        *(_task(agent, n, 0) for n in range(1, 7)),
        _task(pg, 6, 1),
    ]
    # The mirror is observed (its config comes with the first write that has something to
    # keep), so a restarted controller or a new leader reads back what it holds.
    return replace(snapshot(nodes, services, tasks), mirror=Mirror())


START = initial()
MANAGED_IDS = ("s-api", "s-web", "s-db", "s-one", "s-agent", "s-pg")
GLOBAL_IDS = ("s-agent",)
UNMANAGED = "s-other"
CAP = {"s-api": 1, "s-web": 0, "s-db": 0, "s-one": 1, "s-agent": 1, "s-pg": 0}
# How long the unmanaged service may run fewer tasks than its Swarm-alone twin: Swarm's
# own slowest replacement (a dead node held `unknown` after an election, then the
# restart delay), and a little more. The twins place its replacements apart once the
# controller has moved others' tasks, so a fault may take one from one twin only.
OTHER_LAG = TIMINGS.unknown_grace + 5.0 + 2.0
OPERATOR_LABELS = {s.id: {k: v for k, v in s.labels.items()} for s in START.services}
NODE_NAMES = {n.id: n.hostname for n in START.nodes}


class ViolationError(AssertionError):
    pass


class SafetyMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.ctrl = SimSwarm(START, TIMINGS, T0)
        self.twin = SimSwarm(START, TIMINGS, T0)
        self.memory = Memory()
        self.standby = Memory()
        self.reports: dict[str, HealthReport] = {}
        self.vetoes: dict[tuple[str, str], PluginVeto] = {}
        self.wanted = {s.id: s.replicas or 0 for s in START.services}
        self.operator_constraints: dict[str, tuple[str, ...]] = {s.id: () for s in START.services}
        self.labels = {sid: dict(labels) for sid, labels in OPERATOR_LABELS.items()}
        self.owed: Counter[str] = Counter()
        self.seen_stops: Counter[str] = Counter()
        self.seen_starts: Counter[str] = Counter()
        self.next_resync = T0
        self.other_behind_since: float | None = None
        self.settling = False
        # The liveness signals the controller reads, and the truth they may miss.
        self.signals = {(n, s): LivenessSignal(n, s, True, T0) for n in WORKERS for s in SOURCES}
        self.dead: set[str] = set()
        self.signals_from = T0
        self.cycle()

    # --- the controller -------------------------------------------------------------

    def observed(self) -> ClusterSnapshot:
        return replace(
            self.ctrl.snapshot(),
            health=tuple(self.reports[k] for k in sorted(self.reports)),
            plugins=PluginAdvice(
                vetoes=tuple(self.vetoes[k] for k in sorted(self.vetoes)), answered=("veto",)
            ),
            liveness=tuple(self.signals[k] for k in sorted(self.signals))
            if self.now >= self.signals_from
            else (),
        )

    def _signals(self, node_id: str, sources: tuple[str, ...], *, alive: bool) -> None:
        for source in sources:
            current = self.signals.get((node_id, source))
            if current is None or current.alive != alive:
                self.signals[(node_id, source)] = LivenessSignal(node_id, source, alive, self.now)

    def cycle(self) -> None:
        self.ctrl.changed = False
        self.next_resync = self.now + RESYNC
        snap = self.observed()
        result = plan(snapshot=snap, policy=POLICY, memory=self.memory, now=self.now)
        self.check_writes(snap, result)
        self.memory = result.memory
        for action in result.actions:  # as the reconciler keeps it after each write
            left = moved_from(action)
            if left and hasattr(action, "service_id"):
                self.memory = self.memory.note_move(action.service_id, self.now, left)
        # The standby plans too but never writes; it takes over with what it watched
        # (not once faults stop: no takeover follows, and it halves the settling's cost).
        if not self.settling:
            self.standby = plan(
                snapshot=snap, policy=POLICY, memory=self.standby, now=self.now
            ).memory
        before = Counter(self.ctrl.stopped_by_writes)
        self.ctrl.apply(result.actions)
        self.check_stops(before, result)
        self.check_counts()

    def want(self, sid: str) -> int:
        """The operator's count; for a global service, the nodes Swarm alone has not
        marked down (it runs one task on each)."""
        if sid in GLOBAL_IDS:
            return sum(1 for n in self.twin.nodes.values() if n.state is not NodeState.DOWN)
        return self.wanted[sid]

    def check_stops(self, before: Counter[str], result: Plan) -> None:
        """A write that stops running tasks may spend only what is left of the service's
        max-unavailable once what Swarm alone lacks is counted: after it, the service runs
        at least min(Swarm alone, wanted - max-unavailable), counting only tasks that
        really run (a dead engine's task, listed running, counts as down)."""
        writes = "; ".join(describe(a) for a in result.actions)
        stopped = {
            sid: self.ctrl.stopped_by_writes[sid] - before[sid] for sid in (*MANAGED_IDS, UNMANAGED)
        }
        if stopped[UNMANAGED]:
            raise ViolationError(
                f"other (unmanaged): {stopped[UNMANAGED]} task(s) stopped by the writes: {writes}"
            )
        broken = []
        for sid in MANAGED_IDS:
            if not stopped[sid]:
                continue
            running, alone, wanted = self.ctrl.running(sid), self.twin.running(sid), self.want(sid)
            floor = min(alone, wanted - CAP[sid])
            if running < floor:
                broken.append(
                    f"{self.ctrl.services[sid].name}: the writes stopped {stopped[sid]} running "
                    f"task(s) and left {running} really running of {wanted} (Swarm alone "
                    f"{alone}, max-unavailable {CAP[sid]}, so at least {floor})"
                )
        if broken:
            raise ViolationError("; ".join(broken) + f" [at {self.now - T0:g} s; writes: {writes}]")

    def check_writes(self, snap: ClusterSnapshot, result: Plan) -> None:
        named: list[Action] = [
            d.action for d in result.decisions if d.action is not None and NO_REASON not in d.reason
        ]
        for action in result.actions:
            kind, object_id = target_of(action)
            if action not in named:
                raise ViolationError(f"a write with no decision: {describe(action)}")
            if kind != "service":
                continue
            svc = snap.service_by_id[object_id]
            if isinstance(action, SetReplicas):
                self.check_transition(svc, action, result)
            if svc.labels.get("placement.managed") != "true":
                raise ViolationError(
                    f"a write to the unmanaged service {svc.name}: {describe(action)}"
                )
            if svc.update_state in PAUSED and not getattr(svc, "rollout_is_own", False):
                raise ViolationError(
                    f"a write to {svc.name}, whose rollout is {svc.update_state}, resumes it: "
                    f"{describe(action)}"
                )

    def check_transition(self, svc: Service, action: SetReplicas, result: Plan) -> None:
        """Every count write is an edge of the record's table for the rule that made it
        (core/replica_operations), failover's and the speculative rule's included."""
        rules = {d.rule for d in result.decisions if d.action == action}
        edges = edges_of(svc, action)
        if not any(allowed(rule, before, after) for rule in rules for before, after in edges):
            raise ViolationError(
                f"rule(s) {sorted(rules)} wrote {describe(action)} over the record "
                f"{svc.replica_record}: not in the table ({sorted(map(str, edges))})"
            )

    def check_counts(self) -> None:
        for sid in MANAGED_IDS:
            stops = self.ctrl.stopped_by_writes[sid] - self.seen_stops[sid]
            starts = self.ctrl.started[sid] - self.seen_starts[sid]
            self.seen_stops[sid] += stops
            self.seen_starts[sid] += starts
            running, wanted = self.ctrl.running(sid), self.want(sid)
            self.owed[sid] = max(0, self.owed[sid] + stops - starts)
            if running >= wanted:
                self.owed[sid] = 0
            name = self.ctrl.services[sid].name
            down = min(self.owed[sid], wanted - running)
            if down > CAP[sid]:
                raise ViolationError(
                    f"{name}: {down} task(s) stopped by the controller and not yet replaced "
                    f"(runs {running} of {wanted}), max-unavailable {CAP[sid]}"
                )
            behind = min(self.owed[sid], self.twin.running(sid) - running)
            if behind > CAP[sid]:
                raise ViolationError(
                    f"{name}: runs {running}, Swarm alone {self.twin.running(sid)}; "
                    f"max-unavailable {CAP[sid]}"
                )
        self.check_unmanaged()

    def check_unmanaged(self) -> None:
        """The unmanaged service runs as many tasks as its Swarm-alone twin, but for the
        time Swarm itself takes to replace a task a fault took from one twin only."""
        ours, alone = self.ctrl.running(UNMANAGED), self.twin.running(UNMANAGED)
        if ours >= alone:
            self.other_behind_since = None
            return
        if self.other_behind_since is None:
            self.other_behind_since = self.now
        if self.now - self.other_behind_since > OTHER_LAG:
            raise ViolationError(
                f"other (unmanaged): runs {ours}, Swarm alone {alone}, for "
                f"{self.now - self.other_behind_since:g} s (more than {OTHER_LAG:g} s)"
            )

    # --- time ---------------------------------------------------------------------------

    def tick(self) -> None:
        self.now += TICK
        self.ctrl.step(self.now)
        self.twin.step(self.now)
        self.ctrl.notes.clear()
        self.twin.notes.clear()
        if self.ctrl.changed or self.now >= self.next_resync - 1e-9:
            self.cycle()
        else:
            self.check_counts()

    def event(self) -> None:
        """A step Swarm or an outside source tells the controller of: a cycle at once."""
        self.ctrl.notes.clear()
        self.twin.notes.clear()
        self.cycle()

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 3.0, 6.0, 12.0]))
    def wait(self, seconds: float) -> None:
        for _ in range(round(seconds / TICK)):
            self.tick()

    # --- nodes ----------------------------------------------------------------------------

    @rule(node_id=st.sampled_from(WORKERS))
    def crash(self, node_id: str) -> None:
        self.ctrl.fail(node_id)
        self.twin.fail(node_id)
        self._gone(node_id)
        self.event()

    @rule(node_id=st.sampled_from(WORKERS))
    def cut_link(self, node_id: str) -> None:
        self.ctrl.cut_link(node_id)
        self.twin.cut_link(node_id)
        self._gone(node_id)
        self.event()

    def _gone(self, node_id: str) -> None:
        if node_id in self.ctrl.failing:
            self.dead.add(node_id)
            self._signals(node_id, SOURCES, alive=False)

    @rule(node_id=st.sampled_from(WORKERS))
    def restore(self, node_id: str) -> None:
        self.ctrl.restore(node_id)
        self.twin.restore(node_id)
        self.dead.discard(node_id)
        self._signals(node_id, SOURCES, alive=True)
        self.event()

    # --- the liveness signals lie (the controller alone sees them) ---------------------

    @rule(
        node_id=st.sampled_from(WORKERS),
        sources=st.sampled_from([("gossip", "probe"), ("probe", "agent"), SOURCES, ("probe",)]),
    )
    def signals_say_gone(self, node_id: str, sources: tuple[str, ...]) -> None:
        """Signals call a node gone whatever it is (the controller's own route to it, a
        slow gossip round): on a live node, a false alarm."""
        self._signals(node_id, sources, alive=False)
        self.event()

    @rule(node_id=st.sampled_from(WORKERS))
    def signals_recover(self, node_id: str) -> None:
        """The signals about a live node say so again; about a dead node, only the gossip
        can (it lists the node again while no connect to it succeeds)."""
        sources = ("gossip",) if node_id in self.dead else SOURCES
        self._signals(node_id, sources, alive=True)
        self.event()

    @rule(
        node_id=st.sampled_from(WORKERS),
        sources=st.sampled_from([("gossip", "probe"), ("probe", "agent"), SOURCES]),
        lasts=st.sampled_from([1.0, 2.0, 4.0]),
    )
    def false_alarm(self, node_id: str, sources: tuple[str, ...], lasts: float) -> None:
        """The three steps of a false alarm in one, so that sequences reach its trim."""
        self.signals_say_gone(node_id, sources)
        self.wait(lasts)
        self.signals_recover(node_id)

    @rule(
        node_id=st.sampled_from(WORKERS),
        reports_after=st.lists(st.sampled_from([0.5, 1.0, 4.0, 8.0]), min_size=6, max_size=6),
    )
    def crash_then_election(self, node_id: str, reports_after: list[float]) -> None:
        """A node dies and Raft elects a new leader (the dead node's manager's work):
        every node `unknown`, the dead one suspected, in one step."""
        self.crash(node_id)
        self.wait(1.0)
        self.election(reports_after)

    @rule(node_id=st.sampled_from(WORKERS), source=st.sampled_from(SOURCES))
    def signal_lost(self, node_id: str, source: str) -> None:
        """A source has no word on the node (its agents did not answer the poll)."""
        self.signals.pop((node_id, source), None)
        self.event()

    @rule(node_id=st.sampled_from(WORKERS), reports_after=st.sampled_from([1.0, 4.0, 10.0]))
    def leader_change(self, node_id: str, reports_after: float) -> None:
        self.ctrl.leader_change(node_id, reports_after)
        self.twin.leader_change(node_id, reports_after)
        self.event()

    @rule(reports_after=st.lists(st.sampled_from([0.5, 1.0, 4.0, 8.0]), min_size=6, max_size=6))
    def election(self, reports_after: list[float]) -> None:
        for node_id, after in zip(sorted(NODE_NAMES), reports_after, strict=True):
            self.ctrl.leader_change(node_id, after)
            self.twin.leader_change(node_id, after)
        self.event()

    # --- outside inputs (the controller alone sees them) -----------------------------

    @rule(
        node_id=st.sampled_from(WORKERS),
        state=st.sampled_from([HealthState.DEGRADED, HealthState.FAILED]),
    )
    def health_report(self, node_id: str, state: HealthState) -> None:
        if len(self._bad() - {node_id}) >= 2:
            return  # more would be a health panic: the controller then distrusts them all
        self.reports[node_id] = HealthReport(node_id, state, "webhook", T0 + 1e6, reason="test")
        self._written_off()
        self.event()

    def _doubled(self) -> list[str]:
        """The nodes (the manager too: a monitor reports on any node) that run two or
        more tasks of one managed service, a report there stopping several of its tasks
        at once; those of a service whose replica record stands first."""
        per = Counter(
            (t.service_id, t.node_id)
            for t in self.ctrl.tasks.values()
            if t.state is TaskState.RUNNING and t.node_id in NODE_NAMES and t.service_id in CAP
        )
        recorded = set(self._recorded())
        doubled = {(sid not in recorded, node_id) for (sid, node_id), n in per.items() if n >= 2}
        return list(dict.fromkeys(node_id for _, node_id in sorted(doubled)))

    @precondition(lambda self: self._doubled())
    @rule(pick=st.integers(0, 4), state=st.sampled_from([HealthState.DEGRADED, HealthState.FAILED]))
    def health_report_where_doubled(self, pick: int, state: HealthState) -> None:
        """A report on a node that runs two tasks of one service: drawn on its own, as a
        uniform pick of the node seldom lands there once tasks are spread."""
        doubled = self._doubled()
        self.health_report(doubled[pick % len(doubled)], state)

    def _bad(self) -> set[str]:
        return {n for n, r in self.reports.items() if r.state is not HealthState.OK}

    def _ok(self, node_id: str) -> None:
        """The monitor's word that the node is well again: the controller keeps a report
        on the node until a newer word replaces it (or it lapses), so a report ends as a
        monitor ends it, with `ok`, never by going silent."""
        self.reports[node_id] = HealthReport(
            node_id, HealthState.OK, "webhook", T0 + 1e6, reason="test"
        )

    def _written_off(self) -> None:
        failed = frozenset(n for n, r in self.reports.items() if r.state is HealthState.FAILED)
        self.ctrl.written_off = self.twin.written_off = failed

    @precondition(lambda self: self._bad())
    @rule(node_id=st.sampled_from(WORKERS))
    def health_clears(self, node_id: str) -> None:
        if node_id in self.reports:
            self._ok(node_id)
        self._written_off()
        self.event()

    @rule(service_id=st.sampled_from(MANAGED_IDS), node_id=st.sampled_from(WORKERS))
    def plugin_veto(self, service_id: str, node_id: str) -> None:
        self.vetoes[(service_id, node_id)] = PluginVeto("veto", service_id, node_id, "test")
        self.event()

    @precondition(lambda self: self.vetoes)
    @rule()
    def vetoes_end(self) -> None:
        self.vetoes.clear()
        self.event()

    # --- the operator -------------------------------------------------------------------

    def _operator(self, service_id: str, **fields: object) -> None:
        for swarm in (self.ctrl, self.twin):
            current = swarm.services[service_id]
            kept = tuple(
                c for c in current.constraints if is_own_constraint(c, current.name, current.labels)
            )
            own_labels = {k: v for k, v in current.labels.items() if is_own_label(k)}
            swarm.operator_update(
                service_id,
                replicas=fields.get("replicas"),  # type: ignore[arg-type]
                constraints=(*kept, *self.operator_constraints[service_id])
                if "constraints" in fields
                else None,
                labels={**own_labels, **self.labels[service_id]} if "labels" in fields else None,
                failure_action=fields.get("failure_action"),  # type: ignore[arg-type]
            )

    @rule(service_id=st.sampled_from(["s-api", "s-web", "s-one"]), replicas=st.integers(1, 5))
    def scale(self, service_id: str, replicas: int) -> None:
        current = self.ctrl.services[service_id]
        if current.replicas == replicas and "swarm-placement.replicas-set" in current.labels:
            return  # the very count the controller set: no one can tell it from its own
        self.wanted[service_id] = replicas
        self._operator(service_id, replicas=replicas)
        self.event()

    def _recorded(self) -> list[str]:
        """The services that can be scaled whose count a replica record of the
        controller's holds now (a failover surge, a speculative one, a move's)."""
        return [
            sid
            for sid in ("s-api", "s-web", "s-one")
            if self.ctrl.services[sid].replica_record is not None
        ]

    @precondition(lambda self: self._recorded())
    @rule(
        pick=st.integers(0, 2),
        replicas=st.integers(4, 6),
        fails=st.booleans(),
        action=st.sampled_from(["pause", "rollback"]),
    )
    def rollout_and_scale_over_a_record(
        self, pick: int, replicas: int, fails: bool, action: str
    ) -> None:
        """An operator's rollout with a new count (`docker service update --image ...
        --replicas N`) while a replica record of the controller's stands: the record is
        forgotten only once the rollout ends, and until then only the operator's count
        tells what the service wants. Drawn whenever a record stands, since a record
        seldom outlives the few seconds a rollout would have to start in."""
        recorded = self._recorded()
        sid = recorded[pick % len(recorded)]
        self.rollout(sid, fails, action)
        self.scale(sid, replicas)

    @rule(excluded=st.sampled_from(["", "manager", *WORKERS]))
    def edit_api_constraints(self, excluded: str) -> None:
        """The operator keeps `api` off a node, or off the manager (common practice: then
        its tasks share the workers, and a worker runs two once they are fewer than its
        count)."""
        if excluded == "manager":
            refused: tuple[str, ...] = ("node.role!=manager",)
        else:
            refused = (f"node.hostname!={NODE_NAMES[excluded]}",) if excluded else ()
        self.operator_constraints["s-api"] = refused
        self._operator("s-api", constraints=True)
        self.event()

    @rule(owners=st.sampled_from(POSSIBLE_PAIRS))
    def edit_db_owners(self, owners: str) -> None:
        self.labels["s-db"]["placement.possible-nodes"] = owners
        self._operator("s-db", labels=True)
        self.event()

    @rule()
    def stack_deploy(self) -> None:
        """Every spec replaced by the stack file's: the operator's count, constraints and
        labels, none of the controller's."""
        for swarm in (self.ctrl, self.twin):
            for sid in sorted(swarm.services):
                current = swarm.services[sid]
                swarm.operator_update(
                    sid,
                    replicas=None if sid in GLOBAL_IDS else self.wanted[sid],
                    constraints=self.operator_constraints[sid],
                    labels=self.labels[sid],
                )
                assert not any(is_own_label(k) for k in swarm.services[sid].labels), current
        self.event()

    @rule(
        service_id=st.sampled_from(MANAGED_IDS),
        fails=st.booleans(),
        action=st.sampled_from(["pause", "rollback"]),
    )
    def rollout(self, service_id: str, fails: bool, action: str) -> None:
        for swarm in (self.ctrl, self.twin):
            swarm.operator_update(service_id, failure_action=action)
            swarm.rollout(service_id, fails=fails)
        self.event()

    # --- the controller's own life ---------------------------------------------------

    @rule()
    def controller_restart(self) -> None:
        self.memory = Memory()
        self.signals_from = self.now + POLL
        self.event()

    @rule()
    def lease_takeover(self) -> None:
        self.memory, self.standby = self.standby, Memory()
        self.signals_from = self.now + POLL
        self.event()

    @invariant()
    def counts_hold(self) -> None:
        self.check_counts()

    # --- faults stop ---------------------------------------------------------------------

    def _operator_resolves_paused_rollouts(self) -> None:
        """A paused rollout waits for its operator, and the controller writes nothing into
        it (invariant 3): a surge made before the pause stands until then. Once faults
        stop, the operator resolves it, in both twins, as `docker service update` would."""
        twins = (self.ctrl, self.twin)
        for sid in sorted(self.wanted):
            if any(swarm.services[sid].update_state == "paused" for swarm in twins):
                for swarm in twins:
                    swarm.operator_update(sid)

    def teardown(self) -> None:
        self.settling = True
        for node_id in sorted(self.reports):
            self._ok(node_id)
        self._written_off()
        self.vetoes.clear()
        self.dead.clear()
        for node_id in WORKERS:
            self._signals(node_id, SOURCES, alive=True)
            for swarm in (self.ctrl, self.twin):
                if node_id in swarm.broken or swarm.nodes[node_id].state is not NodeState.READY:
                    swarm.restore(node_id)
        self.event()
        for _ in range(round(SETTLE_SECONDS / TICK)):
            self._operator_resolves_paused_rollouts()
            self.tick()
        for sid in sorted(self.wanted):
            name, wanted = self.ctrl.services[sid].name, self.want(sid)
            ours, alone = self.ctrl.running(sid), self.twin.running(sid)
            replicas = self.ctrl.services[sid].replicas
            if sid in GLOBAL_IDS:
                replicas = wanted  # no count: one task on each node
            assert (ours, alone, replicas) == (wanted, wanted, wanted), (
                f"{name} did not settle at the operator's {wanted}: runs {ours} "
                f"(replicas {replicas}), Swarm alone runs {alone}"
            )


_seed = os.environ.get("SAFETY_MACHINE_SEED")
_examples = int(os.environ.get("SAFETY_MACHINE_EXAMPLES", "0"))
SafetyMachine.TestCase.settings = settings(
    max_examples=max(_examples, 1),
    stateful_step_count=25,
    deadline=None,
    derandomize=_seed is None,
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    phases=[Phase.explicit, Phase.reuse, Phase.generate]
    if os.environ.get("SAFETY_MACHINE_NO_SHRINK")
    else list(Phase),
)
# The exploration runs as its own step of `./dev test` (fixed hash seed, see above); in
# the unit stage, whose hash seeds vary, only FOUND is replayed.
TestSafety = pytest.mark.skipif(
    _examples <= 0, reason="exploration: set SAFETY_MACHINE_EXAMPLES=N to run it"
)(SafetyMachine.TestCase)
if _seed is not None:
    from hypothesis import seed

    TestSafety = seed(int(_seed))(TestSafety)


# Sequences the machine found, replayed step by step on every run. The first four broke
# an invariant on the code before the ledger (634c193); the two where an operator scaled
# over a surge broke invariant 5 before the mirror kept the override (30bd1f1: the trim
# took the operator's 4 back to 3); the move onto a crashed node was a gap of the model
# (a task assigned to a dead engine ran in the simulator, so the move stopped the
# original); the last is a surge that stood through an operator's paused rollout, which
# holds once the operator resolves it. The `finding-` ones (issue 46) broke invariant 1b
# on 905f1cc's planner once the model counted only what really runs and drew a global
# service; so did the first again, for the global service. The finding-3 one breaks it
# with the ledger's wanted count read as min(replicas, record base) (the operator's 5
# read as 3: both tasks on the reported node stop at once). The false alarm after an
# election broke it on the ledger that charged nothing for stopping a task on a node in
# doubt (node-4's engine ran: api 1 of 3 where Swarm alone keeps 2). The veto of the
# global service broke it while the ledger left a node reported failed out of what a
# global service wants (agent 4 of 6 where Swarm alone keeps 5).
# The surge of `one` (max-replicas-per-node 1) with a slot no node could take held its
# trim for ever once the merged fixes met the model's new services (the unplaced slots
# now go first). So did a deploy that dropped the steering constraint of a global
# service vetoed on one node: Swarm started a task there, the constraint went back before
# it ran, and a veto on another node fit the ledger, which wanted no task on the first
# (a global service now wants one on every node its operator's constraints allow).
FOUND: dict[str, list[tuple[str, dict[str, object]]]] = {
    "1-two-degraded-reports-half-a-second-apart": [
        ("health_report", {"node_id": "n2", "state": HealthState.DEGRADED}),
        ("wait", {"seconds": 0.5}),
        ("health_report", {"node_id": "n3", "state": HealthState.DEGRADED}),
    ],
    "2-possible-owner-mark-while-a-new-leader-calls-the-node-unknown": [
        ("edit_db_owners", {"owners": "node-3,node-4"}),
        ("controller_restart", {}),
        ("leader_change", {"node_id": "n2", "reports_after": 1.0}),
    ],
    "2-possible-owner-mark-while-the-node-is-disconnected": [
        ("cut_link", {"node_id": "n2"}),
        ("edit_db_owners", {"owners": "node-3,node-4"}),
    ],
    "4-failover-trim-on-a-node-with-a-second-copy": [
        ("cut_link", {"node_id": "n6"}),
        ("wait", {"seconds": 0.5}),
        ("wait", {"seconds": 2.0}),
    ],
    "an-operator-scaled-over-a-surge-then-two-lease-takeovers": [
        ("cut_link", {"node_id": "n2"}),
        ("rollout", {"service_id": "s-api", "action": "rollback", "fails": False}),
        ("scale", {"service_id": "s-api", "replicas": 3}),
        ("scale", {"service_id": "s-api", "replicas": 4}),
        ("lease_takeover", {}),
        ("lease_takeover", {}),
    ],
    "an-operator-scaled-over-a-surge-then-a-restart": [
        ("cut_link", {"node_id": "n2"}),
        ("rollout", {"service_id": "s-api", "action": "rollback", "fails": False}),
        ("scale", {"service_id": "s-api", "replicas": 3}),
        ("scale", {"service_id": "s-api", "replicas": 4}),
        ("controller_restart", {}),
    ],
    "a-stop-first-move-onto-a-crashed-node-swarm-has-not-marked-down": [
        ("crash", {"node_id": "n3"}),
        ("edit_db_owners", {"owners": "node-3,node-4"}),
        ("wait", {"seconds": 3.0}),
    ],
    "finding-1-a-dead-engine-swarm-calls-ready-then-a-degraded-report": [
        ("crash", {"node_id": "n3"}),
        ("wait", {"seconds": 1.0}),
        ("health_report", {"node_id": "n2", "state": HealthState.DEGRADED}),
    ],
    "finding-1-a-dead-node-still-unknown-after-an-election-then-a-degraded-report": [
        ("crash_then_election", {"node_id": "n3", "reports_after": [0.5] * 6}),
        ("wait", {"seconds": 2.0}),
        ("health_report", {"node_id": "n2", "state": HealthState.DEGRADED}),
    ],
    "a-degraded-report-on-a-node-whose-false-alarm-follows-an-election": [
        ("crash_then_election", {"node_id": "n2", "reports_after": [0.5] * 6}),
        ("health_report", {"node_id": "n4", "state": HealthState.DEGRADED}),
        ("false_alarm", {"node_id": "n4", "sources": ("gossip", "probe"), "lasts": 1.0}),
    ],
    "a-surge-one-slot-of-which-max-replicas-per-node-can-never-place": [
        ("stack_deploy", {}),
        ("leader_change", {"node_id": "n2", "reports_after": 1.0}),
        ("crash_then_election", {"node_id": "n6", "reports_after": [0.5, 0.5, 1.0, 1.0, 1.0, 8.0]}),
        ("health_report", {"node_id": "n5", "state": HealthState.FAILED}),
        ("false_alarm", {"lasts": 2.0, "node_id": "n4", "sources": ("probe", "agent")}),
        ("wait", {"seconds": 1.0}),
        ("rollout", {"action": "rollback", "fails": True, "service_id": "s-web"}),
        ("scale", {"replicas": 4, "service_id": "s-api"}),
        ("signals_say_gone", {"node_id": "n6", "sources": ("gossip", "probe")}),
        ("crash_then_election", {"node_id": "n3", "reports_after": [0.5, 0.5, 1.0, 1.0, 4.0, 8.0]}),
        ("crash", {"node_id": "n3"}),
        ("crash", {"node_id": "n5"}),
        ("leader_change", {"node_id": "n3", "reports_after": 1.0}),
        ("crash_then_election", {"node_id": "n3", "reports_after": [1.0, 0.5, 0.5, 0.5, 0.5, 0.5]}),
        ("health_clears", {"node_id": "n2"}),
        ("wait", {"seconds": 6.0}),
        ("signals_recover", {"node_id": "n3"}),
        ("signals_say_gone", {"node_id": "n2", "sources": ("probe",)}),
        ("signals_recover", {"node_id": "n6"}),
        ("crash", {"node_id": "n3"}),
        ("leader_change", {"node_id": "n3", "reports_after": 1.0}),
        ("scale", {"replicas": 5, "service_id": "s-one"}),
        ("plugin_veto", {"node_id": "n6", "service_id": "s-one"}),
        ("edit_api_constraints", {"excluded": "n3"}),
        ("health_clears", {"node_id": "n6"}),
    ],
    "a-global-service-vetoed-beside-a-node-reported-failed": [
        ("health_report", {"node_id": "n5", "state": HealthState.FAILED}),
        ("wait", {"seconds": 6.0}),
        ("lease_takeover", {}),
        ("plugin_veto", {"node_id": "n6", "service_id": "s-pg"}),
        ("signal_lost", {"node_id": "n6", "source": "gossip"}),
        ("vetoes_end", {}),
        ("plugin_veto", {"node_id": "n4", "service_id": "s-api"}),
        ("edit_api_constraints", {"excluded": ""}),
        ("restore", {"node_id": "n2"}),
        ("plugin_veto", {"node_id": "n2", "service_id": "s-agent"}),
    ],
    "a-deploy-drops-the-steering-constraint-of-a-vetoed-global-service": [
        ("plugin_veto", {"node_id": "n4", "service_id": "s-agent"}),
        ("signals_recover", {"node_id": "n2"}),
        ("stack_deploy", {}),
        ("stack_deploy", {}),
        ("plugin_veto", {"node_id": "n2", "service_id": "s-agent"}),
        ("signals_recover", {"node_id": "n5"}),
        ("plugin_veto", {"node_id": "n3", "service_id": "s-db"}),
        ("signals_recover", {"node_id": "n5"}),
        ("stack_deploy", {}),
    ],
    "finding-2-a-global-service-vetoed-on-two-nodes": [
        ("plugin_veto", {"service_id": "s-agent", "node_id": "n2"}),
        ("wait", {"seconds": 0.5}),
        ("plugin_veto", {"service_id": "s-agent", "node_id": "n3"}),
    ],
    "finding-3-an-operator-rollout-and-scale-over-a-surge-then-a-report-where-two-run": [
        ("edit_api_constraints", {"excluded": "manager"}),
        ("crash", {"node_id": "n2"}),
        ("wait", {"seconds": 2.0}),
        ("wait", {"seconds": 0.5}),
        (
            "rollout_and_scale_over_a_record",
            {"pick": 0, "replicas": 5, "fails": False, "action": "pause"},
        ),
        ("wait", {"seconds": 2.0}),
        ("health_report_where_doubled", {"pick": 0, "state": HealthState.DEGRADED}),
        ("wait", {"seconds": 12.0}),
    ],
    "a-degraded-report-then-a-false-alarm-on-that-node-after-an-election": [
        ("controller_restart", {}),
        ("leader_change", {"node_id": "n2", "reports_after": 1.0}),
        ("crash_then_election", {"node_id": "n2", "reports_after": [0.5] * 6}),
        ("health_report", {"node_id": "n4", "state": HealthState.DEGRADED}),
        ("false_alarm", {"lasts": 1.0, "node_id": "n4", "sources": ("gossip", "probe")}),
    ],
    "a-veto-of-the-global-service-while-a-node-is-reported-failed": [
        ("health_report", {"node_id": "n5", "state": HealthState.FAILED}),
        ("lease_takeover", {}),
        ("lease_takeover", {}),
        ("wait", {"seconds": 0.5}),
        ("plugin_veto", {"node_id": "n2", "service_id": "s-api"}),
        ("signal_lost", {"node_id": "n2", "source": "gossip"}),
        ("vetoes_end", {}),
        ("plugin_veto", {"node_id": "n2", "service_id": "s-api"}),
        ("lease_takeover", {}),
        ("plugin_veto", {"node_id": "n2", "service_id": "s-agent"}),
    ],
    "surge-standing-when-an-operator-rollout-pauses": [
        ("scale", {"service_id": "s-api", "replicas": 4}),
        ("rollout", {"service_id": "s-api", "action": "pause", "fails": True}),
        ("cut_link", {"node_id": "n2"}),
    ],
}


@pytest.mark.parametrize("steps", list(FOUND.values()), ids=list(FOUND))
def test_the_sequences_the_machine_found_hold(steps: list[tuple[str, dict[str, object]]]) -> None:
    machine = SafetyMachine()
    for name, arguments in steps:
        getattr(machine, name)(**arguments)
        machine.counts_hold()
    machine.teardown()


def test_a_surge_written_before_any_node_reports_to_a_new_leader_holds() -> None:
    """An election right after a crash: every node `unknown`, the crashed one suspected.
    The surge goes out before any node reports and Swarm stacks it on the first that
    does; the counts hold and everything settles at the operator's counts."""
    machine = SafetyMachine()
    machine.crash("n2")
    machine.election([4.0, 4.0, 8.0, 4.0, 8.0, 8.0])
    machine.wait(2.0)
    assert machine.ctrl.services["s-api"].replicas == 4  # written while all are unknown
    assert all(n.state is not NodeState.READY for n in machine.ctrl.nodes.values())
    machine.wait(12.0)
    machine.counts_hold()
    machine.teardown()
