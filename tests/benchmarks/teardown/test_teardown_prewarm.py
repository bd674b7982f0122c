"""The pre-warm policy of the teardown benchmark: its costs, its optimum and its bound."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.teardown import policies, prewarm, traces

BETA_15MIN, BETA_1H = policies.PRICES[0], policies.PRICES[1]  # r = 1.0/h


def test_prewarm_cost_is_the_creation_without_the_wait():
    # 20 min at 1.0/h provisioning; the delay penalty (2.0/h) is not paid: no run waits.
    assert prewarm.prewarm_cost(BETA_1H) == pytest.approx(20 / 60)
    assert BETA_1H.recreation_cost == pytest.approx(1.0)


def test_opt_with_prewarm_takes_it_only_when_the_creation_fits():
    gaps = np.array([600.0, 1200.0, 1800.0, 36000.0])
    # 10 min: too short to re-create in 20 min, kept (1/6); 20 min: kept (1/3) = pre-warm;
    # 30 min: pre-warm 1/3 under keep 1/2; 10 h: pre-warm 1/3 under re-creating 1.0.
    expected = [1 / 6, 1 / 3, 1 / 3, 1 / 3]
    assert prewarm.opt_costs(gaps, BETA_1H) == pytest.approx(expected)


def test_on_a_regular_cron_the_prewarm_meets_its_bound_exactly():
    # Hourly at beta 1 h: about 55 min idle costs 0.92 kept, 1.0 deleted, 0.5 pre-warmed (20 min
    # of creation, started by the reaper's :30 tick, so ready 10 min before the tick). A run
    # that ends after :30 is offered no pre-warm and kept. Each gap costs its OPT_pw plus its
    # own excess, which is the bound's sum: the ratio equals the bound.
    trace = traces.cron_trace("hourly", "0 * * * *", 60, seed=3)
    planned = prewarm.plan(trace, BETA_1H)
    late_end = (trace.ends[:-1] % 3600) > 1800
    assert list(planned.prewarmed) == list(~late_end)
    assert np.all(np.isnan(planned.leads[late_end]))
    assert planned.leads[~late_end] == pytest.approx(np.full((~late_end).sum(), 600.0))
    metrics = prewarm.evaluate(trace, BETA_1H)
    assert metrics["ratio"] == pytest.approx(metrics["bound"], rel=1e-9)
    assert metrics["ratio_plain"] < 0.6  # against the optimum without pre-warm


def test_without_a_delay_penalty_the_prewarm_never_pays():
    # Beta 15 min has no delay penalty: re-creating costs P, and pre-warming P plus the margin.
    trace = traces.cron_trace("every-4h", "0 */4 * * *", 40, seed=1)
    metrics = prewarm.evaluate(trace, BETA_15MIN)
    assert metrics["prewarmed_pct"] == 0.0
    assert metrics["ratio"] == pytest.approx(1.0)


def test_a_missed_tick_costs_the_idle_prewarm_and_the_recreation():
    start = traces.T0
    trace = traces.Trace(
        "t", "cron-missed", np.array([start, start + 7200.0]), np.zeros(2), ("0 * * * *",) * 2
    )
    ready, reaped = start + 3600.0 - 120.0, start + 3600.0 + 1200.0
    planned = prewarm.Plan(np.array([math.nan]), np.array([ready]), np.array([reaped]))
    cost = prewarm.gap_costs(trace, planned, BETA_1H)
    idle_h = (reaped - ready) / 3600.0
    assert cost == pytest.approx([20 / 60 + idle_h + 1.0])


def test_a_run_earlier_than_the_prewarm_waits_for_it():
    start = traces.T0
    trace = traces.Trace("t", "cron", np.array([start, start + 3000.0]), np.zeros(2), (None,) * 2)
    planned = prewarm.Plan(
        np.array([math.nan]), np.array([start + 3300.0]), np.array([start + 4800.0])
    )
    # 5 min early: the run waits them at the delay penalty (2.0/h).
    assert prewarm.gap_costs(trace, planned, BETA_1H) == pytest.approx([20 / 60 + 2.0 / 12])
