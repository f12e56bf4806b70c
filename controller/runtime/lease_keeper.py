"""Keeping the leader lease, and the fence every write passes through.

Every replica runs a LeaseKeeper on the same lease config (adapters/lease_store.py). The
holder renews every third of the lifetime; the others read the labels often (a tenth of
the lifetime, at most a second) so that they take over soon after the lifetime of a
silent holder ends. `fence()` is called in the worker thread right before each write,
and again right before each attempt's request (a write is retried on a transient
answer): it lets the request through only while this replica's lease has more than the
safety margin left, by its own monotonic clock, and the request must be answered within
that margin (adapters/write_fence). A holder that is paused or cut off from the managers
stops writing by itself, without having to learn anything.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.to_thread

from controller.adapters.engine import (
    ENGINE_ERRORS,
    ConflictError,
    DockerUnavailableError,
    GoneError,
    TransientError,
)
from controller.adapters.lease_store import LeaseStore
from controller.core.actions import Action
from controller.core.lease import (
    LeaseView,
    Step,
    decide,
    new_lease,
    released_lease,
)

log = logging.getLogger(__name__)

DEFAULT_LIFETIME_SECONDS = 15.0
RELEASE_TIMEOUT_SECONDS = 3.0
# Swarm's rule for config names (swarmkit validateAnnotations), checked at the start.
CONFIG_NAME = re.compile(r"[a-zA-Z0-9]+(?:[a-zA-Z0-9-_.]*[a-zA-Z0-9])?")
STORE_ERRORS: tuple[type[Exception], ...] = (
    DockerUnavailableError,
    TransientError,
    GoneError,
    *ENGINE_ERRORS,
)
RELEASE_ERRORS: tuple[type[Exception], ...] = (ConflictError, *STORE_ERRORS)


class NotLeaderError(ConflictError):
    """A write refused by the fence: another replica may hold the lease by now."""


@dataclass(frozen=True)
class LeaseConfig:
    name: str  # the Docker config whose labels hold the lease, shared by every replica
    holder: str  # this replica's name in the holder label
    lifetime: float = DEFAULT_LIFETIME_SECONDS

    def __post_init__(self) -> None:
        if not 1.0 <= self.lifetime <= 600.0:
            raise ValueError(f"lease lifetime must be 1 to 600 seconds, not {self.lifetime:g}")
        if not self.holder:
            raise ValueError("the lease needs a holder name")
        if len(self.name) > 64 or not CONFIG_NAME.fullmatch(self.name):
            raise ValueError(
                f"the lease name {self.name!r} is no Docker config name: up to 64 letters, "
                "digits, '-', '_' and '.', starting and ending with a letter or digit"
            )

    @property
    def margin(self) -> float:
        """Writes stop this long before the lease runs out: room for one in flight, whose
        request is bounded by it (3 s at the default lifetime; a longer lifetime gives a
        slow manager more)."""
        return self.lifetime / 5

    @property
    def renew_every(self) -> float:
        return self.lifetime / 3

    @property
    def poll_every(self) -> float:
        return min(self.lifetime / 10, 1.0)


class LeaseKeeper:
    def __init__(
        self,
        config: LeaseConfig,
        store_factory: Callable[[], LeaseStore],
        *,
        say: Callable[[str], None],
        on_acquire: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self._store_factory = store_factory
        self._say = say
        self._on_acquire = on_acquire
        self._clock = clock
        self._wall = wall_clock
        self.view = LeaseView()
        self.acquisitions = 0  # how often this replica became the holder
        self.losses = 0  # how often it stopped holding without releasing
        self.reads = 0  # successful reads of the labels (readiness)
        self.last_read: float | None = None
        self._store: LeaseStore | None = None
        self._leading = False
        self._said: str | None = None

    # --- what the rest of the controller asks ---------------------------------------

    def holds(self) -> bool:
        return self.view.holds(self._clock(), self.config.margin)

    def fence(self) -> None:
        """Raise NotLeaderError unless this replica may write now."""
        if not self.holds():
            raise NotLeaderError(f"not the lease holder ({self.standby_reason()})")

    def standby_reason(self) -> str | None:
        """None while this replica holds the lease, else why it must not write."""
        if self.holds():
            return None
        seen = self.view.seen
        if self.reads == 0:
            return f"the lease {self.config.name} has not been read yet"
        if seen is None:
            return (
                f"the lease {self.config.name} is missing or unreadable; it is taken once "
                "none has appeared for a lifetime"
            )
        if seen.released:
            return f"the lease {self.config.name} was released; taking it"
        if seen.holder == self.config.holder and seen == self.view.mine:
            return "our lease ran out before it was renewed"
        return f"the lease {self.config.name} is held by {seen.holder}"

    @property
    def holder(self) -> str:
        """The holder as this replica last saw it ("" when none)."""
        seen = self.view.seen
        return seen.holder if seen is not None else ""

    @property
    def term(self) -> int:
        seen = self.view.seen
        return seen.term if seen is not None else 0

    # --- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            delay = await self._tick()
            self._track_leadership()
            await anyio.sleep(delay)

    async def _tick(self) -> float:
        cfg = self.config
        try:
            if self._store is None:
                self._store = await anyio.to_thread.run_sync(self._store_factory)
            read = await anyio.to_thread.run_sync(self._store.read)
        except STORE_ERRORS as exc:
            self._note(f"lease: cannot read config {cfg.name}: {exc}")
            return cfg.poll_every
        # Counted from after the read returned: never earlier than the lease was written.
        now = self._clock()
        self.reads += 1
        self.last_read = now
        if read.problem:
            self._note(f"lease: {read.problem}; it is taken over after {cfg.lifetime:g} s")
        view = self.view.sight(read.lease, unreadable=read.problem is not None, now=now)
        verdict = decide(view, me=cfg.holder, lifetime=cfg.lifetime, now=now)
        self.view = view
        if verdict.step is Step.WAIT:
            self._note(f"lease: standby, {verdict.reason}")
            wake = verdict.retry_at - now if verdict.retry_at is not None else cfg.poll_every
            return max(0.05, min(cfg.poll_every, wake))
        lease = new_lease(
            me=cfg.holder, term=verdict.term, lifetime=cfg.lifetime, wall_now=self._wall()
        )
        self.view = self.view.attempt(lease, now=self._clock())  # the lease runs from here
        try:
            await anyio.to_thread.run_sync(self._store.write, read, lease)
        except ConflictError:
            self.view = self.view.refused()
            return 0.0  # someone wrote or created the config: read it again at once
        except STORE_ERRORS as exc:
            # The write may or may not have landed: the next read tells.
            self._note(f"lease: cannot write config {cfg.name}: {exc}")
            return cfg.poll_every
        self.view = self.view.landed()
        if verdict.step is Step.TAKE:
            self._say(f"lease: took the lease {cfg.name} as {cfg.holder}, "
                      f"term {lease.term}: {verdict.reason}")  # fmt: skip
        return cfg.renew_every

    def _track_leadership(self) -> None:
        leading = self.holds()
        if leading and not self._leading:
            self.acquisitions += 1
            self._on_acquire()
        elif self._leading and not leading:
            self.losses += 1
            self._say(f"lease: no longer the holder, writes stop: {self.standby_reason()}")
        self._leading = leading

    def _note(self, text: str) -> None:
        """Say a repeated problem once, until something else is said."""
        if text != self._said:
            self._said = text
            self._say(text)

    async def release(self) -> None:
        """Hand the lease back at a clean stop, once no write can follow: whoever waits
        takes it at once instead of a lifetime later."""
        if self._store is None or self.view.mine is None or not self.view.holds(self._clock()):
            return
        store, mine = self._store, self.view.mine
        with anyio.move_on_after(RELEASE_TIMEOUT_SECONDS, shield=True):
            try:
                read = await anyio.to_thread.run_sync(store.read)
                if read.lease == mine:
                    lease = released_lease(mine, wall_now=self._wall())
                    self.view = self.view.attempt(lease, now=self._clock())
                    await anyio.to_thread.run_sync(store.write, read, lease)
                    self.view = self.view.landed()
                    self._say(f"lease: released the lease {self.config.name}")
            except RELEASE_ERRORS as exc:
                log.warning("could not release the lease: %s", exc)
        self._leading = False


def fenced(
    execute: Callable[[Action], None], fence: Callable[[], None]
) -> Callable[[Action], None]:
    """The executor behind the fence: `fence()` runs right before every write (the
    Docker executor checks it again before each attempt's request)."""

    def run(action: Action) -> None:
        fence()
        execute(action)

    return run
