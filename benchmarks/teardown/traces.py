"""Run traces for the keep-or-delete benchmark: when runs start, how long they last, their cron.

A trace is a sequence of runs. Run ``i`` starts at ``starts[i]`` (epoch seconds), lasts
``durations[i]`` seconds, and was started by the schedule ``crons[i]`` (``None``: no schedule,
so the decision has to use the run history). The idle gap after run ``i`` is the time from its
end to the start of run ``i + 1``; the last run has no gap.

Families:

* ``cron``: runs start on the ticks of a cron, 0-60 s late (scheduler latency; unmeasured, so
  a guess), with lognormal durations (median 5 min) capped at half the time to the next tick.
* ``change``: an hourly schedule replaced by a daily one mid-trace; each run carries the cron of
  the schedule that started it.
* ``cron-missed``: hourly and every-4-hours crons with 10% or 20% of the ticks starting no run
  (each tick independently; a failed trigger, a paused schedule, a run skipped because the
  previous one still ran).
* ``cron-shifted``: hourly and every-4-hours crons whose runs start 0-5 min late (jitter) and
  one in ten a further 5-30 min late (delayed starts: a queue ahead of the run).
* ``poisson``: memoryless idle gaps (exponential) with a mean of ``k * beta``; no cron.
* ``bursty``: heavy-tailed idle gaps (Pareto II, alpha 1.5, mean ``beta``); no cron.
* ``adversarial``: idle gaps just above the break-even time (1.00-1.05 x ``beta``); no cron.

All traces start at 2027-01-04T00:00Z (a Monday) and are fixed by ``(seed, name)``.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import zlib

import numpy as np
from croniter import croniter

T0 = datetime.datetime(2027, 1, 4, tzinfo=datetime.timezone.utc).timestamp()
DURATION_MEDIAN_S = 300.0
DURATION_SIGMA = 0.6
MAX_DURATION_S = 3600.0
START_JITTER_S = 60.0
PARETO_ALPHA = 1.5

# name, cron, number of runs
CRON_TRACES = (
    ("hourly", "0 * * * *", 1000),
    ("every-4h", "0 */4 * * *", 500),
    ("daily", "0 3 * * *", 365),
    ("weekly", "0 3 * * 1", 200),
    ("business-hours", "0 9-18 * * 1-5", 500),
)
CHANGE_CRONS = (("0 * * * *", 300), ("0 3 * * *", 200))
# name, cron, ticks, share of the ticks missed
MISSED_TRACES = (
    ("hourly-missed-10%", "0 * * * *", 1000, 0.10),
    ("hourly-missed-20%", "0 * * * *", 1000, 0.20),
    ("every-4h-missed-10%", "0 */4 * * *", 500, 0.10),
    ("every-4h-missed-20%", "0 */4 * * *", 500, 0.20),
)
# name, cron, runs
SHIFTED_TRACES = (("hourly-shifted", "0 * * * *", 1000), ("every-4h-shifted", "0 */4 * * *", 500))
SHIFT_JITTER_S = 300.0
SHIFT_DELAYED_SHARE = 0.10
SHIFT_DELAY_S = (300.0, 1800.0)
POISSON_MEAN_GAPS = (0.5, 1.0, 2.0, 4.0)  # x beta
POISSON_RUNS = 500
BURSTY_RUNS = 1000
ADVERSARIAL_RUNS = 500


@dataclasses.dataclass(frozen=True)
class Trace:
    """A sequence of runs.

    Attributes:
        name: Trace name, e.g. ``hourly`` or ``poisson-1.0b``.
        family: ``cron``, ``change``, ``cron-missed``, ``cron-shifted``, ``poisson``,
            ``bursty`` or ``adversarial``.
        starts: Epoch start times, increasing.
        durations: Run durations in seconds.
        crons: Per run, the cron of the schedule that started it, or ``None``.
    """

    name: str
    family: str
    starts: np.ndarray
    durations: np.ndarray
    crons: tuple[str | None, ...]

    @property
    def ends(self) -> np.ndarray:
        """Epoch end times of the runs."""
        return self.starts + self.durations

    @property
    def gaps(self) -> np.ndarray:
        """Idle seconds from the end of each run to the start of the next (one fewer than runs)."""
        return self.starts[1:] - self.ends[:-1]

    def __post_init__(self) -> None:
        if not len(self.starts) == len(self.durations) == len(self.crons):
            raise ValueError(f"trace {self.name}: starts, durations and crons differ in length")
        if len(self.starts) > 1 and float(np.min(self.gaps)) < 0:
            raise ValueError(f"trace {self.name}: runs overlap")


def rng_for(seed: int, name: str) -> np.random.Generator:
    """A generator fixed by the seed and the trace name (so traces do not share draws)."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


