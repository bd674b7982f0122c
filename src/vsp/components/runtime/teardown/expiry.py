"""When a kept or shrunk cluster expires: up to the break-even time beyond the predicted run.

A cron (or an interval) predicts the next run ``t_1``, but runs are missed (a failed trigger, a
paused schedule, a run skipped because the previous one still ran) or start late (queueing,
scheduler latency). Expiring a quarter interval after ``t_1`` whatever the prices throws the
cluster away at the first missed run even when the run after it is well within the break-even
time ``B`` (idle cost ``r * B`` = the re-creation cost ``C``): an hourly cron with 10% of runs
missed then cost 1.31x the offline optimum at ``B = 4 h``.

The rule, with ``t_1 < t_2 < ...`` the predicted runs, ``slack`` the start latency allowed
(a quarter of the interval, at least ``min_slack_seconds``) and ``t_K`` the last predicted run
at or before ``now + B`` (``K >= 1``)::

    expires_at = max(t_K + slack, now + B)

* Every run that comes within ``B`` of now finds the cluster warm, missed ticks before it or
  not; such an idle gap ``g <= B`` costs ``r g``, what the offline optimum pays.
* A gap longer than that costs at most ``r (B + slack) + C``, against the optimum's ``C``: the
  deterministic ski-rental bound (2x plus the slack), never the unbounded cost of keeping.
* With no run missed, the extra keep time costs nothing: the cluster is reused at ``t_1``.

``B`` is the break-even time of the chosen action: ``C / r_k`` kept, ``(C - C_s) / r_s``
shrunk (24 h when idle is free), and at most ``MAX_TICKS`` predicted runs are listed.

**Learning misses and late starts.** With a cron and the start times of earlier runs (as
``teardown_step.run_history`` lists them), each pair of consecutive runs says how many ticks
later the next run came and how late after its tick: replayed from the current run's tick, they
form a sample of idle gaps that includes misses and late starts. Each choice's keep time is the
one with the least average cost over that sample among the candidates ``t_k + slack``, the
expiry above and the sampled gaps (ties: the longest), and deleting costs ``C``. A sampled gap
beyond ``B`` can be the best keep time: when one run in ten starts 5-30 min late on an hourly
cron at ``B = 1 h``, keeping 85 min costs the on-time runs nothing more and saves the late ones
a re-creation.
When runs are missed often, deleting at once can be cheaper than keeping through a missed
tick: an every-4-hours cron with 20% of runs missed at ``B = 4 h`` is one. Without a history the
sample is the predicted gap alone, which gives the rule above and the cheapest choice at
``t_1``.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import math
from collections.abc import Callable

from vsp.components.runtime.teardown import cadence, history
from vsp.components.runtime.teardown import inputs as teardown_inputs

KEEP, SHRINK, DELETE = teardown_inputs.KEEP, teardown_inputs.SHRINK, teardown_inputs.DELETE
MAX_TICKS = 64


@dataclasses.dataclass(frozen=True)
class Plan:
    """The keep time of each weighed choice and its average cost.

    Attributes:
        expires_at: Per action (``keep``, ``shrink``), the expiry in epoch seconds.
        averages: Per action, the average cost over ``sample`` (``delete``: ``C``).
        sample: The idle gaps weighed, seconds (the predicted gap alone without a history).
        missed: Earlier runs that came one or more ticks late (history only).
        late: Earlier runs that started more than the slack after their tick (history only).
        text: Per action, a callable giving how its expiry was chosen, for the reason.
    """

    expires_at: dict[str, float]
    averages: dict[str, float]
    sample: list[float]
    missed: int
    late: int
    text: dict[str, Callable[[], str]]


def _clock(epoch: float) -> str:
    moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def predicted_runs(
    cron: str | None, next_run: float, interval: float, now: float, until: float
) -> list[float]:
    """The predicted runs from ``next_run`` up to ``until`` (at least the first; ``MAX_TICKS``)."""
    if cron is not None:
        return cadence.ticks_between(cron, now, until, MAX_TICKS)
    count = 1 if interval <= 0 else 1 + max(0, math.floor((until - next_run) / interval))
    return [next_run + k * interval for k in range(min(count, MAX_TICKS))]


@functools.lru_cache(maxsize=65536)
def _pattern(cron: str, before: float, after: float) -> tuple[int, float]:
    """How many ticks after ``before``'s tick the run at ``after`` came, and how late."""
    first = cadence.tick_at_or_before(cron, before)
    second = cadence.tick_at_or_before(cron, after)
    if second <= first:
        return 0, after - first
    ticks = cadence.ticks_between(cron, first, second, MAX_TICKS + 1)
    return len(ticks), after - second


