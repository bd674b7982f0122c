"""The least any online keep-or-delete rule can cost on the scheduled traces, in expectation.

A rule decides at a run's end what to do until the next run; all it can know of that run is the
law the trace generator draws it from (``teardown_traces``), and on the scheduled families that
law does not depend on anything the rule has seen: a tick's run is missed independently
(``cron-missed``), a start's delay is drawn independently (``cron-shifted``), jitter alike.
Waiting adds nothing either: while the cluster idles the rule learns only that the run has not
come yet, so every rule amounts to a keep time ``T`` chosen at the run end, with the cost
``r min(g, T) + C [g > T]`` of ``teardown_policies.gap_costs``.

*Knows the law* is the rule that knows the generator's law exactly (better than anything learned
from a run history) and at each run end picks the ``T`` of least expected cost under it, the next
start conditioned on coming after this run's end. No online rule costs less in expectation, so

    bound = sum over gaps of min_T E[cost(T)] / sum over gaps of E[OPT]

(``OPT = min(r g, C)``) is a lower bound on what any online rule can reach against the offline
optimum on that trace; where it is above a goal, the goal is out of reach of every online rule.
Its realized ratio on the benchmark's own traces is reported beside it (the same rule, priced on
the gaps that were drawn).

The law is represented by atoms: the start delays after a tick at 1 s steps for the 60 s jitter
(and 5 s / 15 s steps for the 5 min jitter and the 5-30 min delay of ``cron-shifted``), and for
``cron-missed`` the next run on the k-th tick with probability ``(1 - p) p^(k-1)`` (k <= 40).
With atoms the expected cost of ``T`` is piecewise linear between atoms and drops at each, so
the best ``T`` is 0 or an atom: exact for the atom law. Not modelled: in ``cron-shifted`` a run's
duration is capped at half the time to the next start, which ties the run end to the next start
on the few runs the cap shortens (their share is reported).
"""

from __future__ import annotations

import numpy as np

from benchmarks.teardown import policies, traces

POLICY = "knows-the-law"
FAMILIES = ("cron", "cron-missed", "cron-shifted")
MAX_MISSED_TICKS = 40
EXTRA_TICKS = MAX_MISSED_TICKS + 2


def _uniform_atoms(low: float, high: float, step: float) -> np.ndarray:
    count = max(1, round((high - low) / step))
    return low + (np.arange(count) + 0.5) * (high - low) / count


def delay_law(trace: traces.Trace) -> tuple[np.ndarray, np.ndarray]:
    """Atoms and weights of a start's delay after its tick (missed ticks aside)."""
    if trace.family == "cron-shifted":
        jitter = _uniform_atoms(0.0, traces.SHIFT_JITTER_S, 5.0)
        delay = _uniform_atoms(*traces.SHIFT_DELAY_S, 15.0)
        share = traces.SHIFT_DELAYED_SHARE
        values = np.concatenate([jitter, (jitter[:, None] + delay[None, :]).ravel()])
        weights = np.concatenate(
            [np.full(len(jitter), (1.0 - share) / len(jitter)),
             np.full(len(jitter) * len(delay), share / (len(jitter) * len(delay)))]
        )  # fmt: skip
        order = np.argsort(values, kind="stable")
        return values[order], weights[order]
    jitter = _uniform_atoms(0.0, traces.START_JITTER_S, 1.0)
    return jitter, np.full(len(jitter), 1.0 / len(jitter))


def missed_share(trace: traces.Trace) -> float:
    """The share of ticks the generator leaves without a run (0 outside ``cron-missed``)."""
    if trace.family != "cron-missed":
        return 0.0
    return next(p for name, _cron, _n, p in traces.MISSED_TRACES if name == trace.name)


