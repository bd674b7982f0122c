"""When the next run of a pipeline is expected: from its cron, an interval, or run history.

``parse_cron`` validates a schedule's 5-field cron with an optional ``TZ=Zone `` (or
``CRON_TZ=Zone ``) prefix, as Vertex schedules accept; ``predict`` gives the next expected run
and the run interval around now, used by ``teardown.decide``; ``ticks_between`` and
``tick_at_or_before`` list a cron's ticks for the expiry (``teardown.expiry``).

Ticks come from ``croniter`` a UTC day at a time and are cached per (cron, day): a decision
looks up the scheduled tick of each of its earlier runs, and a replay of thousands of decisions
(``benchmarks.teardown.cost``) would otherwise expand the cron for every lookup.
"""

from __future__ import annotations

import bisect
import datetime
import difflib
import functools
import math
import re
import statistics
import zoneinfo
from collections.abc import Sequence

from croniter import CroniterBadDateError, croniter

from vsp.components.runtime.core.errors import SpecProblem, SpecValidationError

_TZ_PREFIXES = ("TZ=", "CRON_TZ=")
# Where the check that a cron ever fires starts looking (croniter looks ahead 50 years).
_CALENDAR_START = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)

# The cron the reaper (``teardown.reaper``) is scheduled on: ``vsp schedule`` prints it,
# ``benchmarks.teardown.cost`` replays it, and a decision from run history picks its keep time
# among the reaper's ticks (``reaper_keep_times``). A cluster expired at ``t`` is deleted at the
# first reaper tick after ``t``: every 10 minutes, for 144 reaper runs a day.
REAPER_CRON = "*/10 * * * *"


def _problem(field: str, value: object, problem: str, fix: str) -> SpecValidationError:
    return SpecValidationError("the teardown inputs", [SpecProblem(field, value, problem, fix)])


@functools.lru_cache(maxsize=256)
def parse_cron(schedule_cron: str) -> tuple[str, datetime.tzinfo]:
    """Split an optional ``TZ=Zone `` prefix off a 5-field cron and validate both.

    Returns:
        The cron expression and its time zone (UTC without a prefix).

    Raises:
        UserError: naming ``schedule_cron`` and the fix.
    """
    text = schedule_cron.strip() if isinstance(schedule_cron, str) else ""
    zone: datetime.tzinfo = datetime.timezone.utc
    if text.startswith(_TZ_PREFIXES):
        prefix, _, text = text.partition(" ")
        name = prefix.split("=", 1)[1]
        try:
            zone = zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            near = difflib.get_close_matches(name, zoneinfo.available_timezones(), n=2, cutoff=0.8)
            raise _problem(
                "schedule_cron",
                schedule_cron,
                f"unknown time zone {name!r}.",
                (f"did you mean {' or '.join(repr(z) for z in near)}? " if near else "")
                + "Use an IANA zone, e.g. 'TZ=America/New_York 0 9 * * *'.",
            ) from exc
        text = text.strip()
    if len(text.split()) != 5 or not croniter.is_valid(text):
        raise _problem(
            "schedule_cron",
            schedule_cron,
            _out_of_range(text) or "is not a valid 5-field cron expression.",
            "use 'minute hour day-of-month month day-of-week', e.g. '0 * * * *', "
            "optionally prefixed 'TZ=Zone '.",
        )
    try:  # a valid cron may name no date at all ('0 0 30 2 *'): no run would ever come
        croniter(text, _CALENDAR_START).get_next(float)
    except CroniterBadDateError as exc:
        raise _problem(
            "schedule_cron",
            schedule_cron,
            "names a date that never comes (e.g. February 30 or April 31).",
            "use a day of month that the month has, e.g. '0 0 28 2 *' or '0 0 30 4 *'.",
        ) from exc
    return text, zone


# Each field's name and the numbers it takes (day of week: 0 and 7 are Sunday).
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day-of-month", 1, 31), ("month", 1, 12),
           ("day-of-week", 0, 7))  # fmt: skip


def _out_of_range(text: str) -> str:
    """Which field of a 5-field cron holds a number it cannot take ('' when none does); a step
    (``*/90``) is not judged."""
    fields = text.split()
    if len(fields) != 5:
        return ""
    for field, (name, low, high) in zip(fields, _FIELDS, strict=True):
        for part in field.split(","):
            for number in re.findall(r"\d+", part.split("/", 1)[0]):
                if not low <= int(number) <= high:
                    return f"has {number} in its {name} field, which takes {low}-{high}."
    return ""


