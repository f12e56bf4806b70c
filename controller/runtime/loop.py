"""The long-running controller: watcher, resync timer, policy watch, one worker.

Every source of change only fires the coalescing trigger; the single worker runs whole
cycles. That makes ordering trivial (no two cycles overlap) and bursts cheap (a rolling
update's dozens of events cost one or two cycles).
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import sys
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from opentelemetry.sdk.trace import SpanProcessor

from controller.adapters.docker_events import event_opener
from controller.adapters.engine import (
    REQUEST_SECONDS,
    ClusterObserver,
    EngineClient,
    connect,
    set_request_timeout,
)
from controller.adapters.errors import RetryableError
from controller.adapters.lease_store import LeaseStore
from controller.adapters.writes import Executor
from controller.core.decisions import Decision
from controller.runtime import input_wiring as wiring
from controller.runtime.cycle_recorder import CycleRecorder
from controller.runtime.cycle_retry import CycleRetry
from controller.runtime.cycle_trigger import Trigger
from controller.runtime.endpoints import Health, probe_routes
from controller.runtime.engine_session import connect_manager, plan_executor
from controller.runtime.health_inputs import HealthInputs, build_inputs
from controller.runtime.listeners import Listeners, make_listeners
from controller.runtime.metrics import Metrics
from controller.runtime.outage_timeouts import OutageTimeouts
from controller.runtime.policy_source import PolicySource
from controller.runtime.reconciler import CycleResult, Reconciler
from controller.runtime.run_config import RunConfig
from controller.runtime.start_notes import login_line, plaintext_warnings, started_fields
from controller.runtime.tracing import DecisionLog, get_tracer, make_tracer_provider
from controller.runtime.ui_access import UiAccess
from controller.runtime.watcher import EventWatcher
from controller.runtime.web_view import WebView, role_of

# RunConfig is declared apart; the command line and the tests import it from here.
__all__ = ["Controller", "RunConfig"]

log = logging.getLogger(__name__)

POLICY_POLL_SECONDS = 1.0
# A cycle lists the task history itself once the resync timer's listing is this many
# resync intervals old (the timer's listings keep failing).
HISTORY_STALE_INTERVALS = 3


def _cycle_failure(exc: Exception) -> tuple[str, str]:
    """The metric cause and the words for a failed cycle; the next cycle observes afresh,
    so nothing of the failed one is kept (the controller runs on its last good state)."""
    if isinstance(exc, RetryableError):
        return exc.cause, exc.words
    return "unexpected", "unexpectedly"


class Controller:
    """The running controller; `run()` returns when stopped, cancelled or done."""

    def __init__(
        self,
        config: RunConfig,
        policy: PolicySource,
        *,
        out: TextIO = sys.stdout,
        client_factory: Callable[[], EngineClient] = connect,
        span_processors: Iterable[SpanProcessor] = (),
        executor: Callable[[EngineClient], Executor] | None = None,
        clock: Callable[[], float] = time.time,
        handle_signals: bool = True,
        lease_store: Callable[[], LeaseStore] | None = None,
    ) -> None:
        self.config = config
        # Signal handlers can only be installed in the main thread; a controller run in
        # a thread (tests, embedding) is stopped with request_stop() instead.
        self._handle_signals = handle_signals
        self.policy = policy
        self.trigger = Trigger()
        self._out = out
        self._client_factory = client_factory
        self._provider = make_tracer_provider(
            config.exporter,
            extra=span_processors,
            instance=config.lease.holder if config.lease is not None else None,
        )
        self._decision_log = DecisionLog(out, config.log_format)
        self._executor = executor
        self._clock = clock
        self.reconciler: Reconciler | None = None
        self._observer: ClusterObserver | None = None
        self._recorder: CycleRecorder | None = None
        self.lease = wiring.lease_keeper(
            config.lease, client_factory, lease_store, say=self.say, trigger=self.trigger
        )
        self.watcher = EventWatcher(event_opener(client_factory), self.trigger)
        self._scope: anyio.CancelScope | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        # Health and placement intelligence from outside Swarm (core/health).
        self.inputs = self._make_inputs()
        self.metrics = Metrics(
            policy,
            self.lease,
            agents=lambda: wiring.agents_reporting(self.inputs),
            plugin_failures=lambda: wiring.plugin_failures(self.inputs),
            skipped_calls=lambda: wiring.skipped_calls(self.inputs),
        )
        self.health = Health(started=time.monotonic(), loop_beat=time.monotonic(), lease=self.lease)
        # The engine client's request timeout, short through an outage (set on connect).
        self.timeouts = OutageTimeouts(lambda _: None, usual=REQUEST_SECONDS)
        self.view = self._make_view()
        self.listeners = self._make_listeners()
        self.server = self.listeners.main
        self.probe_server = self.listeners.probe

    def _make_inputs(self) -> HealthInputs | None:
        health, client_factory = self.config.health, self._client_factory
        if health is None:
            return None
        return build_inputs(
            health,
            discover=wiring.agents_from(client_factory),
            liveness=lambda: wiring.liveness_gatherer(
                health,
                client_factory,
                clock=self._clock,
                on_change=self._liveness_changed,
            ),
        )

    def _liveness_changed(self) -> None:
        """A liveness signal changed: a cycle, with short requests first if a manager's
        probe fails (the Raft leader's node may be gone: no request of it may hang)."""
        liveness = self.inputs.liveness if self.inputs is not None else None
        if liveness is not None:
            self.timeouts.manager_unreached(liveness.manager_unreached())
        self._fire_from_thread("liveness")

    def _make_view(self) -> WebView | None:
        config = self.config
        if not config.ui:
            return None
        access = UiAccess.configured(
            token=config.ui_token, hosts=config.ui_hosts, tls=config.tls is not None
        )
        return WebView(access, trace_url=config.trace_url, clock=self._clock)

    def _make_listeners(self) -> Listeners:
        """Bound now, so a taken port or a bad certificate fails the start at once."""
        config = self.config
        webhook = wiring.health_webhook(
            config.health,
            self.inputs,
            trigger=self.trigger,
            clock=self._clock,
            role=lambda: "leader" if self.lease is None or self.lease.holds() else "standby",
            on_result=lambda result: self.metrics.webhook_reports.labels(result).inc(),
            say=self.say,
        )
        return make_listeners(
            http=config.http,
            webhook_address=config.health.webhook if config.health else None,
            probe_socket=config.probe_socket,
            probes=probe_routes(self.health, self.metrics, token=config.metrics_token),
            webhook=webhook.routes() if webhook is not None else (),
            view=self.view,
            tls=config.tls,
        )

    def _warn_plaintext(self) -> None:
        for sentence in plaintext_warnings(self.config):
            log.warning("%s", sentence)  # stderr, where a person looks for trouble
            self.say(f"warning: {sentence}")

    def _announce_login(self) -> None:
        """A one-time login link, said once (see `start_notes.login_line`)."""
        line = login_line(self.config, self.view, self.listeners)
        if line is not None:
            self.say(line)

    def _fire_from_thread(self, reason: str) -> None:
        if self._token is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is gone: stopping
            anyio.from_thread.run_sync(self.trigger.fire, reason, token=self._token)

    def say(self, text: str) -> None:
        self._decision_log.note(text, now=self._clock())

    async def _connect(self) -> EngineClient:
        """Connect to a manager, retrying while the engine is unreachable."""
        return await connect_manager(
            self._client_factory, once=self.config.once, on_retry=self._unreachable
        )

    def _writer(self, client: EngineClient) -> Executor:
        """What executes the plan (see `engine_session.plan_executor`)."""
        return plan_executor(
            client,
            dry_run=self.config.dry_run,
            lease=self.lease,
            executor=self._executor,
            planned=self._planned,
            say=self.say,
        )

    def _planned(self) -> tuple[Decision, ...]:
        return self.reconciler.planned if self.reconciler is not None else ()

    def _unreachable(self, why: str) -> None:
        self.health.last_error = f"the Docker engine is unreachable: {why}"
        self.say(f"cannot reach the Docker engine, retrying: {why}")

    async def run(self) -> None:
        self._token = anyio.lowlevel.current_token()
        try:
            with anyio.move_on_after(self.config.duration or math.inf) as self._scope:
                async with anyio.create_task_group() as tg:
                    # Probes answer from the start, also while the engine is still away.
                    tg.start_soon(self._heartbeat)
                    # The webhook too: until the first observation it answers 503.
                    for server in self.listeners.all():
                        tg.start_soon(server.run)
                    self._announce_login()
                    self._warn_plaintext()
                    await self._run()
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The probe tasks never fail on their own: surface the body's error as it is
            # (NotAManagerError, DockerUnavailableError), not wrapped in a group.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            self._provider.shutdown()

    def request_stop(self) -> None:
        """Stop a controller running in another thread (as SIGTERM does in-process)."""
        if self._scope is not None and self._token is not None:
            anyio.from_thread.run_sync(self._scope.cancel, token=self._token)

    def _started(self, client: EngineClient) -> None:
        """One line of what runs, how and where, before the first cycle."""
        self._decision_log.started(
            started_fields(self.config, self.policy.digest, client, self.listeners),
            now=self._clock(),
        )

    async def _run(self) -> None:
        client = await self._connect()
        await anyio.to_thread.run_sync(self._started, client)
        lease = self.lease
        # Finished tasks once per resync interval, listed by the resync timer off the
        # worker (failures are seen as fast as a task that went pending is, and no
        # cycle waits on the listing); a cycle lists them itself only at the start, or
        # when the timer's listings have failed for three intervals.
        # With PLACEMENT_RECORD_DIR set, every cycle's inputs are recorded (tests/replay).
        recorder = self._recorder = CycleRecorder.from_env(
            self.policy, dry_run=self.config.dry_run, watches=not self.config.once
        )
        self._observer = ClusterObserver(
            client,
            history_every=lambda: HISTORY_STALE_INTERVALS * self._resync_seconds(),
            tap=recorder.tap if recorder is not None else None,
        )
        standby = lease.standby_reason if lease else lambda: None
        enrich = self.inputs.enrich if self.inputs is not None else None
        self.reconciler = Reconciler(
            observe=self._observer,
            policy=self.policy,
            tracer=get_tracer(self._provider),
            decision_log=self._decision_log,
            executor=self._writer(client),
            clock=recorder.clock(self._clock) if recorder is not None else self._clock,
            standby=recorder.standby(standby) if recorder is not None else standby,
            enrich=recorder.enrich(enrich) if recorder and enrich else enrich,
            startup_watch=not self.config.once,
        )
        if self.config.once:
            await anyio.to_thread.run_sync(self.reconciler.reconcile, {"once"})
            return
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.watcher.run)
                tg.start_soon(self._resync_timer)
                tg.start_soon(self._policy_watch)
                if lease is not None:
                    tg.start_soon(lease.run)
                if self.inputs is not None and self.inputs.agents is not None:
                    tg.start_soon(self.inputs.agents.run)
                if self.inputs is not None and self.inputs.liveness is not None:
                    tg.start_soon(self.inputs.liveness.run)
                if self.inputs is not None and self.inputs.plugins is not None:
                    # Off the cycle: a failover never waits on a plugin.
                    tg.start_soon(self.inputs.plugins.run, lambda: self.trigger.fire("plugins"))
                if self._handle_signals:
                    tg.start_soon(self._signals, tg.cancel_scope)
                self.trigger.fire("start")
                self.timeouts = OutageTimeouts(
                    partial(set_request_timeout, client), usual=REQUEST_SECONDS
                )
                await self._worker(self.timeouts)
        finally:
            # The worker has finished its last write: the lease can go at once.
            if lease is not None:
                await lease.release()

    async def _worker(self, timeouts: OutageTimeouts | None = None) -> None:
        assert self.reconciler is not None
        timeouts = timeouts or OutageTimeouts(lambda _: None, usual=REQUEST_SECONDS)
        retry = CycleRetry()
        while True:
            reasons = await self.trigger.wait()
            started = self.health.cycle_started = time.monotonic()
            try:
                result = await anyio.to_thread.run_sync(self.reconciler.reconcile, reasons)
            except Exception as exc:  # one failed cycle must not end the controller
                cause, why = _cycle_failure(exc)
                self.health.cycle_started = None
                self.health.last_error = f"{why}: {exc}"
                self.metrics.cycle_errors.labels(cause).inc()
                now = time.monotonic()
                if retry.should_say(f"cycle failed, {why}: {exc}", now):
                    self.say(f"cycle failed, {why}: {exc}")
                if cause == "unexpected":
                    log.error("reconcile cycle failed", exc_info=exc)
                delay = retry.failed(cause, now)
                timeouts.failed(retry, cause, now)  # no request of the next hangs for long
                await anyio.sleep(delay)
                self.trigger.fire("retry")
                continue
            self._record(result, time.monotonic() - started)
            if self.view is not None:
                self.view.update(result, self.policy(), role_of(result.standby))
            retry.succeeded()
            timeouts.succeeded()
            if result.wants_another:
                self.trigger.fire("conflict")

    def _record(self, result: CycleResult, seconds: float) -> None:
        if self._recorder is not None:
            self._recorder.outcome(result.decisions, result.executed, result.conflict)
        self.health.cycle_started = None
        self.health.last_error = None
        self.health.cycles_done += 1
        self.metrics.record_cycle(
            seconds=seconds,
            leader=result.standby is None,
            decisions=result.decisions,
            executed=result.executed,
            conflict=result.conflict is not None,
            failed=result.failed,
        )
        if result.snapshot is not None:
            self.metrics.record_state(
                result.snapshot,
                result.plan.resolved,
                self._clock(),
                policy=self.policy(),
                decisions=result.plan.decisions,
            )

    async def _heartbeat(self) -> None:
        # /healthz reports a loop that stopped ticking (a blocked event loop).
        while True:
            self.health.loop_beat = time.monotonic()
            await anyio.sleep(1.0)

    def _resync_seconds(self) -> float:
        if self.config.resync_seconds is not None:
            return self.config.resync_seconds
        return self.policy().controller.resync_interval_seconds

    async def _resync_timer(self) -> None:
        # Tasks have no events: polling is how a task that failed or went pending is seen.
        while True:
            await anyio.sleep(self._resync_seconds())
            await self._refresh_history()
            self.trigger.fire("resync")

    async def _refresh_history(self) -> None:
        """The finished tasks listed beside the worker, for the resync cycle to find."""
        if self._observer is None:
            return
        try:
            await anyio.to_thread.run_sync(self._observer.refresh_history)
        except Exception as exc:  # the cycle keeps the last listing's failures
            cause, why = _cycle_failure(exc)
            self.say(f"task history not listed, {why}: {exc}")
            if cause == "unexpected":
                log.error("listing the task history failed", exc_info=exc)

    async def _policy_watch(self) -> None:
        while True:
            await anyio.sleep(POLICY_POLL_SECONDS)
            if self.policy.changed_on_disk():
                self._reload("file changed")

    def _reload(self, why: str) -> None:
        self.say(f"{why}: {self.policy.reload()}")
        self.trigger.fire("policy")

    async def _signals(self, scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    self._reload("SIGHUP")
                    continue
                self.say(f"{signal.Signals(signum).name}: stopping")
                scope.cancel()
                return
