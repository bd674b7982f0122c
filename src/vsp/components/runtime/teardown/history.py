"""The keep time that would have cost least over earlier idle gaps (empirical ski rental).

Without a schedule, the next run is predicted from the start times of earlier runs of the same
pipeline. A median gap says little about the next gap when arrivals are irregular, so instead of
acting on one predicted time, ``best_ttl`` picks the keep time ``T`` that minimises the average
cost over the observed idle gaps: a gap ``g`` costs ``r * min(g, T)`` (idle) plus ``C`` when
``g > T`` (re-created), or the reuse cost when ``g <= T`` (0 when kept whole, the scale-up when
shrunk). The average is piecewise linear and rising between observed gaps, so its
minimum is at ``T = 0`` or at one of the gaps; ties go to the shorter keep.

``average_costs`` prices many keep times at once from the sorted gaps and their prefix sums
(``O((n + m) log n)`` instead of ``O(n m)``), in plain Python: the runtime does not depend on
numpy, and ``bisect`` with ``itertools.accumulate`` is all it takes.
"""

from __future__ import annotations

import bisect
import itertools
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
    keep_times: Sequence[float] | None = None,
) -> tuple[float, float]:
    """The keep time with the least average cost over ``gaps``, and that cost.

    Args:
        gaps: Observed idle gaps, seconds.
        idle_price_per_hour: What the idle cluster costs per hour.
        recreation_cost: What deleting and re-creating costs.
        reuse_cost: What the next run pays to reuse the cluster within the keep time (0 for a
            kept cluster; the scale-up cost for a shrunk one).
        keep_times: The keep times there are to choose from, seconds (for example 0 and the
            reaper's ticks); by default any, i.e. 0 and each gap.

    Returns:
        (keep seconds, average cost per gap); ``(0, recreation_cost)`` without gaps.
    """
    if not gaps:
        return 0.0, float(recreation_cost)
    chosen = (float(g) for g in gaps) if keep_times is None else keep_times
    candidates = sorted({0.0, *(float(t) for t in chosen)})
    averages = average_costs(gaps, candidates, idle_price_per_hour, recreation_cost, reuse_cost)
    best = cheapest_index(averages, longest=False)
    return candidates[best], averages[best]


def cheapest_index(averages: Sequence[float], longest: bool) -> int:
    """The index of the least of ``averages`` (equal to 12 decimals: the last, or the first).

    ``averages`` belong to keep times in increasing order, so ``longest`` picks the longest of
    the cheapest keep times.
    """
    least = min(averages)
    low = round(least, 12)
    # Only averages within 1e-12 of the least can round to the same value: round the few.
    indices = range(len(averages) - 1, -1, -1) if longest else range(len(averages))
    return next(
        i for i in indices if averages[i] <= least + 1e-12 and round(averages[i], 12) == low
    )


def average_costs(
    gaps: Sequence[float],
    ttls: Sequence[float],
    idle_price_per_hour: float,
    recreation_cost: float,
    reuse_cost: float = 0.0,
) -> list[float]:
    """The average cost per gap of keeping for each of ``ttls`` (seconds), in their order.

    A gap ``g`` costs ``r * min(g, T)`` plus ``reuse_cost`` when ``g <= T``, else
    ``recreation_cost``; see the module docstring. ``gaps`` must not be empty.
    """
    ordered = sorted(float(g) for g in gaps)
    prefix = [0.0, *itertools.accumulate(ordered)]
    n = len(ordered)
    price = idle_price_per_hour
    out = []
    for ttl in ttls:
        reused = bisect.bisect_right(ordered, ttl)
        missed = n - reused
        total = price * (prefix[reused] / 3600.0) + reuse_cost * reused
        total += missed * (price * (ttl / 3600.0) + recreation_cost) if missed else 0.0
        out.append(total / n)
    return out