def predict(
    schedule_cron: str | None,
    interval_seconds: float | None,
    run_start_times: Sequence[float],
    now: float,
) -> tuple[float, float, str] | None:
    """Next expected run, run interval and a description of the source, or ``None``.

    The cron wins over the interval, which wins over the median gap of earlier run starts.
    """
    if schedule_cron is not None:
        following = ticks_between(schedule_cron, now, math.inf, limit=1)[0]
        previous = tick_at_or_before(schedule_cron, now - 1e-6)
        # The interval around now (not the one after the next run), so an irregular cron
        # such as business hours gets the slack of its current cadence.
        return following, following - previous, f"cron '{schedule_cron}'"
    if interval_seconds is not None:
        interval = float(interval_seconds)
        return now + interval, interval, f"interval {interval:g} s"
    times = sorted(float(t) for t in run_start_times)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    if not gaps:
        return None
    interval = statistics.median(gaps)
    next_run = times[-1] + interval
    if next_run < now:  # roll forward over runs already started (e.g. this one)
        next_run += math.ceil((now - next_run) / interval) * interval
    return next_run, interval, f"median gap {interval:g} s of {len(times)} earlier runs"


DAY_SECONDS = 86400.0
# How many empty days a tick search crosses before asking croniter directly (a yearly cron).
_MAX_EMPTY_DAYS = 400


@functools.lru_cache(maxsize=8192)
def _day_ticks(schedule_cron: str, day: int) -> tuple[float, ...]:
    """The epoch ticks of a (validated) cron in the UTC day ``[day, day + 1)`` (days since 1970)."""
    expr, zone = parse_cron(schedule_cron)
    start, end = day * DAY_SECONDS, (day + 1) * DAY_SECONDS
    it = croniter(expr, datetime.datetime.fromtimestamp(start - 1.0, tz=zone))
    ticks = []
    while (tick := it.get_next(float)) < end:
        if tick >= start:
            ticks.append(tick)
    return tuple(ticks)


def _croniter(schedule_cron: str, moment: float) -> croniter:
    expr, zone = parse_cron(schedule_cron)
    return croniter(expr, datetime.datetime.fromtimestamp(moment, tz=zone))


def ticks_between(schedule_cron: str, after: float, until: float, limit: int) -> list[float]:
    """Up to ``limit`` ticks of ``schedule_cron`` in ``(after, until]``, the first always listed.

    The first tick after ``after`` is listed even when it is beyond ``until``, so the result is
    never empty.
    """
    out: list[float] = []
    day = math.floor(after / DAY_SECONDS)
    empty = 0
    while len(out) < limit:
        ticks = _day_ticks(schedule_cron, day)
        for tick in ticks[bisect.bisect_right(ticks, after) :]:
            if out and (tick > until or len(out) >= limit):
                return out
            out.append(tick)
        empty = 0 if ticks else empty + 1
        if not out and empty > _MAX_EMPTY_DAYS:
            out.append(_croniter(schedule_cron, after).get_next(float))
        elif out and (day + 1) * DAY_SECONDS > until:
            return out
        day += 1
    return out


def reaper_keep_times(
    now: float, gaps: Sequence[float], reaper_cron: str = REAPER_CRON
) -> list[float]:
    """The keep times worth weighing for a cluster kept at ``now``, given the idle ``gaps``.

    A kept cluster lives until the first reaper tick after its expiry, so the keep times there
    are are 0 and the reaper's ticks. Between two gaps, a longer keep only costs more (the same
    runs reuse the cluster, the others find it later), so of the ticks only the first at or
    after each gap is worth weighing: 0 and those, in increasing order.

    Args:
        now: When the cluster goes idle (epoch seconds).
        gaps: The idle gaps weighed (seconds).
        reaper_cron: The reaper's schedule.
    """
    ticks = {ticks_between(reaper_cron, now + g - 1e-6, math.inf, 1)[0] - now for g in gaps}
    return sorted({0.0, *ticks})


def tick_at_or_before(schedule_cron: str, moment: float) -> float:
    """The last tick of ``schedule_cron`` at or before ``moment``."""
    day = math.floor(moment / DAY_SECONDS)
    for _ in range(_MAX_EMPTY_DAYS):
        ticks = _day_ticks(schedule_cron, day)
        index = bisect.bisect_right(ticks, moment)
        if index:
            return ticks[index - 1]
        day -= 1
    return _croniter(schedule_cron, moment + 1e-6).get_prev(float)
