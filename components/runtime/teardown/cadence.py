"""When the next run of a pipeline is expected: from its cron, an interval, or run history.

``parse_cron`` validates a schedule's 5-field cron with an optional ``TZ=Zone `` (or
``CRON_TZ=Zone ``) prefix, as Vertex schedules accept; ``predict`` gives the next expected run
and the run interval around now, used by ``teardown.decide``.
"""

from __future__ import annotations

import datetime
import math
import statistics
import zoneinfo
from collections.abc import Sequence

from croniter import croniter

from vsp.components.runtime.core.errors import SpecProblem, SpecValidationError

_TZ_PREFIXES = ("TZ=", "CRON_TZ=")


def _problem(field: str, value: object, problem: str, fix: str) -> SpecValidationError:
    return SpecValidationError("the teardown inputs", [SpecProblem(field, value, problem, fix)])


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
            raise _problem(
                "schedule_cron",
                schedule_cron,
                f"unknown time zone {name!r}.",
                "use an IANA zone, e.g. 'TZ=America/New_York 0 9 * * *'.",
            ) from exc
        text = text.strip()
    if len(text.split()) != 5 or not croniter.is_valid(text):
        raise _problem(
            "schedule_cron",
            schedule_cron,
            "is not a valid 5-field cron expression.",
            "use 'minute hour day-of-month month day-of-week', e.g. '0 * * * *', "
            "optionally prefixed 'TZ=Zone '.",
        )
    return text, zone


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
        expr, zone = parse_cron(schedule_cron)
        moment = datetime.datetime.fromtimestamp(now, tz=zone)
        following = croniter(expr, moment).get_next(float)
        previous = croniter(expr, moment).get_prev(float)
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
