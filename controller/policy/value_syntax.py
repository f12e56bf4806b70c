"""Value syntaxes shared by the policy file and `placement.*` labels.

Each parser takes what YAML or a label gives (labels are always strings) and returns the
parsed value or raises `PolicyValueError` whose text says what was expected. The same text
feeds error messages, the JSON schema and the reference doc, so they cannot drift apart.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from controller.policy.settings import (
    PRIORITY_HIGH,
    PRIORITY_LOW,
    PRIORITY_MEDIUM,
    PRIORITY_NONE,
    FailbackMode,
    FailbackWindow,
    FailoverThreshold,
)


class PolicyValueError(ValueError):
    """A value that does not fit its syntax; the text is what was expected."""


@dataclass(frozen=True, slots=True)
class FailbackSetting:
    """The parsed `failback` setting: a mode, and the window when the mode is `window`."""

    mode: FailbackMode
    window: FailbackWindow | None = None


PRIORITY_NAMES = {
    "high": PRIORITY_HIGH,
    "medium": PRIORITY_MEDIUM,
    "low": PRIORITY_LOW,
    "none": PRIORITY_NONE,
}
PRIORITY_MAX = PRIORITY_HIGH
_TRUE = frozenset({"true", "yes", "on"})
_FALSE = frozenset({"false", "no", "off"})
# Names of nodes, groups, classes and levels: what hostnames and node IDs allow.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")
_WINDOW = re.compile(r"window\s+(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})", re.IGNORECASE)
_INT = re.compile(r"[0-9]{1,9}")

EXPECTED_BOOL = "true/false, yes/no or on/off"
EXPECTED_PRIORITY = "high, medium, low, none or an integer from 0 to 3000"
EXPECTED_NAMES = "a list of names (in a label: comma-separated, e.g. node-2,node-3)"
EXPECTED_NAME = "a name of letters, digits, '.', '_' or '-'"
EXPECTED_FAILBACK = "never, immediate or window HH:MM-HH:MM"
EXPECTED_DURATION = "a duration such as 30s, 10m, 2h or 1h30m (plain numbers in the file: seconds)"
EXPECTED_POSITIVE_DURATION = EXPECTED_DURATION.replace("a duration", "a duration above zero,")
EXPECTED_THRESHOLD = "FAILURES/PERIOD such as 3/10m (3 failures within 10 minutes), or none"
EXPECTED_FRACTION = "a fraction above 0 and at most 1, such as 0.25 or 25%"
EXPECTED_TIMEZONE = "an IANA time zone name such as UTC or Europe/Paris"
EXPECTED_STRING = 'a string (quote values such as "true" or "1")'
EXPECTED_LABEL_KEY = "a label key (a non-empty string without spaces or '=')"


def is_number(value: object) -> bool:
    # bool is an int subclass, but `true` is never a count or a number of seconds.
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise PolicyValueError(f"expected {EXPECTED_BOOL}")


def parse_int(value: object, *, minimum: int, maximum: int | None = None) -> int:
    """An integer in range, from an int or a string of digits (labels are strings)."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = int(value)
    elif isinstance(value, str) and _INT.fullmatch(value.strip()):
        number = int(value.strip())
    if number is None or number < minimum or (maximum is not None and number > maximum):
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise PolicyValueError(f"expected an integer of at least {minimum}{upper}")
    return number


def parse_priority(value: object) -> int:
    if isinstance(value, str) and value.strip().lower() in PRIORITY_NAMES:
        return PRIORITY_NAMES[value.strip().lower()]
    try:
        return parse_int(value, minimum=0, maximum=PRIORITY_MAX)
    except PolicyValueError:
        raise PolicyValueError(f"expected {EXPECTED_PRIORITY}") from None


def parse_name(value: object) -> str:
    if isinstance(value, str) and _NAME.fullmatch(value):
        return value
    raise PolicyValueError(f"expected {EXPECTED_NAME}")


def parse_names(value: object) -> tuple[str, ...]:
    """A YAML list, or a comma-separated string as labels carry; an empty string is none."""
    if isinstance(value, str):
        items: list[object] = [part.strip() for part in value.split(",")] if value.strip() else []
    elif isinstance(value, list):
        items = list(value)
    else:
        raise PolicyValueError(f"expected {EXPECTED_NAMES}")
    names: list[str] = []
    for item in items:
        try:
            name = parse_name(item)
        except PolicyValueError:
            raise PolicyValueError(
                f"expected {EXPECTED_NAMES}; {item!r} is not {EXPECTED_NAME}"
            ) from None
        if name in names:
            raise PolicyValueError(f"expected {EXPECTED_NAMES}; {name!r} is listed twice")
        names.append(name)
    return tuple(names)


