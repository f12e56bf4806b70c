"""Asks the placement plugins, all at once under one deadline, off the reconcile cycle.

A round asks every plugin in parallel (a thread each: the calls block) and waits for
them until one deadline (`--plugin-deadline`, 1 s): a plugin that has not answered by
then counts as down, its answers of that round are dropped, and it is not asked again
for `retry_after` seconds, so a hung plugin costs one deadline now and then, never one
per round. A plugin still busy with an earlier call is not asked again meanwhile (its
thread ends with the call's own timeout). Its last vetoes go with it (the deny labels
they caused are lifted, which moves nothing back); its last health word stands until
that word's ttl. Plugins are discovered anew each round and activated once.

In the running controller the rounds happen in the background (`run`): each cycle takes
the last round's answers at once and wakes the next round, which asks about the snapshot
that cycle observed; answers that change trigger a cycle of their own. So a failover
cycle never waits on a plugin. Only the first cycle waits, for the first round (at most
the deadline): planning without any answer would lift every plugin's vetoes at start.
Without the background task (`run --once`, tests) each gather is one round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread

from controller.adapters.plugins import (
    PluginError,
    PluginRef,
    activate,
    discover_plugins,
    filter_nodes,
    node_health,
    score_nodes,
)
from controller.core.model import ClusterSnapshot
from controller.core.outside_inputs import HealthReport, PluginAdvice, PluginVeto, SourceStatus

log = logging.getLogger(__name__)

DEFAULT_DEADLINE_SECONDS = 1.0
IDLE_ROUND_SECONDS = 5.0  # a round without a cycle asking: health words stay fresh
MAX_THREADS = 16


@dataclass(frozen=True)
class _Answer:
    implements: bool  # False: another kind of Docker plugin, asked nothing more
    vetoes: tuple[PluginVeto, ...] = ()
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    health: tuple[HealthReport, ...] = ()


@dataclass
class _State:
    ref: PluginRef
    active: bool | None = None  # None: not activated yet; False: not a PlacementDriver
    failed_at: float | None = None
    problem: str = ""
    call: Future[_Answer] | None = None  # the call in flight, if any


@dataclass(frozen=True)
class Gathered:
    advice: PluginAdvice = field(default_factory=PluginAdvice)
    health: tuple[HealthReport, ...] = ()
    unavailable: tuple[SourceStatus, ...] = ()

    def gist(self) -> tuple[object, ...]:
        """What a plan depends on, without the health words' expiry (renewed each round)."""
        return (
            tuple(
                sorted((v.plugin, v.service_id, v.node_id, v.reason) for v in self.advice.vetoes)
            ),
            tuple(sorted((s, tuple(sorted(n.items()))) for s, n in self.advice.scores.items())),
            tuple(sorted((h.node_id, h.state.value, h.source, h.reason) for h in self.health)),
            tuple(sorted((u.name, u.problem) for u in self.unavailable)),
        )


def _ask(
    ref: PluginRef, activated: bool, snapshot: ClusterSnapshot, now: float, timeout: float
) -> _Answer:
    """One plugin's answers (in a pool thread); PluginError when any call fails."""
    if not activated and not activate(ref, timeout=timeout):
        return _Answer(implements=False)
    services = tuple(snapshot.services)
    return _Answer(
        implements=True,
        vetoes=filter_nodes(ref, snapshot, services, timeout=timeout),
        scores=score_nodes(ref, snapshot, services, timeout=timeout),
        health=node_health(ref, snapshot, now=now, timeout=timeout),
    )


