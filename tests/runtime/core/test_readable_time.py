"""Times and durations as a reader reads them, and time-axis ticks at readable steps."""

from __future__ import annotations

import math

import pytest

from vsp.components.runtime.core import readable_time

DEC_4_13H = 1796389200.0  # 2026-12-04 13:00:00 UTC


def test_utc_is_a_date_a_time_of_day_and_the_zone_whole_seconds():
    assert readable_time.utc(DEC_4_13H) == "2026-12-04 13:00:00 UTC"
    assert readable_time.utc(DEC_4_13H + 310.9) == "2026-12-04 13:05:10 UTC"
    assert readable_time.clock(DEC_4_13H + 310.9) == "13:05:10"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (0.25, "0.25 s"),
        (4.5, "4.5 s"),
        (12.4, "12 s"),
        (59.6, "1 min"),
        (180, "3 min"),
        (192, "3 min 12 s"),
        (3599.6, "1 h"),
        (3629, "1 h"),
        (5400, "1 h 30 min"),
        (7500, "2 h 5 min"),
        (86400 + 3 * 3600, "1 d 3 h"),
        (-30, "-30 s"),
        (math.inf, "never"),
    ],
)
def test_duration_uses_the_two_largest_units(seconds, text):
    assert readable_time.duration(seconds) == text


def test_ticks_of_a_two_and_a_half_minute_axis_read_in_seconds_and_minutes():
    ticks = readable_time.duration_ticks(150)
    labels = [readable_time.duration(t) for t in ticks]
    assert labels == ["0 s", "30 s", "1 min", "1 min 30 s", "2 min", "2 min 30 s"]


@pytest.mark.parametrize(
    ("span", "step", "count"),
    [
        (734, 120, 7),
        (90, 15, 7),
        (5400, 900, 7),
        (3 * 86400, 12 * 3600, 7),
        (60 * 86400, 14 * 86400, 5),
    ],
)
def test_the_step_is_the_smallest_readable_one_within_the_tick_budget(span, step, count):
    ticks = readable_time.duration_ticks(span)
    assert readable_time.duration_step(span) == step
    assert len(ticks) == count and ticks[0] == 0 and ticks[-1] <= span
