"""Cron expressions placed relative to the moment a test runs.

A step that reads the wall clock against a fixed cron (say "Mondays 03:00") sees the next run
minutes away once a day or once a week, and a decision that keeps the cluster then is right. A
test that needs the next run far off builds its cron from now instead.
"""

from __future__ import annotations

import time


def _at(seconds_from_now: float) -> time.struct_time:
    return time.gmtime(time.time() + seconds_from_now)


def daily_cron_hours_away(hours: float) -> str:
    """A daily cron (UTC) whose next run is about ``hours`` (0 to 24) from now."""
    at = _at(hours * 3600)
    return f"{at.tm_min} {at.tm_hour} * * *"


def weekly_cron_days_away(days: float) -> str:
    """A weekly cron (UTC) whose next run is about ``days`` (0 to 7) from now."""
    at = _at(days * 86400)
    return f"{at.tm_min} {at.tm_hour} * * {(at.tm_wday + 1) % 7}"  # cron: Sunday is 0
