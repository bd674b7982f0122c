"""Timestamps in the RFC 3339 form Google APIs use (UTC, ``Z`` suffix)."""

from __future__ import annotations

import datetime


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
