"""Time as the planner sees it: `now` is given, never read. Only conversions live here."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo


def minute_of_day(now: float, timezone: str) -> int:
    """Minutes after local midnight in the policy's time zone (for failback windows)."""
    local = datetime.fromtimestamp(now, UTC).astimezone(ZoneInfo(timezone))
    return local.hour * 60 + local.minute


def format_minute(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def time_of_day(epoch_seconds: float) -> str:
    """A moment as the decision log's timestamps give it (UTC), to the second: stable
    from cycle to cycle, where "N s ago" would make the same decision a new log line."""
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%H:%M:%S UTC")
