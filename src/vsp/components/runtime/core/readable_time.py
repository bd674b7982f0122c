"""Times and durations as people read them, for reports and axis ticks.

``utc`` gives ``2026-12-04 13:05:10 UTC`` (labels use a compact encoding, ``20261204t130510z``,
see ``gcp_labels.timestamp``; a report never shows that). ``duration`` gives ``3 min 12 s``,
``2 h 5 min``, ``1 d 3 h``: the two largest units, smaller parts dropped. ``duration_ticks``
picks axis ticks at steps a reader counts in (5 s, 30 s, 1 min, 15 min, 1 h, 6 h, 1 d, ...).

Hand-written on the standard library: the formats are fixed here and the steps install no
package for them.
"""

from __future__ import annotations

import datetime
import math

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
# Axis steps in seconds, smallest first; beyond the last, whole multiples of a week.
_STEPS = (
    1, 2, 5, 10, 15, 30,
    MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE,
    HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR,
    DAY, 2 * DAY, 7 * DAY,
)  # fmt: skip


def utc(epoch: float) -> str:
    """Epoch seconds as ``YYYY-MM-DD HH:MM:SS UTC`` (whole seconds, rounded down)."""
    moment = datetime.datetime.fromtimestamp(math.floor(epoch), tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def rfc3339(epoch: float) -> str:
    """Epoch seconds as ``YYYY-MM-DDTHH:MM:SSZ`` (whole seconds, rounded down)."""
    moment = datetime.datetime.fromtimestamp(math.floor(epoch), tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def clock(epoch: float) -> str:
    """Epoch seconds as the UTC time of day, ``HH:MM:SS`` (for labels inside a chart)."""
    moment = datetime.datetime.fromtimestamp(math.floor(epoch), tz=datetime.timezone.utc)
    return moment.strftime("%H:%M:%S")


def _seconds_text(seconds: float) -> str:
    if seconds >= 10 or seconds == int(seconds):
        return f"{round(seconds):d} s"
    return f"{seconds:.1f} s" if seconds >= 1 else f"{seconds:.2g} s"


def duration(seconds: float) -> str:
    """A duration in its two largest units: ``0 s``, ``4.5 s``, ``3 min 12 s``, ``2 h 5 min``.

    Below a minute, seconds (one decimal under 10 s, two significant digits under 1 s);
    then minutes and seconds, hours and minutes, days and hours, a zero second part dropped
    (``3 min``). Negative durations get a leading ``-``; infinity is ``never``.

    Args:
        seconds: The duration in seconds.
    """
    if math.isinf(seconds):
        return "never" if seconds > 0 else "-never"
    if seconds < 0:
        return "-" + duration(-seconds)
    if seconds < MINUTE:
        text = _seconds_text(seconds)
        return "1 min" if text == "60 s" else text
    whole = round(seconds)
    for big, big_name, small, small_name in (
        (DAY, "d", HOUR, "h"),
        (HOUR, "h", MINUTE, "min"),
        (MINUTE, "min", 1, "s"),
    ):
        if whole >= big:
            count, rest = divmod(whole, int(big))
            part = round(rest / small)
            if part * small >= big:  # 59.6 min rounds up into the next hour
                count, part = count + 1, 0
            return f"{count} {big_name}" + (f" {part} {small_name}" if part else "")
    raise AssertionError("unreachable")  # pragma: no cover


def duration_step(span: float, max_ticks: int = 8) -> float:
    """The smallest readable step (seconds) that splits ``span`` into at most ``max_ticks``.

    Args:
        span: Seconds the axis covers (> 0).
        max_ticks: Most intervals wanted along the axis.
    """
    for step in _STEPS:
        if span / step <= max_ticks:
            return float(step)
    weeks = math.ceil(span / max_ticks / (7 * DAY))
    return weeks * 7 * DAY


def duration_ticks(span: float, max_ticks: int = 8) -> list[float]:
    """Tick positions (seconds from 0) covering ``[0, span]`` at a readable step."""
    if span <= 0:
        return [0.0]
    step = duration_step(span, max_ticks)
    count = math.floor(span / step + 1e-9)
    return [i * step for i in range(count + 1)]