@functools.lru_cache(maxsize=64)
def cron_ticks(cron: str, n: int, after: float = T0) -> np.ndarray:
    """The first ``n`` epoch ticks of a UTC cron strictly after ``after`` (read-only, cached).

    Every seed and break-even time of the benchmark replays the same ticks, and expanding a
    cron tick by tick is most of the time it takes to build a trace.
    """
    it = croniter(cron, datetime.datetime.fromtimestamp(after, tz=datetime.timezone.utc))
    ticks = np.array([it.get_next(float) for _ in range(n)])
    ticks.flags.writeable = False
    return ticks


def lognormal_durations(rng: np.random.Generator, caps: np.ndarray) -> np.ndarray:
    """Lognormal run durations (median ``DURATION_MEDIAN_S``), each capped at ``caps``."""
    raw = DURATION_MEDIAN_S * np.exp(DURATION_SIGMA * rng.standard_normal(len(caps)))
    return np.minimum(raw, caps)


def _scheduled(name: str, family: str, ticks, crons, rng, jitter_s: float, zero: bool) -> Trace:
    ticks = np.asarray(ticks, dtype=float)
    intervals = np.diff(ticks)
    caps = 0.5 * np.append(intervals, intervals[-1])
    starts = ticks + rng.uniform(0.0, jitter_s, len(ticks))
    durations = np.zeros(len(ticks)) if zero else lognormal_durations(rng, caps)
    return Trace(name, family, starts, durations, tuple(crons))


def cron_trace(
    name: str,
    cron: str,
    n: int,
    seed: int,
    *,
    jitter_s: float = START_JITTER_S,
    zero_durations: bool = False,
) -> Trace:
    """Runs on the ticks of ``cron``, each given ``cron`` as its schedule.

    Args:
        name: Trace name.
        cron: A 5-field UTC cron.
        n: Number of runs.
        seed: Trace seed.
        jitter_s: Runs start uniformly 0..``jitter_s`` seconds after their tick.
        zero_durations: Runs take no time (an exact cron trace for tests).
    """
    ticks = cron_ticks(cron, n)
    rng = rng_for(seed, name)
    return _scheduled(name, "cron", ticks, [cron] * n, rng, jitter_s, zero_durations)


def missed_trace(name: str, cron: str, n_ticks: int, missed: float, seed: int) -> Trace:
    """Runs on the ticks of ``cron`` but for a share ``missed`` of them (the first always runs)."""
    ticks = cron_ticks(cron, n_ticks)
    rng = rng_for(seed, name)
    runs = rng.random(n_ticks) >= missed
    runs[0] = True
    trace = _scheduled(name, "cron-missed", ticks, [cron] * n_ticks, rng, START_JITTER_S, False)
    return Trace(
        name, "cron-missed", trace.starts[runs], trace.durations[runs], (cron,) * int(runs.sum())
    )


