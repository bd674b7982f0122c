"""Keep-or-delete policies as TTLs, and what each costs on a trace (ski rental).

At the end of a run a policy keeps the cluster until ``T`` seconds later (``T = 0``: delete now,
``T = inf``: keep forever). With idle price ``r`` per hour and re-creation cost ``C``, an idle
gap ``g`` costs ``r * min(g, T) + C * [g > T]``; the offline optimum pays ``min(r * g, C)``.
A run that starts after its cluster was deleted waits the provisioning time (added delay).

The expiry of ours is enforced as the reaper does: the reaper runs on
``cadence.REAPER_CRON``, so a cluster whose ``vsp-expires-at`` label is ``t`` is deleted at the
first reaper tick after ``t`` (a run starting before then still reuses it), and the keep time
``T`` is that tick minus the run end. The textbook references (break-even and randomized TTLs)
are priced with their exact ``T``.

The run ends of a trace are fixed: the provisioning wait is priced into ``C`` (its delay
penalty) and reported as added delay, but does not move the run's end, so every policy faces
the same gaps and the optimum is well defined.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from benchmarks.teardown import ours, traces
from vsp.components.runtime.teardown import cadence as teardown_cadence
from vsp.components.runtime.teardown import inputs as teardown_inputs


@dataclasses.dataclass(frozen=True)
class Prices:
    """Prices of one benchmark cell, as the teardown component takes them.

    Attributes:
        label: Short name of the break-even time, e.g. ``1h``.
        idle_price_per_hour: ``r``.
        provisioning_minutes: Re-creation time; also the delay a run without a cluster waits.
        provisioning_price_per_hour: Price while provisioning.
        delay_penalty_per_hour: Cost of a run waiting, per hour.
    """

    label: str
    idle_price_per_hour: float
    provisioning_minutes: float
    provisioning_price_per_hour: float
    delay_penalty_per_hour: float

    def inputs(self, **kwargs) -> teardown_inputs.TeardownInputs:
        """``TeardownInputs`` with these prices and the given decision inputs."""
        return teardown_inputs.TeardownInputs(
            idle_price_per_hour=self.idle_price_per_hour,
            provisioning_minutes=self.provisioning_minutes,
            provisioning_price_per_hour=self.provisioning_price_per_hour,
            delay_penalty_per_hour=self.delay_penalty_per_hour,
            **kwargs,
        )

    @property
    def recreation_cost(self) -> float:
        """``C``, from ``TeardownInputs.recreation_cost``."""
        return self.inputs().recreation_cost

    @property
    def beta_s(self) -> float:
        """Break-even idle seconds ``beta = C / r``, from ``TeardownInputs``."""
        return self.inputs().break_even_seconds


# beta = 15 min, 1 h and 4 h with r = 1.0/h (C = 0.25, 1.0, 4.0).
PRICES = (
    Prices("15min", 1.0, 10.0, 1.5, 0.0),
    Prices("1h", 1.0, 20.0, 1.0, 2.0),
    Prices("4h", 1.0, 20.0, 1.0, 11.0),
)

DETERMINISTIC = ("always-delete", "always-keep", "break-even-ttl", "ours-auto", "ours-keep")
RANDOMIZED = "randomized-ttl"
POLICIES = (*DETERMINISTIC[:3], RANDOMIZED, *DETERMINISTIC[3:])
RANDOMIZED_EXPECTED_RATIO = math.e / (math.e - 1.0)


def gap_costs(gaps_s: np.ndarray, ttls_s: np.ndarray, prices: Prices) -> np.ndarray:
    """Cost of each gap when the cluster is kept ``ttls_s`` seconds: ``r min(g, T) + C [g > T]``."""
    kept_h = np.minimum(gaps_s, ttls_s) / 3600.0
    return prices.idle_price_per_hour * kept_h + prices.recreation_cost * (gaps_s > ttls_s)


def opt_costs(gaps_s: np.ndarray, prices: Prices) -> np.ndarray:
    """Offline optimum per gap: ``min(r g, C)``."""
    return np.minimum(prices.idle_price_per_hour * gaps_s / 3600.0, prices.recreation_cost)


def randomized_ttls(beta_s: float, n_gaps: int, draws: int, seed: int) -> np.ndarray:
    """TTLs with density proportional to ``exp(t / beta)`` on ``[0, beta]``, shape (draws, gaps).

    Inverse CDF: ``F(t) = (exp(t / beta) - 1) / (e - 1)``, so ``t = beta ln(1 + u (e - 1))``.
    """
    u = np.random.default_rng([seed, 0xE1]).random((draws, n_gaps))
    return beta_s * np.log1p(u * (math.e - 1.0))


def randomized_expected_costs(gaps_s: np.ndarray, prices: Prices) -> np.ndarray:
    """Exact expected cost per gap of the randomized TTL (integrated over its density).

    With ``x = min(g, beta)`` and ``F`` the TTL's CDF:
    ``E = r * int_0^x t p(t) dt + C F(x) + r g (1 - F(x))``, where
    ``int_0^x t p(t) dt = beta ((x / beta - 1) e^(x / beta) + 1) / (e - 1)``.
    """
    beta = prices.beta_s
    x = np.minimum(gaps_s, beta)
    grow = np.exp(x / beta)
    cdf = (grow - 1.0) / (math.e - 1.0)
    mean_kept_s = beta * ((x / beta - 1.0) * grow + 1.0) / (math.e - 1.0)
    r = prices.idle_price_per_hour / 3600.0
    return r * mean_kept_s + prices.recreation_cost * cdf + r * gaps_s * (1.0 - cdf)


def best_fixed_ttl(gaps_s: np.ndarray, prices: Prices) -> float:
    """The one TTL that would have cost least on these gaps (hindsight; a reference, not a policy).

    The total cost is piecewise linear in ``T`` and jumps up just after each gap, so the best
    ``T`` is 0, infinity, or one of the gaps.
    """
    candidates = np.concatenate([[0.0, math.inf], np.unique(gaps_s)])
    return float(candidates[int(np.argmin(fixed_ttl_totals(gaps_s, candidates, prices)))])


def fixed_ttl_totals(gaps_s: np.ndarray, ttls_s: np.ndarray, prices: Prices) -> np.ndarray:
    """Total cost of keeping every gap for each of ``ttls_s``, from sorted gaps and prefix sums.

    The same as ``gap_costs(gaps_s, full(T)).sum()`` for each ``T``, in ``O((n + m) log n)``.
    """
    ordered = np.sort(gaps_s)
    prefix = np.concatenate([[0.0], np.cumsum(ordered)])
    reused = np.searchsorted(ordered, ttls_s, side="right")
    missed = len(ordered) - reused
    kept = prefix[reused] + missed * np.where(missed > 0, ttls_s, 0.0)  # no inf * 0
    return prices.idle_price_per_hour * kept / 3600.0 + prices.recreation_cost * missed


def poisson_online_bound(mean_gap_beta: float) -> float:
    """Least expected cost / OPT of any online policy on exponential gaps with mean ``k * beta``.

    Gaps are independent of the past and memoryless, so a TTL ``T`` chosen at the run end costs
    ``r mu + (C - r mu) e^(-T / mu)`` in expectation: best at ``T = inf`` when ``mu < beta``,
    ``T = 0`` when ``mu > beta``, any ``T`` when equal. OPT costs ``r mu (1 - e^(-beta / mu))``.
    """
    k = mean_gap_beta
    return min(k, 1.0) / (k * (1.0 - math.exp(-1.0 / k)))


def ours_ttls(
    trace: traces.Trace,
    prices: Prices,
    policy: str = "auto",
    reaper_cron: str | None = teardown_cadence.REAPER_CRON,
) -> np.ndarray:
    """TTLs of ``teardown.decide`` at each run end, enforced by the reaper (``teardown_ours``)."""
    _actions, expiries = ours.decisions(trace, prices.inputs(policy=policy), policy)
    return ours.ttls(trace, expiries, reaper_cron)


def policy_ttls(
    policy: str, trace: traces.Trace, prices: Prices, *, draws: int = 1, seed: int = 0
) -> np.ndarray:
    """TTLs of ``policy`` for each gap of ``trace``; shape (draws, gaps) for ``randomized-ttl``."""
    n = len(trace.starts) - 1
    if policy == "always-delete":
        return np.zeros(n)
    if policy == "always-keep":
        return np.full(n, math.inf)
    if policy == "break-even-ttl":
        return np.full(n, prices.beta_s)
    if policy == RANDOMIZED:
        return randomized_ttls(prices.beta_s, n, draws, seed)
    if policy == "ours-auto":
        return ours_ttls(trace, prices, "auto")
    if policy == "ours-keep":
        return ours_ttls(trace, prices, "keep")
    raise ValueError(f"unknown policy {policy!r}")


def evaluate(gaps_s: np.ndarray, ttls_s: np.ndarray, prices: Prices) -> dict[str, float]:
    """Cost and operations of TTLs on gaps; 2-D ``ttls_s`` (draws, gaps) is averaged over draws.

    Returns:
        ``cost``, ``opt``, ``ratio`` (cost / OPT), ``worst_gap_ratio`` (max over gaps with
        ``OPT > 0`` of the per-gap cost, mean over draws, / OPT), ``creates`` (re-creations
        after the first run; each follows one delete), ``delayed_runs_pct`` and
        ``p95_delay_min`` (added delay of runs 2..n, minutes).
    """
    recreated = np.atleast_2d(gaps_s > ttls_s)
    kept_h = np.minimum(gaps_s, ttls_s) / 3600.0
    costs = np.atleast_2d(prices.idle_price_per_hour * kept_h + prices.recreation_cost * recreated)
    opt = opt_costs(gaps_s, prices)
    total_opt = float(opt.sum())
    totals = costs.sum(axis=1)
    if total_opt > 0:
        ratio = float(np.mean(totals / total_opt))
    else:
        ratio = 1.0 if float(totals.max()) == 0 else math.inf
    positive = opt > 0
    mean_gap_cost = costs.mean(axis=0)
    worst = float(np.max(mean_gap_cost[positive] / opt[positive])) if positive.any() else 1.0
    creates = recreated.sum(axis=1)
    return {
        "cost": float(totals.mean()),
        "opt": total_opt,
        "ratio": ratio,
        "worst_gap_ratio": worst,
        "creates": float(creates.mean()),
        "delayed_runs_pct": float(100.0 * recreated.mean()),
        "p95_delay_min": float(p95_delay(creates, recreated.shape[1], prices).mean()),
    }


def p95_delay(creates: np.ndarray, n: int, prices: Prices) -> np.ndarray:
    """``np.percentile(delays, 95)`` of ``n`` runs of which ``creates`` wait the provisioning.

    The delays are 0 or the provisioning time, so the sorted delays are ``n - k`` zeros then
    ``k`` waits and the linearly interpolated percentile follows from ``k`` alone (no sort of
    the (draws, gaps) array).
    """
    position = 0.95 * (n - 1)
    low = math.floor(position)
    high = min(low + 1, n - 1)
    first_wait = n - creates  # sorted index of the first wait
    at_low = (low >= first_wait).astype(float)
    at_high = (high >= first_wait).astype(float)
    return prices.provisioning_minutes * (at_low + (position - low) * (at_high - at_low))


def evaluate_opt(gaps_s: np.ndarray, prices: Prices) -> dict[str, float]:
    """The offline optimum's own numbers: it deletes exactly when ``r g > C``."""
    keep = prices.idle_price_per_hour * gaps_s / 3600.0 <= prices.recreation_cost
    return evaluate(gaps_s, np.where(keep, math.inf, 0.0), prices)
