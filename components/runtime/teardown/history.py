"""The keep time that would have cost least over earlier idle gaps (empirical ski rental).

Without a schedule, the next run is predicted from the start times of earlier runs of the same
pipeline. A median gap says little about the next gap when arrivals are irregular, so instead of
acting on one predicted time, ``best_ttl`` picks the keep time ``T`` that minimises the average
cost over the observed idle gaps: a gap ``g`` costs ``r * min(g, T)`` (idle) plus ``C`` when
``g > T`` (re-created), or the reuse cost when ``g <= T`` (0 when kept whole, the scale-up when
shrunk). The average is piecewise linear and rising between observed gaps, so its
minimum is at ``T = 0`` or at one of the gaps; ties go to the shorter keep.
"""

from __future__ import annotations

from collections.abc import Sequence

MIN_GAPS = 3


def idle_gaps(start_times: Sequence[float], now: float) -> list[float]:
    """Idle gaps estimated from run start times: start-to-start gaps less this run's duration.

    Args:
        start_times: Epoch start times of runs, this one included when listed.
        now: The end of this run (epoch seconds).
    """
    times = sorted(float(t) for t in start_times)
    starts = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    if not starts:
        return []
    # The run history lists this run too (it is RUNNING), so the newest start is normally this
    # run's; one older than every gap between runs cannot be, and then the duration is unknown
    # (taken as 0).
    since = now - times[-1]
    duration = since if 0.0 <= since <= max(starts) else 0.0
    return [max(0.0, gap - duration) for gap in starts]


def best_ttl(
    gaps: Sequence[float],
    idle_price_per_hour: float,
    recreation_cost: float,
    reuse_cost: float = 0.0,
) -> tuple[float, float]:
    """The keep time with the least average cost over ``gaps``, and that cost.

    Args:
        gaps: Observed idle gaps, seconds.
        idle_price_per_hour: What the idle cluster costs per hour.
        recreation_cost: What deleting and re-creating costs.
        reuse_cost: What the next run pays to reuse the cluster within the keep time (0 for a
            kept cluster; the scale-up cost for a shrunk one).

    Returns:
        (keep seconds, average cost per gap); ``(0, recreation_cost)`` without gaps.
    """
    if not gaps:
        return 0.0, float(recreation_cost)
    rate = idle_price_per_hour / 3600.0

    def average(ttl: float) -> float:
        total = sum(rate * min(g, ttl) + (recreation_cost if g > ttl else reuse_cost) for g in gaps)
        return total / len(gaps)

    best = min(sorted({0.0, *gaps}), key=lambda ttl: (round(average(ttl), 12), ttl))
    return best, average(best)
