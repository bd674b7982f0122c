"""A schedule's own fields checked before anything is sent: cron, run counts, start and end.

An end time that has passed, or that comes before the cron's first tick after the start, is
refused with that tick: Vertex would create the schedule and it would start no run.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from vsp.components.runtime.cluster.rules_base import Problems
from vsp.components.runtime.core import errors
from vsp.components.runtime.teardown import cadence


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _parse_time(text: str) -> datetime.datetime | None:
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if "T" in value.upper() and moment.tzinfo is not None else None


def _stamp(moment: float) -> str:
    """An epoch time as RFC 3339 in UTC, to the second."""
    return datetime.datetime.fromtimestamp(moment, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def problems(
    cron: str,
    max_concurrent_run_count: Any,
    max_run_count: Any,
    start_time: Any,
    end_time: Any,
) -> list[errors.SpecProblem]:
    """The problems of a schedule's own fields (cron, run counts, start and end times), every
    one at once; ``vsp schedule`` lists them with the run's before anything is sent.
    """
    found = Problems()
    fields = {
        "max_concurrent_run_count": max_concurrent_run_count,
        "max_run_count": max_run_count,
        "start_time": start_time,
        "end_time": end_time,
    }
    try:
        cadence.parse_cron(cron)
    except errors.SpecValidationError as exc:
        found.add(
            "cron", cron, _sentence(exc.problems[0].problem),
            "Use 'minute hour day-of-month month day-of-week', e.g. '0 3 * * *', "
            "optionally prefixed 'TZ=Zone ' (e.g. 'TZ=Europe/Paris 0 3 * * *').",
        )  # fmt: skip
    for field in ("max_concurrent_run_count", "max_run_count"):
        value = fields[field]
        if (value is not None or field == "max_concurrent_run_count") and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            flag = "--max-concurrent-runs" if field.startswith("max_c") else "--max-runs"
            found.add(field, value, "Must be an integer >= 1.", f"Pass {flag} N (N >= 1).")
    times = {}
    for field in ("start_time", "end_time"):
        value = fields[field]
        if value is not None:
            times[field] = _parse_time(value) if isinstance(value, str) else None
            if times[field] is None:
                found.add(
                    field, value, "Is not an RFC 3339 timestamp with a time zone.",
                    "Use e.g. 2025-01-31T03:00:00Z.",
                )  # fmt: skip
    if times.get("start_time") and times.get("end_time"):
        if times["end_time"] <= times["start_time"]:
            found.add(
                "end_time", end_time, "Is not after start_time.",
                "Pass an --end-time later than --start-time.",
            )  # fmt: skip
    if times.get("end_time") and not any(p.field == "end_time" for p in found.items):
        cron_known = not any(p.field in ("cron", "start_time") for p in found.items)
        _check_a_run_fits(found, cron if cron_known else None, end_time, times)
    return found.items


def _check_a_run_fits(
    problems: Problems,
    cron: str | None,
    end_text: str,
    times: dict[str, datetime.datetime | None],
) -> None:
    """Adds a problem when the end has passed, or when no tick of the cron (None: not known)
    comes before it: a schedule that ends before its first run would start nothing."""
    end = times["end_time"].timestamp()  # type: ignore[union-attr]
    now = time.time()
    start = times.get("start_time")
    after = max(now, start.timestamp()) if start else now
    if end <= now:
        problems.add(
            "end_time", end_text,
            f"Has passed (it is {_stamp(now)} now): the schedule would start no run.",
            "Pass a future --end-time, or leave it out (no end).",
        )  # fmt: skip
        return
    if cron is None:
        return
    first = cadence.ticks_between(cron, after, end, 1)[0]
    if first > end:
        problems.add(
            "end_time", end_text,
            f"Comes before the cron's first tick ({_stamp(first)}, cron {cron!r} "
            f"from {_stamp(after)}): the schedule would start no run.",
            f"Pass an --end-time after {_stamp(first)}, or another --cron.",
        )  # fmt: skip
