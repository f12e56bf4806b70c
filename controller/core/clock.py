"""Time as the planner sees it: `now` is given, never read. Only conversions live here.

A moment a person reads (a decision's reason, a replica record's detail) is given by
`utc_time` or `time_of_day`, never as epoch seconds: the core knows no time zone, so
both say UTC; the web view shows local times. Neither reads "12 s ago": a decision is
logged again only when its text changes, and a running count would change it every
cycle.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

UNREADABLE = "an unreadable time"


def minute_of_day(now: float, timezone: str) -> int:
    """Minutes after local midnight in the policy's time zone (for failback windows)."""
    local = datetime.fromtimestamp(now, UTC).astimezone(ZoneInfo(timezone))
    return local.hour * 60 + local.minute


def format_minute(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def utc_time(epoch_seconds: float) -> str:
    """A moment as ISO 8601 in UTC, to the second (`2026-12-01T19:22:44Z`): for one that
    may be hours or days away, or text kept in a label. A value no calendar holds (a
    garbled label) says so rather than failing the cycle."""
    moment = _second_of(epoch_seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else UNREADABLE


def time_of_day(epoch_seconds: float) -> str:
    """A moment as the decision log's timestamps give it (UTC), to the second: for one
    within the hour (a cooldown, a settle wait), stable from cycle to cycle."""
    moment = _second_of(epoch_seconds)
    return moment.strftime("%H:%M:%S UTC") if moment else UNREADABLE


def _second_of(epoch_seconds: float) -> datetime | None:
    """The moment's whole second (never rounded up into the next), None for a value no
    calendar holds."""
    try:
        return datetime.fromtimestamp(math.floor(epoch_seconds), UTC)
    except (OverflowError, OSError, ValueError):
        return None
