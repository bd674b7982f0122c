"""Timestamps in the RFC 3339 form Google APIs use (UTC, ``Z`` suffix), and durations in
their JSON form (``"2.5s"``)."""

from __future__ import annotations

import datetime
import re
from typing import Any

# google.protobuf.Duration in JSON: whole seconds (at most 315,576,000,000: 12 digits), up to
# nine fractional digits, then "s".
_DURATION = re.compile(r"(\d{1,12}(?:\.\d{1,9})?)s")


def duration_seconds(text: Any) -> float | None:
    """Seconds of a duration in JSON (``"2.5s"``), or None when ``text`` is not one."""
    found = _DURATION.fullmatch(text) if isinstance(text, str) else None
    return None if found is None else float(found[1])


def rfc3339(epoch: float) -> str:
    """Formats epoch seconds as ``2025-01-31T12:00:00.123456Z``."""
    moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str) -> float:
    """Parses an RFC 3339 timestamp (``Z`` or offset; up to nanoseconds) into epoch seconds.

    Args:
        text: The timestamp, e.g. ``2025-01-31T12:00:00.123456789Z``.

    Returns:
        Epoch seconds.

    Raises:
        ValueError: The text is not an RFC 3339 timestamp.
    """
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    head, dot, rest = value.partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        fraction, offset = rest[:digits], rest[digits:]
        value = f"{head}.{fraction[:6].ljust(6, '0')}{offset}"
    moment = datetime.datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no time zone")
    return moment.timestamp()
