"""The long-running controller: watcher, resync timer, policy watch, one worker.

Every source of change only fires the coalescing trigger; the single worker runs whole
cycles. That makes ordering trivial (no two cycles overlap) and bursts cheap (a rolling
update's dozens of events cost one or two cycles).
"""

from __future__ import annotations

import logging
import math
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import docker
from opentelemetry.sdk.trace import SpanProcessor
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_never,
    wait_random_exponential,
)

from controller.adapters.docker_api import (
    DockerUnavailableError,
    check_manager,
    connect,
)
from controller.adapters.writes import Executor
from controller.runtime.policy_source import PolicySource
from controller.runtime.reconciler import Reconciler
from controller.runtime.tracing import (
    DecisionLog,
    Exporter,
    LogFormat,
    get_tracer,
    make_tracer_provider,
)
from controller.runtime.trigger import Trigger
from controller.runtime.watcher import EventWatcher

log = logging.getLogger(__name__)

POLICY_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class RunConfig:
    policy_path: Path | None = None
    dry_run: bool = False
    once: bool = False
    duration: float | None = None
    resync_seconds: float | None = None  # None: the policy's resync interval
    exporter: Exporter = "none"
    log_format: LogFormat = "logfmt"


class Controller:
    """The running controller; `run()` returns when stopped, cancelled or done."""

    def __init__(
        self,
        config: RunConfig,
        policy: PolicySource,
        *,
        out: TextIO = sys.stdout,
        client_factory: Callable[[], docker.DockerClient] = connect,
        span_processors: Iterable[SpanProcessor] = (),
        executor: Callable[[docker.DockerClient], Executor] | None = None,
        clock: Callable[[], float] = time.time,
        handle_signals: bool = True,
    ) -> None:
        self.config = config
        # Signal handlers can only be installed in the main thread; a controller run in
        # a thread (tests, embedding) is stopped with request_stop() instead.
        self._handle_signals = handle_signals
        self.policy = policy
        self.trigger = Trigger()
        self._out = out
        self._client_factory = client_factory
        self._provider = make_tracer_provider(config.exporter, extra=span_processors)
        self._decision_log = DecisionLog(out, config.log_format)
        self._executor = executor
        self._clock = clock
        self.reconciler: Reconciler | None = None
        self.watcher = EventWatcher(client_factory, self.trigger)
        self._scope: anyio.CancelScope | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None

    def say(self, text: str) -> None:
        self._decision_log.note(text, now=self._clock())

    async def _connect(self) -> docker.DockerClient:
        """Connect to a manager, retrying while the engine is unreachable."""
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(DockerUnavailableError),
            # A one-shot run reports an unreachable engine; a long-running one waits for it.
            stop=stop_after_attempt(3) if self.config.once else stop_never,
            reraise=True,
            wait=wait_random_exponential(multiplier=0.5, max=10.0),
            before_sleep=lambda state: self.say(
                "cannot reach the Docker engine, retrying: "
                f"{state.outcome and state.outcome.exception()}"
            ),
        ):
            with attempt:
                client = await anyio.to_thread.run_sync(self._client_factory)
                await anyio.to_thread.run_sync(check_manager, client)
                return client
        raise AssertionError("unreachable")  # AsyncRetrying without stop never gives up

    async def run(self) -> None:
        self._token = anyio.lowlevel.current_token()
        try:
            with anyio.move_on_after(self.config.duration or math.inf) as self._scope:
                await self._run()
        finally:
            self._provider.shutdown()

    def request_stop(self) -> None:
        """Stop a controller running in another thread (as SIGTERM does in-process)."""
        if self._scope is not None and self._token is not None:
            anyio.from_thread.run_sync(self._scope.cancel, token=self._token)

    async def _run(self) -> None:
        client = await self._connect()
        self.reconciler = Reconciler(
            client=client,
            policy=self.policy,
            tracer=get_tracer(self._provider),
            decision_log=self._decision_log,
            dry_run=self.config.dry_run,
            executor=self._executor(client) if self._executor else None,
            clock=self._clock,
        )
        if self.config.once:
            await anyio.to_thread.run_sync(self.reconciler.reconcile, {"once"})
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.watcher.run)
            tg.start_soon(self._resync_timer)
            tg.start_soon(self._policy_watch)
            if self._handle_signals:
                tg.start_soon(self._signals, tg.cancel_scope)
            self.trigger.fire("start")
            await self._worker()

    async def _worker(self) -> None:
        assert self.reconciler is not None
        backoff = 0.5
        while True:
            reasons = await self.trigger.wait()
            try:
                result = await anyio.to_thread.run_sync(self.reconciler.reconcile, reasons)
            except DockerUnavailableError as exc:
                self.say(f"cycle failed, the Docker engine is unreachable: {exc}")
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
                self.trigger.fire("retry")
                continue
            backoff = 0.5
            if result.wants_another:
                self.trigger.fire("conflict")

    def _resync_seconds(self) -> float:
        if self.config.resync_seconds is not None:
            return self.config.resync_seconds
        return self.policy().controller.resync_interval_seconds

    async def _resync_timer(self) -> None:
        # Tasks have no events: polling is how a task that failed or went pending is seen.
        while True:
            await anyio.sleep(self._resync_seconds())
            self.trigger.fire("resync")

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