def gap_atoms(trace: traces.Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per gap, the atoms of the idle time (rows sorted) and their weights, conditioned on > 0.

    Returns:
        ``(gaps, weights)``, both of shape (gaps, atoms); weights sum to 1 per row.
    """
    if trace.family not in FAMILIES:
        raise ValueError(f"no law for the {trace.family} family ({trace.name})")
    cron = trace.crons[0]
    ticks = traces.cron_ticks(cron, _tick_count(trace))
    own = np.searchsorted(ticks, trace.starts[:-1], side="right") - 1
    delays, delay_weights = delay_law(trace)
    p = missed_share(trace)
    count = MAX_MISSED_TICKS if p > 0 else 1
    tick_weights = (1.0 - p) * p ** np.arange(count)
    # Atom (k, j): the next run on the k-th tick after this run's own, delay j.
    next_ticks = ticks[own[:, None] + 1 + np.arange(count)[None, :]]
    starts = (next_ticks[:, :, None] + delays[None, None, :]).reshape(len(own), -1)
    weights = (tick_weights[:, None] * delay_weights[None, :]).ravel()
    gaps = starts - trace.ends[:-1, None]
    weights = np.where(gaps > 0, weights[None, :], 0.0)
    weights /= weights.sum(axis=1, keepdims=True)
    # Rows are sorted by construction: the delays are, and the longest is below a tick's spacing.
    if np.any(np.diff(gaps, axis=1) < 0):
        raise ValueError(f"{trace.name}: a delay atom reaches past the next tick")
    return gaps, weights


def _tick_count(trace: traces.Trace) -> int:
    """Enough ticks from the trace start to cover every run plus ``EXTRA_TICKS``."""
    cron = trace.crons[0]
    count = len(trace.starts) + EXTRA_TICKS
    while traces.cron_ticks(cron, count)[-EXTRA_TICKS] <= trace.starts[-1]:
        count *= 2
    return count


def best_ttls(
    gaps: np.ndarray, weights: np.ndarray, prices: policies.Prices
) -> tuple[np.ndarray, np.ndarray]:
    """Per gap, the keep time of least expected cost under the law, and that expected cost.

    Args:
        gaps: Idle-time atoms per gap, rows sorted (``gap_atoms``).
        weights: Their probabilities, rows summing to 1.
        prices: The cell's prices.
    """
    r = prices.idle_price_per_hour / 3600.0
    cost_c = prices.recreation_cost
    covered = np.cumsum(weights, axis=1)
    tail = np.clip(1.0 - covered, 0.0, None)
    # E[min(g, T)] at T = each atom; an atom at or before the run end (weight 0) is T = 0.
    gaps = np.maximum(gaps, 0.0)
    kept = np.cumsum(weights * gaps, axis=1) + gaps * tail
    costs = r * kept + cost_c * tail
    best = np.argmin(costs, axis=1)
    keep_cost = costs[np.arange(len(best)), best]
    delete = cost_c <= keep_cost
    ttls = np.where(delete, 0.0, gaps[np.arange(len(best)), best])
    return ttls, np.where(delete, cost_c, keep_cost)


def expected_opt(gaps: np.ndarray, weights: np.ndarray, prices: policies.Prices) -> np.ndarray:
    """Per gap, the offline optimum's expected cost ``E[min(r g, C)]`` under the law."""
    opt = np.minimum(prices.idle_price_per_hour * gaps / 3600.0, prices.recreation_cost)
    return (weights * opt).sum(axis=1)


def capped_share(trace: traces.Trace) -> float:
    """The share of runs whose duration the generator's cap shortened (``cron-shifted``)."""
    if trace.family != "cron-shifted":
        return 0.0
    to_next = np.diff(trace.starts)
    caps = 0.5 * np.append(to_next, to_next[-1])
    return float(np.mean(trace.durations >= caps - 1e-9))


def evaluate(trace: traces.Trace, prices: policies.Prices) -> dict[str, float]:
    """The rule's realized numbers on the trace plus ``bound`` (expected cost / expected OPT)."""
    gaps, weights = gap_atoms(trace)
    ttls, expected = best_ttls(gaps, weights, prices)
    metrics = policies.evaluate(trace.gaps, ttls, prices)
    metrics["bound"] = float(expected.sum() / expected_opt(gaps, weights, prices).sum())
    metrics["capped_share"] = capped_share(trace)
    return metrics