def parse_keyword(value: object, choices: tuple[str, ...]) -> str:
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    raise PolicyValueError(f"expected {', '.join(choices[:-1])} or {choices[-1]}")


def parse_duration(value: object, *, positive: bool = False) -> float:
    """Seconds from `30s`, `10m`, `2h`, `1h30m`, or (from YAML) a plain number of seconds."""
    seconds: float | None = None
    if is_number(value):
        seconds = float(value)  # type: ignore[arg-type]
    elif isinstance(value, str):
        match = _DURATION.fullmatch(value.strip().lower())
        if match and any(match.groups()):
            hours, minutes, secs = (float(part) if part else 0.0 for part in match.groups())
            seconds = hours * 3600 + minutes * 60 + secs
    if seconds is None or not math.isfinite(seconds) or seconds < 0 or (positive and seconds == 0):
        raise PolicyValueError(
            f"expected {EXPECTED_POSITIVE_DURATION if positive else EXPECTED_DURATION}"
        )
    return seconds


def parse_failback(value: object) -> FailbackSetting:
    if isinstance(value, str):
        word = value.strip().lower()
        if word in (FailbackMode.NEVER, FailbackMode.IMMEDIATE):
            return FailbackSetting(FailbackMode(word))
        match = _WINDOW.fullmatch(value.strip())
        if match:
            h1, m1, h2, m2 = (int(part) for part in match.groups())
            if h1 < 24 and h2 < 24 and m1 < 60 and m2 < 60 and (h1, m1) != (h2, m2):
                window = FailbackWindow(start_minute=h1 * 60 + m1, end_minute=h2 * 60 + m2)
                return FailbackSetting(FailbackMode.WINDOW, window)
    raise PolicyValueError(f"expected {EXPECTED_FAILBACK} (24-hour times, start and end different)")


def parse_failover_threshold(value: object) -> FailoverThreshold | None:
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == "none":
            return None
        count, slash, period = text.partition("/")
        if slash and _INT.fullmatch(count.strip()) and int(count) >= 1:
            try:
                seconds = parse_duration(period.strip(), positive=True)
            except PolicyValueError:
                pass
            else:
                return FailoverThreshold(failures=int(count), period_seconds=seconds)
    raise PolicyValueError(f"expected {EXPECTED_THRESHOLD}")


def parse_fraction(value: object) -> float:
    fraction: float | None = None
    if is_number(value):
        fraction = float(value)  # type: ignore[arg-type]
    elif isinstance(value, str) and value.strip().endswith("%"):
        try:
            fraction = float(value.strip()[:-1]) / 100
        except ValueError:
            fraction = None
    if fraction is None or not math.isfinite(fraction) or not 0 < fraction <= 1:
        raise PolicyValueError(f"expected {EXPECTED_FRACTION}")
    return fraction


def parse_timezone(value: object) -> str:
    if isinstance(value, str) and value:
        try:
            ZoneInfo(value)
        except (ValueError, KeyError, OSError):
            pass
        else:
            return value
    raise PolicyValueError(f"expected {EXPECTED_TIMEZONE}")


def parse_string(value: object) -> str:
    if isinstance(value, str):
        return str(value)
    raise PolicyValueError(f"expected {EXPECTED_STRING}")


def parse_label_key(value: object) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c == "=" for c in value):
        return str(value)
    raise PolicyValueError(f"expected {EXPECTED_LABEL_KEY}")


def format_bool(value: bool) -> str:
    return "true" if value else "false"


def format_priority(value: int) -> str:
    names = {number: name for name, number in PRIORITY_NAMES.items()}
    return f"{names[value]} ({value})" if value in names else str(value)


def format_names(value: tuple[str, ...]) -> str:
    return ",".join(value) if value else "(none)"


def format_duration(seconds: float) -> str:
    """The shortest label form that parses back to the same number of seconds."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{secs}s" if secs or not text else "")


def format_minute(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def format_failback(value: FailbackSetting) -> str:
    if value.window is None:
        return str(value.mode)
    window = value.window
    return f"window {format_minute(window.start_minute)}-{format_minute(window.end_minute)}"


def format_threshold(value: FailoverThreshold | None) -> str:
    if value is None:
        return "none"
    return f"{value.failures}/{format_duration(value.period_seconds)}"


def format_optional_name(value: str | None) -> str:
    return "none" if value is None else value
