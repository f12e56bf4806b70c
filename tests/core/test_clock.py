"""Moments as a person reads them: ISO 8601 in UTC, never epoch seconds."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.clock import time_of_day, utc_time

# 2026-12-01 19:22:44.425 UTC: the moment the web view once showed as "1796152964.425".
MOMENT = 1_796_152_964.425


def test_a_moment_reads_as_iso_8601_in_utc_to_the_second() -> None:
    assert utc_time(MOMENT) == "2026-12-01T19:22:44Z"
    assert utc_time(0.0) == "1970-01-01T00:00:00Z"
    assert time_of_day(MOMENT) == "19:22:44 UTC"


def test_a_fraction_of_a_second_never_rounds_into_the_next_one() -> None:
    assert utc_time(1_796_152_964.999) == "2026-12-01T19:22:44Z"


@pytest.mark.parametrize("garbled", [math.inf, -math.inf, math.nan, 1e20, -1e20])
def test_a_value_no_calendar_holds_says_so_rather_than_failing(garbled: float) -> None:
    assert utc_time(garbled) == "an unreadable time"
    assert time_of_day(garbled) == "an unreadable time"


@given(st.floats(min_value=0, max_value=4_102_444_800))  # 1970 to 2100
def test_it_reads_back_as_the_same_second(moment: float) -> None:
    text = utc_time(moment)
    back = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    assert back == math.floor(moment)
