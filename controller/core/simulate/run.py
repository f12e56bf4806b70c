"""What-if: the real planner against a simulated swarm, following a scenario.

The controller is simulated as it runs: a cycle after every node or service change
(Swarm's events; the cycle runs at the next tick) and every resync interval (tasks have
no events), each one `plan()` on what the simulated swarm shows, its writes applied to
the simulated swarm, its memory carried to the next cycle. It starts with an empty
memory, like a controller started when the snapshot was taken.

Time moves in ticks (0.5 s by default) and only during `wait` steps; the other steps
act at the current time. Everything is deterministic: the same inputs give the same
timeline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.core.actions import Action, describe
from controller.core.decisions import LoggedDecision
from controller.core.kernel.ledger import moved_from
from controller.core.memory import Memory
from controller.core.model import Availability, ClusterSnapshot
from controller.core.plan import plan
from controller.core.simulate.scenario import Step
from controller.core.simulate.sim_values import SwarmTimings
from controller.core.simulate.swarm_model import SimSwarm
from controller.policy import Policy

DEFAULT_TICK = 0.5
_AVAILABILITY = {
    "drain": Availability.DRAIN,
    "pause": Availability.PAUSE,
    "activate": Availability.ACTIVE,
}


@dataclass(frozen=True, slots=True)
class Entry:
    at: float  # seconds since the start
    source: str  # "scenario", "swarm", "decision" or "write"
    text: str
    rule: str = ""  # for decisions and writes: the rule that decided
    action: Action | None = None  # for writes


@dataclass(frozen=True)
class Simulation:
    timeline: tuple[Entry, ...]
    initial: Mapping[str, Mapping[str, int]]  # service -> hostname -> running tasks
    final: Mapping[str, Mapping[str, int]]
    duration: float
    cycles: int
    writes: int


class _Run:
    def __init__(
        self,
        snapshot: ClusterSnapshot,
        policy: Policy,
        *,
        timings: SwarmTimings,
        start: float,
        tick: float,
        resync: float,
    ) -> None:
        self.swarm = SimSwarm(snapshot, timings, start)
        self.policy, self.start, self.tick, self.resync = policy, start, tick, resync
        self.memory = Memory()
        self.now = start
        self.next_resync = start
        self.timeline: list[Entry] = []
        self.previous: set[LoggedDecision] = set()
        self.cycles = self.writes = 0

    def entry(self, source: str, text: str, rule: str = "", action: Action | None = None) -> None:
        self.timeline.append(Entry(round(self.now - self.start, 3), source, text, rule, action))

    def flush_swarm(self) -> None:
        for text in self.swarm.notes:
            self.entry("swarm", text)
        self.swarm.notes.clear()

    def tick_once(self) -> None:
        self.swarm.step(self.now)
        self.flush_swarm()
        if self.swarm.changed or self.now >= self.next_resync - 1e-9:
            self.cycle()

    def cycle(self) -> None:
        self.cycles += 1
        self.swarm.changed = False
        self.next_resync = self.now + self.resync
        result = plan(
            snapshot=self.swarm.snapshot(), policy=self.policy, memory=self.memory, now=self.now
        )
        self.memory = result.memory
        # Like the decision log: a decision repeated unchanged is told once.
        for decision in result.decisions:
            if decision.logged() not in self.previous:
                # The write, if any, follows as its own entry.
                text = f"[{decision.rule}] {decision.subject}: {decision.outcome} - "
                self.entry("decision", text + decision.reason, decision.rule)
        self.previous = {d.logged() for d in result.decisions}
        for action in result.actions:
            rule = next((d.rule for d in result.decisions if d.action == action), "")
            self.entry("write", describe(action), rule, action)
            left = moved_from(action)
            if left and hasattr(action, "service_id"):
                self.memory = self.memory.note_move(action.service_id, self.now, left)
        self.writes += len(result.actions)
        self.swarm.apply(result.actions)
        self.flush_swarm()

    def wait(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now + self.tick <= end + 1e-9:
            self.now += self.tick
            self.tick_once()
        if self.now < end:
            self.now = end
            self.tick_once()

    def act(self, step: Step, node_ids: Mapping[str, str]) -> None:
        self.entry("scenario", step.describe())
        node_id = node_ids[step.node]
        if step.verb == "fail":
            self.swarm.fail(node_id)
        elif step.verb == "restore":
            self.swarm.restore(node_id)
        else:
            self.swarm.set_availability(node_id, _AVAILABILITY[step.verb])
        self.flush_swarm()


def simulate(
    snapshot: ClusterSnapshot,
    policy: Policy,
    steps: Sequence[Step],
    *,
    timings: SwarmTimings,
    start: float,
    tick: float = DEFAULT_TICK,
    resync: float | None = None,
) -> Simulation:
    """Run the scenario from the snapshot; `start` is the snapshot's time (epoch s)."""
    run = _Run(
        snapshot,
        policy,
        timings=timings,
        start=start,
        tick=tick,
        resync=resync if resync is not None else policy.controller.resync_interval_seconds,
    )
    initial = run.swarm.placement()
    node_ids = {n.hostname: n.id for n in snapshot.nodes} | {n.id: n.id for n in snapshot.nodes}
    run.tick_once()  # the controller's first cycle, on the snapshot as it is
    for step in steps:
        if step.verb == "wait":
            run.wait(step.seconds)
        else:
            run.act(step, node_ids)
    return Simulation(
        timeline=tuple(run.timeline),
        initial=initial,
        final=run.swarm.placement(),
        duration=run.now - start,
        cycles=run.cycles,
        writes=run.writes,
    )
