"""Pre-warm before a known cron tick: delete now, re-create the cluster to be ready at the tick.

On a schedule the next run's tick ``t`` is known, so besides keeping (``r`` per idle hour) and
deleting (the next run pays the re-creation ``C``: the provisioning price for the provisioning
time plus the delay penalty of the run waiting it), a rule can delete now and have the cluster
created again before the tick: it pays the provisioning price ``P = p * provisioning price``
(``p`` the provisioning time) but no waiting, plus the idle time from ready to the run's start.

*Ours, pre-warm* (``ours-prewarm``) is the runtime's rule (``teardown.prewarm``, weighed by
``teardown.decide`` with ``prewarm_margin_minutes`` = ``a`` / 60): the reaper, which runs every
10 minutes, creates the cluster at its last tick ``c`` at or before ``t - a - p``, so it is ready
at ``w = c + p``, a lead ``L = t - w`` of ``a`` to ``a`` + 10 min before the tick; a pre-warm is
offered when ``c`` is after the run's end and estimated ``P + r L`` (plus
``q (r (L + slack) + C)`` when a share ``q`` of the schedule's earlier runs were missed or late:
a pre-warmed cluster then idles to its expiry and the run, when it comes, re-creates it). It is
chosen when cheaper than every other choice. A kept cluster keeps the decision's expiry; a
pre-warmed one expires at ``t + slack``; the reaper deletes either at its next tick after, and a
run that comes later re-creates the cluster (``C``).

Costs of a gap that ends with the start ``s`` (``g = s - now``):

* kept with the keep time ``T``: ``r min(g, T) + C [g > T]`` (``teardown_policies.gap_costs``);
* pre-warmed, ready at ``w``: ``P + r (s - w)`` when ``w <= s <= R`` (``R`` the reaper's
  deletion), ``P + r (R - w) + C`` when ``s > R``, and ``P + (w - s) * delay / h`` more when the
  run starts before the cluster is ready (``s < w``).

Offline optimum with pre-warm: ``OPT_pw = min(r g, C, P)`` for a gap ``g >= p`` (ready exactly
at the start), ``min(r g, C)`` for a shorter one.

Bound: on a regular cron trace (every run on the tick the decision predicts, ``lambda = s - t``
its start latency, ``0 <= lambda <= slack``), where a pre-warm is offered the rule picks the
least of ``e = min(r (t - now), C, P + r L)`` and pays at most ``e + r lambda`` (kept:
``r (t - now + lambda)``; pre-warmed: ``P + r (L + lambda)``; deleted: ``C``), while
``OPT_pw >= min(r (t - now), C, P) >= e - r L``: the gap costs at most
``OPT_pw + r (L + lambda)``. Where none is offered it picks ``min(r (t - now), C)`` and pays at
most that plus ``r lambda``, at most ``min(r (t - now), C) - min(r (t - now), C, P)`` above
``OPT_pw`` besides. Summed over a trace (``delta`` the per-gap excess):

    cost / OPT_pw <= 1 + sum(delta) / sum(OPT_pw)

computed per trace from its own latencies and leads. On missed and shifted runs the rule is
measured, with no bound claimed (a missed tick wastes a pre-warm; a delayed start idles it).

Not modelled: the creation time varying (it is ``p`` exactly; ``a`` is what covers it), and the
reaper's own start latency (a Vertex schedule starts its run within minutes of its tick; ``a``
covers that too).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from benchmarks.teardown import ours, policies, traces
from vsp.components.runtime.teardown import cadence as teardown_cadence
from vsp.components.runtime.teardown import decision as teardown_decision
from vsp.components.runtime.teardown import prewarm as teardown_prewarm
from vsp.components.runtime.teardown import run_history

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
        ticks: The next tick the decision predicted (``nan`` without a cron).
        leads: Seconds from ready to the tick of the pre-warm the decision weighed (chosen or
            not; ``nan`` when none was offered: the tick too close, or no cron).
    """

    ttls: np.ndarray
    ready: np.ndarray
    reaped: np.ndarray
    ticks: np.ndarray | None = None
    leads: np.ndarray | None = None

    @property
    def prewarmed(self) -> np.ndarray:
        """Which gaps were pre-warmed."""
        return ~np.isnan(self.ready)


def plan(trace: traces.Trace, prices: policies.Prices, margin_s: float = MARGIN_S) -> Plan:
    """What ``ours-prewarm`` does after each run end: the runtime's ``teardown.decide`` with
    ``prewarm_margin_minutes`` (``teardown.prewarm``), so the benchmark measures the rule the
    pipeline runs; a pre-warmed cluster is ready when the reaper's creation ends and is reaped
    at the reaper's tick after its expiry.
    """
    inputs = prices.inputs(policy="auto", prewarm_margin_minutes=margin_s / 60.0)
    page = run_history.HISTORY_MAX_JOBS
    starts, ends = trace.starts, trace.ends
    n = len(starts) - 1
    expiries = np.full(n, math.nan)
    ready, reaped = np.full(n, math.nan), np.full(n, math.nan)
    ticks, leads = np.full(n, math.nan), np.full(n, math.nan)
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
        weighed = dataclasses.replace(inputs, **cadence)
        decision = teardown_decision.decide(weighed)
        if decision.prewarm is not None:
            ready[i] = decision.prewarm.ready_at
            reaped[i] = ours.reaped_at(decision.prewarm.expires_at)
        elif decision.action != "delete":
            expiries[i] = decision.expires_at
        if cron is not None and decision.next_run is not None:
            ticks[i] = decision.next_run
            offered = teardown_prewarm.plan(weighed, tick=decision.next_run, now=now, slack=0.0)
            if offered is not None:
                leads[i] = offered.tick - offered.ready_at
    ttls = ours.ttls(trace, expiries)
    ttls[~np.isnan(ready)] = math.nan
    return Plan(ttls, ready, reaped, ticks, leads)


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


def bound(trace: traces.Trace, prices: policies.Prices, planned: Plan) -> float:
    """``1 + sum(delta) / sum(OPT_pw)``: the ratio ours-prewarm stays under (regular cron).

    Per gap, with ``lambda`` its start's latency after the tick at or before it: where a
    pre-warm was offered, ``delta = r (L + lambda)``, ``L`` its lead (ready to tick); where
    none was (the reaper's creation tick not after the run's end), ``delta = r lambda +
    min(r (t - now), C) - min(r (t - now), C, P)`` (``P`` only when the gap fits the creation).
    """
    crons = trace.crons[1:]
    starts = trace.starts[1:]
    pairs = zip(starts, crons, strict=True)
    latency = np.array(
        [float(s) - teardown_cadence.tick_at_or_before(c, float(s)) for s, c in pairs]
    )
    if planned.ticks is None or planned.leads is None:
        raise ValueError("the plan has no ticks and leads: make it with plan()")
    r = prices.idle_price_per_hour / 3600.0
    keep = r * (planned.ticks - trace.ends[:-1])
    best = np.minimum(keep, prices.recreation_cost)
    fits = trace.gaps >= prices.provisioning_minutes * 60.0
    with_p = np.where(fits, np.minimum(best, prewarm_cost(prices)), best)
    offered = ~np.isnan(planned.leads)
    delta = np.where(
        offered, r * (np.nan_to_num(planned.leads) + latency), r * latency + best - with_p
    )
    return 1.0 + float(delta.sum()) / float(opt_costs(trace.gaps, prices).sum())


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
        "bound": bound(trace, prices, planned) if trace.family in BOUND_FAMILIES else math.nan,
        "worst_gap_ratio": float(np.max(costs[positive] / opt_pw[positive])),
    }
