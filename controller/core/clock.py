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
