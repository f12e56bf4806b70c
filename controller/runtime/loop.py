"""The long-running controller: watcher, resync timer, policy watch, one worker.

Every source of change only fires the coalescing trigger; the single worker runs whole
cycles. That makes ordering trivial (no two cycles overlap) and bursts cheap (a rolling
update's dozens of events cost one or two cycles).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import math
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from opentelemetry.sdk.trace import SpanProcessor
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_never,
    wait_random_exponential,
)

from controller import __version__
from controller.adapters.agent_client import AgentError, discover_agents
from controller.adapters.docker_events import event_opener
from controller.adapters.engine import (
    ENGINE_ERRORS,
    REQUEST_SECONDS,
    ClusterObserver,
    DockerUnavailableError,
    EngineClient,
    check_manager,
    connect,
    engine_version,
    set_request_timeout,
)
from controller.adapters.errors import RetryableError
from controller.adapters.lease_store import ConfigLeaseStore, LeaseStore
from controller.adapters.tcp_probe import tcp_connects
from controller.adapters.write_fence import UNFENCED, WriteFence
from controller.adapters.writes import Executor, Rehearsal, docker_executor
from controller.core.decisions import Decision
from controller.runtime.cycle_recorder import CycleRecorder
from controller.runtime.cycle_retry import CycleRetry
from controller.runtime.cycle_trigger import Trigger
from controller.runtime.endpoints import Health, probe_routes
from controller.runtime.health_inputs import HealthConfig, build_inputs
from controller.runtime.http_server import TlsFiles
from controller.runtime.lease_keeper import LeaseConfig, LeaseKeeper, fenced
from controller.runtime.listeners import login_url, make_listeners
from controller.runtime.liveness import LivenessGatherer
from controller.runtime.metrics import Metrics
from controller.runtime.outage_timeouts import OutageTimeouts
from controller.runtime.plaintext import plaintext_secrets
from controller.runtime.policy_source import PolicySource
from controller.runtime.reconciler import CycleResult, Reconciler
from controller.runtime.report_limits import ReportLimits
from controller.runtime.tracing import (
    DecisionLog,
    Exporter,
    LogFormat,
    get_tracer,
    make_tracer_provider,
)
from controller.runtime.ui_access import UiAccess
from controller.runtime.watcher import EventWatcher
from controller.runtime.web_view import WebView, role_of
from controller.runtime.webhook import HealthApi

log = logging.getLogger(__name__)

POLICY_POLL_SECONDS = 1.0
# A cycle lists the task history itself once the resync timer's listing is this many
# resync intervals old (the timer's listings keep failing).
HISTORY_STALE_INTERVALS = 3
STARTUP_ERRORS: tuple[type[Exception], ...] = (RetryableError, *ENGINE_ERRORS)


@dataclass(frozen=True)
class RunConfig:
    policy_path: Path | None = None
    dry_run: bool = False
    once: bool = False
    duration: float | None = None
    resync_seconds: float | None = None  # None: the policy's resync interval
    exporter: Exporter = "none"
    log_format: LogFormat = "logfmt"
    lease: LeaseConfig | None = None  # None: a single instance, always the writer
    http: tuple[str, int] | None = None  # where the HTTP server listens (http_app.py)
    metrics_token: str | None = None  # with it, /metrics wants this bearer token
    health: HealthConfig | None = None  # webhook, placement plugins, node agents
    tls: TlsFiles | None = None  # the HTTP server's certificate (and client CA)
    ui: bool = True  # the web view at /ui
    ui_token: str | None = None  # None: one is made at start, and its login link said
    ui_hosts: tuple[str, ...] = ()  # host names the view answers to, beyond IP addresses
    # The container healthcheck's own listener (a unix socket no network client reaches).
    probe_socket: Path | None = None
    trace_url: str | None = None  # a trace in the OTLP backend's UI, {trace_id} in it


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


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
        self.lease = self._make_lease(lease_store)
        self.watcher = EventWatcher(event_opener(client_factory), self.trigger)
        self._scope: anyio.CancelScope | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        # Health and placement intelligence from outside Swarm (core/health).
        self.inputs = (
            build_inputs(
                config.health, discover=self._discover_agents, liveness=self._make_liveness
            )
            if config.health is not None
            else None
        )
        self.metrics = Metrics(
            policy,
            self.lease,
            agents=self._agents_reporting,
            plugin_failures=self._plugin_failures,
            skipped_calls=self._skipped_calls,
        )
        self.health = Health(started=time.monotonic(), loop_beat=time.monotonic(), lease=self.lease)
        # The engine client's request timeout, short through an outage (set on connect).
        self.timeouts = OutageTimeouts(lambda _: None, usual=REQUEST_SECONDS)
        self.view = (
            WebView(
                UiAccess.configured(
                    token=config.ui_token,
                    hosts=config.ui_hosts,
                    tls=config.tls is not None,
                ),
                trace_url=config.trace_url,
                clock=clock,
            )
            if config.ui
            else None
        )
        # Bound now, so a taken port or a bad certificate fails the start at once.
        webhook = self._make_webhook()
        self.listeners = make_listeners(
            http=config.http,
            webhook_address=config.health.webhook if config.health else None,
            probe_socket=config.probe_socket,
            probes=probe_routes(self.health, self.metrics, token=config.metrics_token),
            webhook=webhook.routes() if webhook is not None else (),
            view=self.view,
            tls=config.tls,
        )
        self.server = self.listeners.main
        self.probe_server = self.listeners.probe

    def _warn_plaintext(self) -> None:
        config = self.config
        for sentence in plaintext_secrets(
            http=config.http,
            tls=config.tls is not None,
            metrics_token=config.metrics_token is not None,
            ui=config.ui,
            health=config.health,
        ):
            log.warning("%s", sentence)  # stderr, where a person looks for trouble
            self.say(f"warning: {sentence}")

    def _announce_login(self) -> None:
        """A one-time login link, said once: when the controller made its token itself,
        or when the view listens on loopback only (`./dev run`), where the log is the
        person's own terminal. Never the token."""
        view = self.view
        if view is None or view.access.token is None:
            return
        main = self.listeners.main
        local = main is not None and all(_loopback(host) for host, _ in main.addresses)
        if self.config.ui_token is not None and not local:
            return
        code = view.access.login_code()
        url = login_url(self.listeners, code=code, tls=self.config.tls is not None)
        if url is not None:
            made = "no --ui-token-file given, " if self.config.ui_token is None else ""
            self.say(f"web view: {made}log in once within 10 minutes at {url}")

    def _make_liveness(self) -> LivenessGatherer:
        health = self.config.health or HealthConfig()
        return LivenessGatherer(
            client_factory=self._client_factory,
            connect=health.liveness_connect or tcp_connects,
            interval=health.liveness_interval,
            clock=self._clock,
            on_change=self._liveness_changed,
        )

    def _liveness_changed(self) -> None:
        """A liveness signal changed: a cycle, with short requests first if a manager's
        probe fails (the Raft leader's node may be gone: no request of it may hang)."""
        liveness = self.inputs.liveness if self.inputs is not None else None
        if liveness is not None:
            self.timeouts.manager_unreached(liveness.manager_unreached())
        self._fire_from_thread("liveness")

    def _plugin_failures(self) -> dict[str, int]:
        plugins = self.inputs.plugins if self.inputs is not None else None
        return dict(plugins.failures) if plugins is not None else {}

    def _skipped_calls(self) -> dict[str, int]:
        agents = self.inputs.agents if self.inputs is not None else None
        if agents is None:
            return {}
        return {c.kind: c.skipped for c in (agents.calls, agents.probe_calls)}

    def _agents_reporting(self) -> int | None:
        agents = self.inputs.agents if self.inputs is not None else None
        return agents.reporting() if agents is not None else None

    def _make_lease(self, store: Callable[[], LeaseStore] | None) -> LeaseKeeper | None:
        lease = self.config.lease
        if lease is None:
            return None

        def config_store() -> LeaseStore:
            client = self._client_factory()
            # A manager without a Raft leader (an election) hangs requests: a short timeout
            # lets a standby read again at once when the new Raft leader answers.
            client.api.timeout = max(1.0, lease.lifetime / 4)
            return ConfigLeaseStore(client, lease.name)

        factory = store or config_store
        return LeaseKeeper(
            lease,
            factory,
            say=self.say,
            on_acquire=lambda: self.trigger.fire("lease:acquired"),
        )

    def _make_webhook(self) -> HealthApi | None:
        health, inputs = self.config.health, self.inputs
        if health is None or inputs is None or health.webhook is None:
            return None
        return HealthApi(
            token=health.webhook_token,
            store=inputs.store,
            latest=inputs.latest,
            # A route of the server in the event loop: the trigger is fired directly.
            on_report=lambda report: self.trigger.fire(f"health:{report.state.value}"),
            clock=self._clock,
            max_body=health.webhook_max_body,
            role=lambda: "leader" if self.lease is None or self.lease.holds() else "standby",
            on_result=lambda result: self.metrics.webhook_reports.labels(result).inc(),
            limits=ReportLimits(
                escalations=health.webhook_escalations,
                escalation_seconds=health.webhook_escalation_seconds,
                replay_seconds=health.webhook_replay_seconds,
            ),
            say=self.say,
        )

    def _discover_agents(self, service: str, port: int, scheme: str) -> dict[str, str]:
        try:
            client = self._client_factory()
        except ENGINE_ERRORS as exc:
            raise AgentError(f"cannot reach the Docker engine: {exc}") from exc
        try:
            return discover_agents(client, service, port, scheme)
        finally:
            client.close()

    def _fire_from_thread(self, reason: str) -> None:
        if self._token is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is gone: stopping
            anyio.from_thread.run_sync(self.trigger.fire, reason, token=self._token)

    def say(self, text: str) -> None:
        self._decision_log.note(text, now=self._clock())

    async def _connect(self) -> EngineClient:
        """Connect to a manager, retrying while the engine is unreachable."""
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(DockerUnavailableError),
            # A one-shot run reports an unreachable engine; a long-running one waits for it.
            stop=stop_after_attempt(3) if self.config.once else stop_never,
            reraise=True,
            wait=wait_random_exponential(multiplier=0.5, max=10.0),
            before_sleep=lambda state: self._unreachable(
                f"{state.outcome and state.outcome.exception()}"
            ),
        ):
            with attempt:
                client = await anyio.to_thread.run_sync(self._client_factory)
                await anyio.to_thread.run_sync(check_manager, client)
                return client
        raise AssertionError("unreachable")  # AsyncRetrying without stop never gives up

    def _writer(self, client: EngineClient) -> Executor:
        """What executes the plan: a rehearsal in a dry run; else Docker (or the test's
        executor), behind the lease's fence, then the test pause hook if one is asked.
        Docker's executor passes the fence again before each attempt's request, and
        bounds the request by the lease's margin."""
        if self.config.dry_run:
            return Rehearsal(self.say)
        lease = self.lease
        fence = (
            WriteFence(check=lease.fence, within=lease.config.margin)
            if lease is not None
            else UNFENCED
        )
        executor = self._executor(client) if self._executor else docker_executor(client, fence)
        if lease is not None:
            executor = fenced(executor, lease.fence)
        try:  # the production image leaves this test hook out (deploy/Dockerfile)
            from controller.runtime.pause_hook import pausing  # noqa: PLC0415
        except ImportError:
            return executor
        return pausing(executor, self._planned, self.say)

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

    @staticmethod
    def _engine_version(client: EngineClient) -> str:
        try:
            return engine_version(client)
        except STARTUP_ERRORS as exc:
            return f"unknown ({exc})"

    def _started(self, client: EngineClient) -> None:
        """One line of what runs, how and where, before the first cycle."""
        config, lease = self.config, self.config.lease
        scheme = "https" if config.tls is not None else "http"
        listen = self.listeners.addresses()
        self._decision_log.started(
            {
                "version": __version__,
                "policy": str(config.policy_path or "(built-in defaults)"),
                "policy_sha256": self.policy.digest,
                "engine": self._engine_version(client),
                "mode": "dry-run" if config.dry_run else "writes",
                "lease": (
                    f"{lease.name} as {lease.holder}, lifetime {lease.lifetime:g} s"
                    if lease is not None
                    else "none: a single instance"
                ),
                "listen": " ".join(f"{scheme}://{h}:{p}" for h, p in listen) or "none",
            },
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
        retry = CycleRetry()
        timeouts = timeouts or OutageTimeouts(lambda _: None, usual=REQUEST_SECONDS)
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
