"""The leader lease, as pure logic: which replica may write, decided from what it saw when.

The lease is four labels on a Docker config of the controller's own, written by
compare-and-swap on the config's Version.Index, so Swarm's Raft store orders every claim
(and no service, the controller's own included, is written for it). A replica never
compares another machine's clock with its own: it takes the lease over only once it has
watched the same lease go unrenewed for the lease's whole lifetime on its own monotonic
clock. The holder, for its part, stops writing a safety margin before its lifetime, counted
from the moment it *sent* its last successful renewal, runs out. Whoever watches saw that
renewal later than it was sent, so the old holder has stopped before anyone else may start,
whether it died, was paused or lost its network.

Nothing here reads a clock or does I/O: callers pass `now` (monotonic seconds).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from controller.core.labels import OWN_PREFIX

HOLDER_LABEL = f"{OWN_PREFIX}lease.holder"
RENEWED_AT_LABEL = f"{OWN_PREFIX}lease.renewed-at"
LIFETIME_LABEL = f"{OWN_PREFIX}lease.lifetime"
TERM_LABEL = f"{OWN_PREFIX}lease.term"
LEASE_LABELS = (HOLDER_LABEL, RENEWED_AT_LABEL, LIFETIME_LABEL, TERM_LABEL)


class LeaseLabelError(ValueError):
    """The lease labels are there but unreadable (edited by hand, say)."""


@dataclass(frozen=True, slots=True)
class Lease:
    """The lease as its four labels say it."""

    holder: str  # "" once released by a holder that stopped cleanly
    renewed_at: str  # the holder's wall clock, ISO 8601: for operators, never compared
    lifetime: float  # seconds the holder promises to stop writing within
    term: int  # +1 at every change of holder: says in logs and metrics who led when

    @property
    def released(self) -> bool:
        return self.holder == ""


def lease_from_labels(labels: Mapping[str, str]) -> Lease | None:
    """The lease in a config's labels; None when it has none."""
    if not any(key in labels for key in LEASE_LABELS):
        return None
    missing = [key for key in LEASE_LABELS if key not in labels]
    if missing:
        raise LeaseLabelError(f"lease labels incomplete, missing {', '.join(missing)}")
    try:
        lifetime = float(labels[LIFETIME_LABEL])
        term = int(labels[TERM_LABEL])
    except ValueError as exc:
        raise LeaseLabelError(f"lease labels unreadable: {exc}") from exc
    if not 0 < lifetime < 3600 or term < 0:
        raise LeaseLabelError(f"lease lifetime {lifetime} or term {term} out of range")
    return Lease(
        holder=labels[HOLDER_LABEL],
        renewed_at=labels[RENEWED_AT_LABEL],
        lifetime=lifetime,
        term=term,
    )


def labels_of(lease: Lease) -> dict[str, str]:
    return {
        HOLDER_LABEL: lease.holder,
        RENEWED_AT_LABEL: lease.renewed_at,
        LIFETIME_LABEL: f"{lease.lifetime:g}",
        TERM_LABEL: str(lease.term),
    }


def wall_stamp(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).isoformat(timespec="milliseconds")


class Step(enum.Enum):
    RENEW = "renew"  # write the lease again, ours: we hold it
    TAKE = "take"  # write the lease as ours with the next term: it is free
    WAIT = "wait"  # someone else may hold it: write nothing


@dataclass(frozen=True, slots=True)
class Verdict:
    step: Step
    reason: str
    term: int = 0  # the term to write (RENEW and TAKE)
    retry_at: float | None = None  # WAIT: when the lease may be free, if nothing changes


@dataclass(frozen=True, slots=True)
class LeaseView:
    """What one replica knows of the lease, on its own monotonic clock."""

    seen: Lease | None = None  # the lease at the last read (None: no lease, or no config)
    seen_unreadable: bool = False
    seen_since: float | None = None  # when it first read that same lease
    mine: Lease | None = None  # the last lease it wrote that is known to have landed
    pending: Lease | None = None  # a write whose outcome is not known yet
    pending_sent: float = 0.0  # when that write was sent
    held_until: float | None = None  # its lease ends then: the send of `mine` + lifetime

    def sight(self, lease: Lease | None, *, unreadable: bool, now: float) -> LeaseView:
        """A fresh read of the labels. Finding our pending write there confirms it."""
        view = self
        if self.seen_since is None or lease != self.seen or unreadable != self.seen_unreadable:
            view = replace(view, seen=lease, seen_unreadable=unreadable, seen_since=now)
        if lease is not None and lease == self.pending:
            return view.landed()
        if lease is not None and lease != self.mine and self.held_until is not None:
            view = replace(view, held_until=None)  # taken over: never write again
        return view

    def attempt(self, lease: Lease, *, now: float) -> LeaseView:
        return replace(self, pending=lease, pending_sent=now)

    def landed(self) -> LeaseView:
        """The pending write is in Swarm's store: the lease runs from when it was sent."""
        assert self.pending is not None
        lease = self.pending
        held = None if lease.released else self.pending_sent + lease.lifetime
        return replace(
            self,
            mine=lease,
            pending=None,
            held_until=held,
            seen=lease,
            seen_unreadable=False,
            seen_since=self.pending_sent,
        )

    def refused(self) -> LeaseView:
        """The pending write was refused (the config changed since it was read)."""
        return replace(self, pending=None)

    def holds(self, now: float, margin: float = 0.0) -> bool:
        """True while writes are allowed: the lease has not run out, less the margin."""
        return self.held_until is not None and now < self.held_until - margin


def decide(view: LeaseView, *, me: str, lifetime: float, now: float) -> Verdict:
    """What to do after `view.sight(...)` of a fresh read."""
    lease = view.seen
    term = lease.term if lease is not None else (view.mine.term if view.mine else 0)
    if lease is not None and lease == view.mine and lease.holder == me:
        return Verdict(Step.RENEW, "we hold the lease", term=term)
    if view.holds(now) and lease is None:
        # The lease config was removed (`docker config rm`, say) while our lease still runs:
        # writing it back is safe, anyone else waits a whole lifetime.
        return Verdict(Step.RENEW, "our lease was removed: writing it back", term=term)
    if lease is not None and lease.released:
        return Verdict(Step.TAKE, f"released by its holder at term {lease.term}", term=term + 1)
    waited = lifetime if lease is None else lease.lifetime
    since = view.seen_since if view.seen_since is not None else now
    what = (
        "no lease yet"
        if lease is None and not view.seen_unreadable
        else "unreadable lease labels"
        if lease is None
        else f"held by {lease.holder} (term {lease.term})"
    )
    if now - since >= waited:
        return Verdict(Step.TAKE, f"{what}, unchanged for {waited:g} s", term=term + 1)
    return Verdict(Step.WAIT, what, retry_at=since + waited)


def new_lease(*, me: str, term: int, lifetime: float, wall_now: float) -> Lease:
    return Lease(holder=me, renewed_at=wall_stamp(wall_now), lifetime=lifetime, term=term)


def released_lease(lease: Lease, *, wall_now: float) -> Lease:
    """What a holder that stopped cleanly leaves: anyone may take it at once."""
    return replace(lease, holder="", renewed_at=wall_stamp(wall_now))