class PluginHost:
    def __init__(
        self,
        dirs: Iterable[str | Path],
        *,
        timeout: float = 2.0,
        deadline: float = DEFAULT_DEADLINE_SECONDS,
        retry_after: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dirs = tuple(dirs)
        self.timeout, self.deadline = timeout, deadline
        self.retry_after, self._monotonic = retry_after, monotonic
        self._plugins: dict[str, _State] = {}
        self._pool = ThreadPoolExecutor(MAX_THREADS, thread_name_prefix="plugin")
        self._round_lock = threading.Lock()  # one round at a time
        self._lock = threading.Lock()  # what the cycle and the background share
        self._background = False
        self._wake = threading.Event()
        self._wanted: tuple[ClusterSnapshot, float, float] | None = None  # snapshot, now, at
        self._last: Gathered | None = None
        self.rounds = 0
        self.failures: Counter[str] = Counter()  # plugin -> calls that failed (metrics)

    # --- the cycle's side ----------------------------------------------------------------

    def gather(self, snapshot: ClusterSnapshot, *, now: float) -> Gathered:
        """The plugins' advice for a cycle: the last round's, at once, while rounds run in
        the background (the first cycle waits for the first round); else one round now."""
        if not self._background:
            return self.ask(snapshot, now=now)
        with self._lock:
            self._wanted = (snapshot, now, self._monotonic())
            last = self._last
        if last is not None:
            self._wake.set()
            return last
        got = self.ask(snapshot, now=now)  # the first round: ends by the deadline
        with self._lock:
            self._last = got
        return got

    # --- the background ------------------------------------------------------------------

    async def run(self, on_change: Callable[[], None]) -> None:
        """Rounds in the background until cancelled: one after every cycle's gather, and
        one every IDLE_ROUND_SECONDS; `on_change()` when the advice differs from the last."""
        self._background = True
        try:
            while True:
                await anyio.to_thread.run_sync(
                    self._wake.wait, IDLE_ROUND_SECONDS, abandon_on_cancel=True
                )
                self._wake.clear()
                with self._lock:
                    wanted, before = self._wanted, self._last
                if wanted is None:
                    continue  # no cycle has observed the swarm yet
                snapshot, now, at = wanted
                elapsed = self._monotonic() - at
                got = await anyio.to_thread.run_sync(
                    self._ask_at, snapshot, now + elapsed, abandon_on_cancel=True
                )
                with self._lock:
                    self._last = got
                if before is not None and got.gist() != before.gist():
                    on_change()
        finally:
            self._background = False

    # --- one round -----------------------------------------------------------------------

    def ask(self, snapshot: ClusterSnapshot, *, now: float) -> Gathered:
        """Ask every plugin at once; whatever has not answered by the deadline is down."""
        with self._round_lock:
            started = self._monotonic()
            got = self._round(snapshot, now, started)
            self.rounds += 1
            return got

    def _ask_at(self, snapshot: ClusterSnapshot, now: float) -> Gathered:
        return self.ask(snapshot, now=now)

    def _round(self, snapshot: ClusterSnapshot, now: float, started: float) -> Gathered:
        unavailable: list[SourceStatus] = []
        asked = self._start_calls(snapshot, now, unavailable)
        left = max(0.0, self.deadline - (self._monotonic() - started))
        wait_for_futures(asked.values(), timeout=left)
        return _merge(self._answers(asked, unavailable), unavailable)

    def _start_calls(
        self, snapshot: ClusterSnapshot, now: float, unavailable: list[SourceStatus]
    ) -> dict[str, Future[_Answer]]:
        """Discover the plugins and ask each that may be asked now, in the pool; those
        still waiting out a failure or busy with an earlier call go to `unavailable`."""
        refs, problems = discover_plugins(self.dirs)
        for problem in problems:
            log.warning("%s", problem)
        current = {r.name: r for r in refs}
        for name in [n for n, s in self._plugins.items() if current.get(n) != s.ref]:
            del self._plugins[name]  # gone, or moved to another address: start afresh
        asked: dict[str, Future[_Answer]] = {}
        for name, ref in sorted(current.items()):
            if name not in self._plugins and ref.endpoint.in_clear():
                log.warning(
                    "placement plugin %s at %s speaks plain HTTP across the network: each "
                    "round sends it every node and service with their labels, in clear, "
                    "and its vetoes and health words can be forged on the way; serve it on "
                    "a unix socket or at an https:// address",
                    name,
                    ref.endpoint.address,
                )
            state = self._plugins.setdefault(name, _State(ref))
            if state.failed_at is not None:
                if self._monotonic() - state.failed_at < self.retry_after:
                    unavailable.append(SourceStatus("plugin", name, state.problem))
                    continue
                state.active = None  # try again from the handshake
            if state.active is False:
                continue  # another kind of Docker plugin: not ours
            if state.call is not None and not state.call.done():
                self._down(state, "still busy with an earlier call", unavailable)
                continue
            state.call = self._pool.submit(
                _ask, ref, bool(state.active), snapshot, now, self.timeout
            )
            asked[name] = state.call
        return asked

    def _answers(
        self, asked: dict[str, Future[_Answer]], unavailable: list[SourceStatus]
    ) -> list[tuple[str, _Answer]]:
        """The answers in by the deadline, by plugin name; a plugin that failed or is late
        is marked down and goes to `unavailable`."""
        answers: list[tuple[str, _Answer]] = []
        for name, call in sorted(asked.items()):
            state = self._plugins[name]
            if not call.done():
                self._down(state, f"no answer within the {self.deadline:g} s deadline", unavailable)
                continue
            try:
                answer = call.result()
            except PluginError as exc:
                self._down(state, str(exc), unavailable)
                continue
            except Exception as exc:  # a plugin's answer must never end the controller
                log.error("placement plugin %s: unexpected failure", name, exc_info=exc)
                self._down(state, f"unexpected failure: {exc!r}", unavailable)
                continue
            state.active, state.failed_at, state.problem = answer.implements, None, ""
            if answer.implements:
                answers.append((name, answer))
        return answers

    def _down(self, state: _State, why: str, unavailable: list[SourceStatus]) -> None:
        state.failed_at, state.problem, state.active = self._monotonic(), f"down: {why}", None
        self.failures[state.ref.name] += 1
        log.warning("placement plugin %s: %s", state.ref.name, why)
        unavailable.append(SourceStatus("plugin", state.ref.name, state.problem))


def _merge(answers: list[tuple[str, _Answer]], unavailable: list[SourceStatus]) -> Gathered:
    vetoes: list[PluginVeto] = []
    scores: dict[str, dict[str, float]] = {}
    health: list[HealthReport] = []
    for _, answer in answers:
        vetoes.extend(answer.vetoes)
        health.extend(answer.health)
        for service_id, per_node in answer.scores.items():
            mine = scores.setdefault(service_id, {})
            for node_id, score in per_node.items():
                mine[node_id] = mine.get(node_id, 0.0) + score
    advice = PluginAdvice(
        vetoes=tuple(vetoes), scores=scores, answered=tuple(name for name, _ in answers)
    )
    return Gathered(advice=advice, health=tuple(health), unavailable=tuple(unavailable))