def shifted_trace(name: str, cron: str, n: int, seed: int) -> Trace:
    """Runs on the ticks of ``cron``, 0-5 min late, one in ten a further 5-30 min late.

    Durations are capped at half the time to the next start, so runs never overlap.
    """
    ticks = cron_ticks(cron, n)
    rng = rng_for(seed, name)
    delayed = rng.random(n) < SHIFT_DELAYED_SHARE
    starts = ticks + rng.uniform(0.0, SHIFT_JITTER_S, n)
    starts += np.where(delayed, rng.uniform(*SHIFT_DELAY_S, n), 0.0)
    to_next = np.diff(starts)
    caps = 0.5 * np.append(to_next, to_next[-1])
    durations = lognormal_durations(rng, caps)
    return Trace(name, "cron-shifted", starts, durations, (cron,) * n)


def change_trace(seed: int, name: str = "hourly-to-daily") -> Trace:
    """An hourly schedule replaced by a daily one right after its last run.

    The decision at the end of the last hourly run still sees the hourly cron (the one that
    started it); the runs of the new schedule carry the daily cron.
    """
    (first_cron, first_n), (second_cron, second_n) = CHANGE_CRONS
    first = cron_ticks(first_cron, first_n)
    second = cron_ticks(second_cron, second_n, after=float(first[-1]) + 3600.0)
    crons = [first_cron] * first_n + [second_cron] * second_n
    ticks = np.concatenate([first, second])
    return _scheduled(name, "change", ticks, crons, rng_for(seed, name), START_JITTER_S, False)


def gap_trace(name: str, family: str, gaps: np.ndarray, rng: np.random.Generator) -> Trace:
    """Unscheduled runs separated by the given idle ``gaps`` (seconds), from ``T0``."""
    n = len(gaps) + 1
    durations = lognormal_durations(rng, np.full(n, MAX_DURATION_S))
    starts = T0 + np.concatenate([[0.0], np.cumsum(durations[:-1] + gaps)])
    return Trace(name, family, starts, durations, (None,) * n)


def poisson_trace(mean_gap_beta: float, beta_s: float, seed: int) -> Trace:
    """Exponential idle gaps with mean ``mean_gap_beta * beta_s``."""
    name = f"poisson-{mean_gap_beta:g}b"
    rng = rng_for(seed, name)
    gaps = rng.exponential(mean_gap_beta * beta_s, POISSON_RUNS - 1)
    return gap_trace(name, "poisson", gaps, rng)


def bursty_trace(beta_s: float, seed: int) -> Trace:
    """Pareto II (Lomax) idle gaps, alpha 1.5, mean ``beta_s``: many short gaps, a few huge."""
    name = "bursty-pareto"
    rng = rng_for(seed, name)
    scale = beta_s * (PARETO_ALPHA - 1.0)  # Lomax mean = scale / (alpha - 1)
    gaps = scale * rng.pareto(PARETO_ALPHA, BURSTY_RUNS - 1)
    return gap_trace(name, "bursty", gaps, rng)


def adversarial_trace(beta_s: float, seed: int) -> Trace:
    """Idle gaps just above the break-even time, the worst case of the break-even TTL."""
    name = "adversarial"
    rng = rng_for(seed, name)
    gaps = beta_s * rng.uniform(1.0, 1.05, ADVERSARIAL_RUNS - 1) + 1.0
    return gap_trace(name, "adversarial", gaps, rng)


def all_traces(beta_s: float, seed: int) -> list[Trace]:
    """Every trace of the benchmark for one break-even time and seed."""
    traces = [cron_trace(name, cron, n, seed) for name, cron, n in CRON_TRACES]
    traces.append(change_trace(seed))
    traces += [missed_trace(name, cron, n, p, seed) for name, cron, n, p in MISSED_TRACES]
    traces += [shifted_trace(name, cron, n, seed) for name, cron, n in SHIFTED_TRACES]
    traces += [poisson_trace(k, beta_s, seed) for k in POISSON_MEAN_GAPS]
    traces.append(bursty_trace(beta_s, seed))
    traces.append(adversarial_trace(beta_s, seed))
    return traces
