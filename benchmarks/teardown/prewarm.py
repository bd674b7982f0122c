"""Pre-warm before a known cron tick: delete now, re-create the cluster to be ready at the tick.

On a schedule the next run's tick ``t`` is known, so besides keeping (``r`` per idle hour) and
deleting (the next run pays the re-creation ``C``: the provisioning price for the provisioning
time plus the delay penalty of the run waiting it), a rule can delete now and start creating
the cluster ``p + a`` before the tick (``p`` the provisioning time, ``a`` a margin for creation
taking longer than usual): it pays the provisioning price ``P = p * provisioning price`` but no
waiting, plus the idle time from ready (``t - a``) to the run's start ``s``.

*Ours, pre-warm* (``ours-prewarm``): ``teardown.decide`` at every run end as in ``ours``; when the
run carries a cron, the least of the estimates keeping until the tick ``r (t - now)``, deleting
``C`` and, when the tick leaves room (``t - now >= p + a``), pre-warming ``P + r a``. When the
run history shows a share ``q`` of the schedule's runs missed or late (``teardown_expiry``),
keeping is estimated as the decision does (``cost_if_kept``, averaged over those gaps) and a
pre-warm adds ``q (r (a + slack) + C)``: a pre-warmed cluster idles to its expiry and the run,
when it comes, re-creates it. A kept
cluster keeps the decision's expiry (or, when the decision deleted, ``t + slack``); a
pre-warmed one expires at ``t + slack`` (the decision's slack); the reaper deletes either at
its next tick after, and a run that comes later re-creates the cluster (``C``).

Costs of a gap that ends with the start ``s`` (``g = s - now``):

* kept with the keep time ``T``: ``r min(g, T) + C [g > T]`` (``teardown_policies.gap_costs``);
* pre-warmed, ready at ``w = t - a``: ``P + r (s - w)`` when ``w <= s <= R`` (``R`` the reaper's
  deletion), ``P + r (R - w) + C`` when ``s > R``, and ``P + (w - s) * delay / h`` more when the
  run starts before the cluster is ready (``s < w``).

Offline optimum with pre-warm: ``OPT_pw = min(r g, C, P)`` for a gap ``g >= p`` (ready exactly
at the start), ``min(r g, C)`` for a shorter one.

Bound: on a regular cron trace (every run on the tick the decision predicts, ``lambda = s - t``
its start latency, ``0 <= lambda <= slack``), the rule picks the least of the estimates
``e = min(r (t - now), C, P + r a)``; what it pays is at most ``e + r lambda`` (kept:
``r (t - now + lambda)``; pre-warmed: ``P + r (a + lambda)``; deleted: ``C``), while
``OPT_pw >= min(r (t - now), C, P) >= e - r a``.
So each gap costs at most ``OPT_pw + r (a + lambda)``, and over a trace

    cost / OPT_pw <= 1 + r * sum(a + lambda) / sum(OPT_pw)

which is computed per trace from its own latencies. On missed and shifted runs the rule is
measured, with no bound claimed (a missed tick wastes a pre-warm; a delayed start idles it).

Not modelled: the creation time varying (it is ``p`` exactly; ``a`` is what covers it), and a
scheduler that creates the cluster at ``t - p - a`` (the runtime has no such job).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from benchmarks.teardown import ours, policies, traces
from vsp.components.runtime.teardown import cadence as teardown_cadence
from vsp.components.runtime.teardown import decision as teardown_decision
from vsp.components.runtime.teardown import expiry, run_history

POLICY = "ours-prewarm"
FAMILIES = ("cron", "change", "cron-missed", "cron-shifted")
BOUND_FAMILIES = ("cron",)
# The margin before the tick by which the pre-warmed cluster should be ready, seconds.
MARGIN_S = 120.0


def prewarm_cost(prices: policies.Prices) -> float:
    """``P``: creating the cluster with no run waiting for it (USD)."""
    return prices.provisioning_minutes / 60.0 * prices.provisioning_price_per_hour


@dataclasses.dataclass(frozen=True)
class Plan:
    """What ``ours-prewarm`` does after each run end.

    Attributes:
        ttls: Keep seconds of a kept or deleted cluster (0: deleted), ``nan`` when pre-warmed.
        ready: Epoch seconds at which a pre-warmed cluster is ready (``nan`` otherwise).
        reaped: Epoch seconds at which the reaper deletes a pre-warmed cluster (``nan``).
    """

    ttls: np.ndarray
    ready: np.ndarray
    reaped: np.ndarray

    @property
    def prewarmed(self) -> np.ndarray:
        """Which gaps were pre-warmed."""
        return ~np.isnan(self.ready)


def plan(trace: traces.Trace, prices: policies.Prices, margin_s: float = MARGIN_S) -> Plan:
    """What ``ours-prewarm`` does after each run end (see the module docstring).

    With a cron, the least of the estimates keeping until the tick, deleting ``C`` and
    pre-warming (offered when ``t - now >= p + a``); a keep lasts until the decision's own expiry
    when it kept, else until the reaper's tick after ``t + slack``. Without a cron, the decision
    as it is.
    """
    inputs = prices.inputs(policy="auto")
    page = run_history.HISTORY_MAX_JOBS
    starts, ends = trace.starts, trace.ends
    n = len(starts) - 1
    expiries = np.full(n, math.nan)
    ready, reaped = np.full(n, math.nan), np.full(n, math.nan)
    lead = prices.provisioning_minutes * 60.0 + margin_s
    r = prices.idle_price_per_hour / 3600.0
    for i in range(n):
        now = float(ends[i])
        cadence: dict = {
            "now": now,
            "run_start_times": starts[max(0, i + 1 - page) : i + 1].tolist(),
            "run_end_times": ends[max(0, i + 1 - page) : i].tolist(),
        }
        cron = trace.crons[i]
        if cron is not None:
            cadence["schedule_cron"] = cron
        decision = teardown_decision.decide(dataclasses.replace(inputs, **cadence))
        if cron is None or decision.next_run is None:
            if decision.action != "delete":
                expiries[i] = decision.expires_at
            continue
        tick = decision.next_run
        interval = tick - teardown_cadence.tick_at_or_before(cron, tick - 1e-6)
        slack = max(inputs.slack_fraction * interval, inputs.min_slack_seconds)
        sample, missed, late = expiry.history_sample(cron, cadence["run_start_times"], now, slack)
        share = (missed + late) / len(sample) if sample else 0.0
        keep = r * (tick - now) if share == 0 else decision.cost_if_kept
        estimates = {"keep": keep, "delete": prices.recreation_cost}
        if tick - now >= lead:
            wasted = r * (margin_s + slack) + prices.recreation_cost
            estimates["prewarm"] = prewarm_cost(prices) + r * margin_s + share * wasted
        chosen = min(("keep", "prewarm", "delete"), key=lambda a: estimates.get(a, math.inf))
        if chosen == "prewarm":
            ready[i] = tick - margin_s
            reaped[i] = ours.reaped_at(tick + slack)
        elif chosen == "keep":
            kept = decision.action == "keep" and decision.expires_at is not None
            expiries[i] = decision.expires_at if kept else tick + slack
    ttls = ours.ttls(trace, expiries)
    ttls[~np.isnan(ready)] = math.nan
    return Plan(ttls, ready, reaped)


def gap_costs(trace: traces.Trace, planned: Plan, prices: policies.Prices) -> np.ndarray:
    """What each gap costs under ``planned`` (see the module docstring)."""
    gaps = trace.gaps
    warm = planned.prewarmed
    costs = np.zeros(len(gaps))
    costs[~warm] = policies.gap_costs(gaps[~warm], planned.ttls[~warm], prices)
    s = trace.starts[1:][warm]
    w, reap = planned.ready[warm], planned.reaped[warm]
    r = prices.idle_price_per_hour / 3600.0
    early = np.maximum(0.0, w - s)
    waited = early * prices.delay_penalty_per_hour / 3600.0
    missed = s > reap
    idle = np.where(missed, reap - w, np.maximum(0.0, s - w))
    costs[warm] = prewarm_cost(prices) + r * idle + waited + prices.recreation_cost * missed
    return costs


def opt_costs(gaps: np.ndarray, prices: policies.Prices) -> np.ndarray:
    """Offline optimum with pre-warm: ``min(r g, C, P)``, ``P`` only when the creation fits."""
    plain = policies.opt_costs(gaps, prices)
    fits = gaps >= prices.provisioning_minutes * 60.0
    return np.where(fits, np.minimum(plain, prewarm_cost(prices)), plain)


def bound(trace: traces.Trace, prices: policies.Prices, margin_s: float = MARGIN_S) -> float:
    """``1 + r sum(a + lambda) / sum(OPT_pw)``: the ratio ours-prewarm stays under (regular cron).

    ``lambda`` is each start's latency after the tick at or before it.
    """
    crons = trace.crons[1:]
    latency = np.array(
        [
            float(s) - teardown_cadence.tick_at_or_before(c, float(s))
            for s, c in zip(trace.starts[1:], crons, strict=True)
        ]
    )
    extra = prices.idle_price_per_hour / 3600.0 * float(np.sum(margin_s + latency))
    return 1.0 + extra / float(opt_costs(trace.gaps, prices).sum())


def evaluate(trace: traces.Trace, prices: policies.Prices) -> dict[str, float]:
    """Ours with pre-warm on one trace: its cost against both optima, and its bound.

    Returns:
        ``cost``, ``opt`` (without pre-warm), ``opt_prewarm``, ``ratio`` (cost / OPT_pw),
        ``ratio_plain`` (cost / OPT), ``opt_ratio`` (OPT_pw / OPT), ``prewarmed_pct`` (share of
        the gaps pre-warmed), ``bound`` (``nan`` off the regular cron family), and
        ``worst_gap_ratio`` (cost / OPT_pw of the worst gap with ``OPT_pw > 0``).
    """
    planned = plan(trace, prices)
    costs = gap_costs(trace, planned, prices)
    opt_pw = opt_costs(trace.gaps, prices)
    opt = policies.opt_costs(trace.gaps, prices)
    positive = opt_pw > 0
    return {
        "cost": float(costs.sum()),
        "opt": float(opt.sum()),
        "opt_prewarm": float(opt_pw.sum()),
        "ratio": float(costs.sum() / opt_pw.sum()),
        "ratio_plain": float(costs.sum() / opt.sum()),
        "opt_ratio": float(opt_pw.sum() / opt.sum()),
        "prewarmed_pct": float(100.0 * planned.prewarmed.mean()),
        "bound": bound(trace, prices) if trace.family in BOUND_FAMILIES else math.nan,
        "worst_gap_ratio": float(np.max(costs[positive] / opt_pw[positive])),
    }
