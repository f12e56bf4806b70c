"""One reconcile cycle: observe -> plan (with guards) -> execute, traced end to end.

Cycles are synchronous (observing and writing block) and run one at a time in a worker
thread. How to observe and how to write are passed in (the adapters' Docker ones in
production, a rehearsal for a dry run, wrappers for the lease's fence and test pauses),
so a cycle runs from a snapshot alone and has no branch for any of them.
A conflict ends the cycle at once and asks for another: the next plan is made from a
fresh observation instead of retrying a write computed from a stale one. A write Docker
refuses (a 4xx that is no conflict) fails alone: a decision says so, its object waits
(write_backoff) and the rest of the plan goes on. Failover's writes go first
(write_order), so nothing behind them can hold them up, and together, a few at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from controller.adapters.engine import ConflictError, GoneError
from controller.adapters.writes import Executor, Rehearsal, WriteRefusedError
from controller.core.actions import Action, describe, subject_of, target_of
from controller.core.clock import utc_time
from controller.core.decisions import Decision, Outcome
from controller.core.kernel.ledger import moved_from
from controller.core.memory import Memory
from controller.core.model import ClusterSnapshot
from controller.core.plan import Plan, plan
from controller.policy import Policy
from controller.runtime.tracing import DecisionLog, record_decision
from controller.runtime.write_backoff import Refusal, WriteBackoff
from controller.runtime.write_order import execution_order

log = logging.getLogger(__name__)
RULE = "execute"
# Failover's writes in flight at once (runtime/write_order): enough to overlap the round
# trips and Raft commits, few enough not to crowd a manager under load.
WRITES_IN_FLIGHT = 8
_WRITE_OUTCOMES = (ConflictError, GoneError, WriteRefusedError)
WriteOutcome = ConflictError | GoneError | WriteRefusedError | None


@dataclass
class CycleResult:
    plan: Plan
    executed: list[Action] = field(default_factory=list)
    failed: list[Action] = field(default_factory=list)  # refused by Docker
    # Decisions made while executing: writes refused, writes held back by a refusal.
    outcomes: list[Decision] = field(default_factory=list)
    conflict: str | None = None
    standby: str | None = None  # why this replica planned but wrote nothing (the lease)
    snapshot: ClusterSnapshot | None = None  # what the plan was made from (plan, explain)
    logged: list[Decision] = field(default_factory=list)  # new in the log this cycle
    trace_id: str | None = None  # the cycle's trace, for links to an OTLP backend

    @property
    def wants_another(self) -> bool:
        return self.conflict is not None

    @property
    def decisions(self) -> tuple[Decision, ...]:
        return (*self.plan.decisions, *self.outcomes)


class Reconciler:
    def __init__(
        self,
        *,
        observe: Callable[[], ClusterSnapshot],
        executor: Executor,
        policy: Callable[[], Policy],
        tracer: trace.Tracer,
        decision_log: DecisionLog,
        clock: Callable[[], float] = time.time,
        standby: Callable[[], str | None] = lambda: None,
        enrich: Callable[[ClusterSnapshot, float], ClusterSnapshot] | None = None,
        startup_watch: bool = False,
    ) -> None:
        self._observe = observe
        self._policy = policy
        self._tracer = tracer
        self._log = decision_log
        self._execute = executor
        # A rehearsal writes nothing, so nothing is remembered of its writes.
        self._dry_run = isinstance(executor, Rehearsal)
        self._clock = clock
        # A standby replica plans every cycle too, so its memory (node readiness, losses)
        # is warm when it takes the lease over; it logs and writes nothing.
        self._standby = standby
        # Health and placement input from outside Swarm (webhook, plugins, agents).
        self._enrich = enrich
        # A long-running controller watches the swarm a while after it starts before it
        # moves tasks (core/rules/owners); a one-shot plan shows the moves it would make.
        self.memory = Memory(watches=startup_watch)
        self._was_standby = False  # the last cycle planned as a standby
        # The decisions of the plan being executed (what an executor wrapper may read).
        self.planned: tuple[Decision, ...] = ()
        self.backoff = WriteBackoff()
        self.cycles = 0
        self.conflicts = 0

    def reconcile(self, reasons: set[str]) -> CycleResult:
        self.cycles += 1
        with self._tracer.start_as_current_span("reconcile") as span:
            span.set_attribute("placement.cycle", self.cycles)
            span.set_attribute("placement.reasons", sorted(reasons))
            span.set_attribute("placement.dry_run", self._dry_run)
            with self._tracer.start_as_current_span("observe") as observe_span:
                snapshot = self._observe()
                observe_span.set_attribute("placement.nodes", len(snapshot.nodes))
                observe_span.set_attribute("placement.services", len(snapshot.services))
                observe_span.set_attribute("placement.tasks", len(snapshot.tasks))
            now = self._clock()
            standby = self._standby()
            if standby is None and self._was_standby:
                # Taking the lease over: what speculative failover waits for before a
                # trim starts again (core/rules/failover/speculative).
                self.memory = self.memory.taking_over()
            self._was_standby = standby is not None
            if self._enrich is not None:
                with self._tracer.start_as_current_span("gather"):
                    snapshot = self._enrich(snapshot, now)
            with self._tracer.start_as_current_span("plan") as plan_span:
                result = plan(snapshot=snapshot, policy=self._policy(), memory=self.memory, now=now)
                plan_span.set_attribute("placement.actions", len(result.actions))
                for decision in result.decisions:
                    record_decision(plan_span, decision)
            self.memory = result.memory
            self.planned = result.decisions
            cycle = CycleResult(
                plan=result,
                standby=standby,
                snapshot=snapshot,
                trace_id=format(span.get_span_context().trace_id, "032x"),
            )
            span.set_attribute("placement.role", "leader" if cycle.standby is None else "standby")
            if cycle.standby is not None:
                span.set_attribute("placement.standby", cycle.standby)
                return cycle
            order = execution_order(result.actions, result.early)
            held = self._held(list(order), now)
            cycle.outcomes.extend(_held_decision(a, r) for a, r in held.values())
            cycle.logged = self._log.write(cycle.decisions, now=now)
            with self._tracer.start_as_current_span("execute") as execute_span:
                execute_span.set_attribute("placement.dry_run", self._dry_run)
                for phase, together in (
                    (order.nodes, False),
                    (order.failover, not self._dry_run),
                    (order.rest, False),
                ):
                    todo = [a for a in phase if target_of(a) not in held]
                    if not self._execute_phase(todo, cycle, now, together=together):
                        break
                for decision in cycle.outcomes:
                    record_decision(execute_span, decision)
            if cycle.failed:  # logged now, with the plan's (already logged) to keep it deduplicated
                cycle.logged += self._log.write(cycle.decisions, now=now)
            if cycle.conflict:
                span.set_attribute("placement.conflict", cycle.conflict)
            return cycle

    def _held(
        self, order: list[Action], now: float
    ) -> dict[tuple[str, str], tuple[Action, Refusal]]:
        """The writes a recent refusal holds back, by object (one write each per cycle)."""
        self.backoff.forget_unplanned(tuple(order), now)
        held: dict[tuple[str, str], tuple[Action, Refusal]] = {}
        for action in order:
            refusal = self.backoff.held(action, now)
            if refusal is not None:
                held[target_of(action)] = (action, refusal)
        return held

    def _execute_phase(
        self, actions: list[Action], cycle: CycleResult, now: float, *, together: bool
    ) -> bool:
        """Write the actions, one after another or (`together`, distinct objects that
        depend on each other in nothing) up to WRITES_IN_FLIGHT at once; False ends the
        cycle (a conflict: observe again first). Together, every write already sent
        finishes first, and the bookkeeping follows the plan's order either way."""
        if not together or len(actions) < 2:
            return all(self._settle(a, self._send(a), cycle, now) for a in actions)
        workers = min(WRITES_IN_FLIGHT, len(actions))
        with ThreadPoolExecutor(workers, thread_name_prefix="write") as pool:
            # Each write's span belongs to this cycle's trace: the context goes along.
            sent = [pool.submit(copy_context().run, self._send, a) for a in actions]
            outcomes = [
                (a, f.exception() or f.result()) for a, f in zip(actions, sent, strict=True)
            ]
        going = True
        unexpected: BaseException | None = None
        for action, outcome in outcomes:
            if isinstance(outcome, _WRITE_OUTCOMES) or outcome is None:
                going = self._settle(action, outcome, cycle, now) and going
            elif unexpected is None:
                unexpected = outcome
        if unexpected is not None:
            raise unexpected  # as a write sent alone would (the lease's fence, say)
        return going

    def _send(self, action: Action) -> WriteOutcome:
        """One write, in its own span; the outcomes the cycle handles are returned."""
        with self._tracer.start_as_current_span(f"action {action.kind}") as span:
            span.set_attribute("placement.action", describe(action))
            try:
                self._execute(action)
            except _WRITE_OUTCOMES as exc:
                problem = exc.problem if isinstance(exc, WriteRefusedError) else str(exc)
                span.set_status(Status(StatusCode.ERROR, problem))
                return exc
            return None

    def _settle(
        self, action: Action, outcome: WriteOutcome, cycle: CycleResult, now: float
    ) -> bool:
        """Record one write's outcome; False ends the cycle (a conflict)."""
        if isinstance(outcome, ConflictError | GoneError):
            cycle.conflict = cycle.conflict or str(outcome)
            self.conflicts += 1
            log.info("conflict, observing again: %s", outcome)
            return False
        if isinstance(outcome, WriteRefusedError):
            refusal = self.backoff.refused(action, outcome.problem, now)
            cycle.failed.append(action)
            cycle.outcomes.append(_refused_decision(action, refusal))
            log.warning("write refused: %s: %s", describe(action), outcome.problem)
            return True
        if self._dry_run:
            return True
        self.backoff.succeeded(action)
        cycle.executed.append(action)
        left = moved_from(action)
        if left and hasattr(action, "service_id"):
            self.memory = self.memory.note_move(action.service_id, self._clock(), left)
        return True


def _refused_decision(action: Action, refusal: Refusal) -> Decision:
    return Decision(
        RULE,
        subject_of(action),
        Outcome.FAILED,
        f"Docker refused the write ({refusal.problem}); the rest of the plan goes on, and "
        f"this write waits {refusal.wait:g} s (refusal {refusal.refusals} in a row)",
        action=action,
    )


def _held_decision(action: Action, refusal: Refusal) -> Decision:
    until = utc_time(refusal.retry_at)
    return Decision(
        RULE,
        subject_of(action),
        Outcome.BACKOFF,
        f"Docker refused this write {refusal.refusals} time(s) in a row, last: "
        f"{refusal.problem}; not tried again before {until}",
        action=action,
    )
