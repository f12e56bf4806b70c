"""The LeaseKeeper's loop against an in-memory compare-and-swap store and a fake clock."""

from __future__ import annotations

import anyio
import pytest

from controller.adapters.engine import ConflictError, DockerUnavailableError
from controller.adapters.lease_store import LeaseRead
from controller.core.lease import Lease
from controller.runtime.lease_keeper import LeaseConfig, LeaseKeeper, NotLeaderError

LIFETIME = 10.0


class Store:
    """The lease config's labels with a version, as Swarm keeps them."""

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.version = 1
        self.down = False
        self.lose_reply = False  # the write lands, the answer does not
        self.interfere = False  # someone else writes the config between read and write

    def read(self) -> LeaseRead:
        if self.down:
            raise DockerUnavailableError("down")
        return LeaseRead(self.lease, None, self.version, "config-id", {})

    def write(self, read: LeaseRead, lease: Lease) -> None:
        if self.down:
            raise DockerUnavailableError("down")
        if self.interfere:
            self.interfere, self.version = False, self.version + 1
        if read.version != self.version:
            raise ConflictError("update out of sequence")
        self.lease, self.version = lease, self.version + 1
        if self.lose_reply:
            raise DockerUnavailableError("reply lost")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def keeper(store: Store, clock: Clock, name: str, said: list[str]) -> LeaseKeeper:
    return LeaseKeeper(
        LeaseConfig(name="placement_controller-lease", holder=name, lifetime=LIFETIME),
        lambda: store,
        say=said.append,
        clock=clock,
        wall_clock=clock,
    )


def tick(k: LeaseKeeper) -> float:
    async def once() -> float:
        delay = await k._tick()
        k._track_leadership()
        return delay

    return anyio.run(once)


def test_a_free_lease_is_taken_after_a_lifetime_and_renewed() -> None:
    store, clock, said = Store(), Clock(), []
    a = keeper(store, clock, "a", said)
    tick(a)
    assert not a.holds() and a.standby_reason() is not None
    with pytest.raises(NotLeaderError):
        a.fence()
    clock.now += LIFETIME
    assert tick(a) == pytest.approx(LIFETIME / 3)
    assert a.holds() and store.lease is not None and store.lease.term == 1
    a.fence()
    assert a.acquisitions == 1 and "term 1: no lease yet" in said[-1]
    version = store.version
    clock.now += LIFETIME / 3
    tick(a)
    assert store.version == version + 1 and store.lease.holder == "a"


def test_a_holder_cut_off_stops_before_the_standby_takes_over() -> None:
    store, clock, said = Store(), Clock(), []
    a, b = keeper(store, clock, "a", said), keeper(store, clock, "b", said)
    tick(a), tick(b)
    clock.now += LIFETIME
    tick(a)
    tick(b)
    assert a.holds() and not b.holds()
    store_for_a_down = store.lease
    store.down = True
    clock.now += LIFETIME - a.config.margin  # a cannot renew: its fence closes
    tick(a)
    assert not a.holds() and a.losses == 1
    store.down = False
    tick(b)  # b's wait started when it read a's last renewal
    assert not b.holds()
    clock.now += a.config.margin
    tick(b)
    assert b.holds() and store.lease.holder == "b" and store.lease.term == 2
    assert store_for_a_down is not None and store_for_a_down.term == 1
    tick(a)
    assert not a.holds() and "held by b" in (a.standby_reason() or "")


def test_a_conflict_is_read_again_and_a_lost_reply_confirmed_by_reading() -> None:
    store, clock, said = Store(), Clock(), []
    a = keeper(store, clock, "a", said)
    tick(a)
    clock.now += LIFETIME
    store.interfere = True
    assert tick(a) == 0.0, "a conflict is read again at once"
    assert not a.holds() and store.lease is None
    tick(a)
    assert a.holds()
    store.lose_reply = True
    clock.now += 0.1
    tick(a)
    store.lose_reply = False
    tick(a)  # the read finds a's write: the lease runs from when it was sent
    assert a.holds() and store.lease is not None and store.lease.holder == "a"


def test_release_hands_the_lease_over_at_once() -> None:
    store, clock, said = Store(), Clock(), []
    a, b = keeper(store, clock, "a", said), keeper(store, clock, "b", said)
    tick(a), tick(b)
    clock.now += LIFETIME
    tick(a), tick(b)
    anyio.run(a.release)
    assert store.lease is not None and store.lease.released and not a.holds()
    tick(b)
    assert b.holds() and store.lease.term == 2
    assert any("released by its holder" in line for line in said)