def history_sample(
    cron: str, start_times: list[float], now: float, slack: float
) -> tuple[list[float], int, int]:
    """Idle gaps from now if the next run repeats one of the earlier runs' patterns.

    Args:
        cron: The schedule's cron.
        start_times: Start times of earlier runs, the current one (the newest) included.
        now: The end of the current run.
        slack: The start latency allowed; a later start is counted as late.

    Returns:
        (gaps in seconds, runs that came a tick or more late, runs that started late).
    """
    times = sorted(start_times)
    if len(times) < history.MIN_GAPS + 1:
        return [], 0, 0
    patterns = [_pattern(cron, a, b) for a, b in zip(times, times[1:], strict=False)]
    # Two runs on one tick (a manual run, or runs of an earlier, denser schedule) say nothing
    # about when this schedule's next tick brings a run.
    patterns = [p for p in patterns if p[0] > 0]
    if len(patterns) < history.MIN_GAPS:
        return [], 0, 0
    # The current run's tick: the last one before now (also when the listing missed the run).
    base = cadence.tick_at_or_before(cron, now)
    most = min(MAX_TICKS, max(m for m, _ in patterns))
    ahead = cadence.ticks_between(cron, base, math.inf, max(1, most))
    gaps = []
    for ticks, delay in patterns:
        tick = base if ticks == 0 else (ahead[ticks - 1] if ticks <= len(ahead) else math.inf)
        gap = tick + delay - now
        gaps.append(gap if gap > 0.0 else 0.0)
    missed = sum(1 for m, _ in patterns if m > 1)
    late = sum(1 for _, delay in patterns if delay > slack)
    return gaps, missed, late


def _choice(
    inputs: teardown_inputs.TeardownInputs,
    action: str,
    sample: list[float],
    runs_until,
    now: float,
    slack: float,
) -> tuple[float, float, Callable[[], str]]:
    """(expiry, average cost, how it was chosen) of keeping or shrinking."""
    if action == KEEP:
        rate, reuse, be = inputs.idle_price_per_hour, 0.0, inputs.break_even_seconds
    else:
        rate = inputs.shrunk_price_per_hour or 0.0
        reuse, be = inputs.scale_up_cost, inputs.shrink_break_even_seconds
    be = be if math.isfinite(be) else teardown_inputs.UNKNOWN_CADENCE_TTL_SECONDS
    runs = runs_until(now + be)
    within = [t for t in runs if t <= now + be] or runs[:1]
    bound = max(within[-1] + slack, now + be) - now
    sampled = (g for g in sample if 0 < g < math.inf)
    candidates = sorted({bound, *(t + slack - now for t in runs), *sampled})
    deleted = inputs.recreation_cost
    averages = history.average_costs(sample, candidates, rate, deleted, reuse)
    best = history.cheapest_index(averages, longest=True)
    ttl = candidates[best]
    # The sentence is built when the reason is written: a replay of many decisions
    # (``benchmarks.teardown.cost``) never reads most of them.
    text = functools.partial(_expiry_text, now, ttl, bound, within[-1], len(within), slack, be)
    return now + ttl, averages[best], text


def _expiry_text(
    now: float, ttl: float, bound: float, last: float, count: int, slack: float, be: float
) -> str:
    if ttl != bound:
        return (
            f"It expires at {_clock(now + ttl)}, after {ttl / 3600:.2f} h: the keep time that "
            "costs least over the sampled gaps"
        )
    return (
        f"It expires at max(t_K + slack, now + B) = max({_clock(last)} + "
        f"{slack / 60:.0f} min, now + {be / 3600:.2f} h) = {_clock(now + ttl)}, t_K being the "
        f"last of the {count} predicted run(s) within the break-even time B: a missed or "
        "late run within B still finds it warm"
    )


def plan(
    inputs: teardown_inputs.TeardownInputs,
    next_run: float,
    interval: float,
    slack: float,
    now: float,
) -> Plan:
    """Expiry and average cost of each weighed choice for a predicted cadence.

    Args:
        inputs: Prices, cron and run history.
        next_run: The predicted next run (epoch seconds).
        interval: The run interval around now, seconds.
        slack: Start latency allowed after a predicted run, seconds.
        now: The end of the current run.
    """
    cron = inputs.schedule_cron
    sample, missed, late = [], 0, 0
    if cron is not None:
        times = [float(t) for t in inputs.run_start_times]
        sample, missed, late = history_sample(cron, times, now, slack)
    if not sample:
        sample = [max(0.0, next_run - now)]

    def runs_until(until: float) -> list[float]:
        """The predicted runs up to ``until``."""
        return predicted_runs(cron, next_run, interval, now, until)

    actions = [KEEP, SHRINK] if inputs.can_shrink else [KEEP]
    expires_at, averages, text = {}, {}, {}
    for action in actions:
        expires_at[action], averages[action], text[action] = _choice(
            inputs, action, sample, runs_until, now, slack
        )
    averages[DELETE] = inputs.recreation_cost
    return Plan(expires_at, averages, sample, missed, late, text)
