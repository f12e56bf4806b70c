"""The controller's hold on the engine: a manager connected to, retried while away, and
what executes each plan on it (a rehearsal, or writes behind the lease's fence)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.to_thread
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_never,
    wait_random_exponential,
)

from controller.adapters.engine import DockerUnavailableError, EngineClient, check_manager
from controller.adapters.write_fence import UNFENCED, WriteFence
from controller.adapters.writes import Executor, Rehearsal, docker_executor
from controller.core.decisions import Decision
from controller.runtime.lease_keeper import LeaseKeeper, fenced


async def connect_manager(
    client_factory: Callable[[], EngineClient],
    *,
    once: bool,
    on_retry: Callable[[str], None],
) -> EngineClient:
    """Connect to a manager, retrying while the engine is unreachable (`on_retry(why)`
    before each wait)."""
    async for attempt in AsyncRetrying(
        retry=retry_if_exception_type(DockerUnavailableError),
        # A one-shot run reports an unreachable engine; a long-running one waits for it.
        stop=stop_after_attempt(3) if once else stop_never,
        reraise=True,
        wait=wait_random_exponential(multiplier=0.5, max=10.0),
        before_sleep=lambda state: on_retry(f"{state.outcome and state.outcome.exception()}"),
    ):
        with attempt:
            client = await anyio.to_thread.run_sync(client_factory)
            await anyio.to_thread.run_sync(check_manager, client)
            return client
    raise AssertionError("unreachable")  # AsyncRetrying without stop never gives up


def plan_executor(
    client: EngineClient,
    *,
    dry_run: bool,
    lease: LeaseKeeper | None,
    executor: Callable[[EngineClient], Executor] | None,
    planned: Callable[[], tuple[Decision, ...]],
    say: Callable[[str], None],
) -> Executor:
    """What executes the plan: a rehearsal in a dry run; else Docker (or the test's
    executor), behind the lease's fence, then the test pause hook if one is asked.
    Docker's executor passes the fence again before each attempt's request, and
    bounds the request by the lease's margin."""
    if dry_run:
        return Rehearsal(say)
    fence = (
        WriteFence(check=lease.fence, within=lease.config.margin) if lease is not None else UNFENCED
    )
    writer = executor(client) if executor else docker_executor(client, fence)
    if lease is not None:
        writer = fenced(writer, lease.fence)
    try:  # the production image leaves this test hook out (deploy/Dockerfile)
        from controller.runtime.pause_hook import pausing  # noqa: PLC0415
    except ImportError:
        return writer
    return pausing(writer, planned, say)
