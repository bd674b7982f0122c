"""The keep / shrink / delete benchmark's simulator: exact gap costs, the optimum, our choices."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.teardown import shrink, shrink_report, traces

CELL = shrink.CELLS[0]  # 2 x a3-highgpu-8g Spot + login, no delay penalty


def test_the_cell_is_priced_from_the_table():
    inputs = CELL.inputs()
    assert inputs.idle_price_per_hour == pytest.approx(2 * 35.39575 + 0.388472)
    assert inputs.shrunk_price_per_hour == pytest.approx(0.388472)
    # Re-creating (or scaling up) is priced at the same nodes' price, login node included.
    assert inputs.recreation_cost == pytest.approx(20 / 60 * inputs.idle_price_per_hour)
    assert inputs.scale_up_cost == pytest.approx(10 / 60 * inputs.idle_price_per_hour)


def test_gap_costs_follow_each_choice_and_its_expiry():
    inputs = CELL.inputs()
    r_k, r_s = inputs.idle_price_per_hour, inputs.shrunk_price_per_hour
    c_d, c_s = inputs.recreation_cost, inputs.scale_up_cost
    gaps = np.array([1800.0, 7200.0, 1800.0, 7200.0, 100.0])
    actions = ["keep", "keep", "shrink", "shrink", "delete"]
    ttls = np.array([3600.0, 3600.0, 3600.0, 3600.0, 0.0])
    assert shrink.gap_costs(gaps, actions, ttls, inputs) == pytest.approx(
        [r_k / 2, r_k + c_d, r_s / 2 + c_s, r_s + c_d, c_d]
    )
    assert shrink.opt_costs(gaps, inputs) == pytest.approx(
        [min(r_k * g / 3600, r_s * g / 3600 + c_s, c_d) for g in gaps]
    )
    assert shrink.opt_costs(gaps, inputs, shrink=False) == pytest.approx(
        [min(r_k * g / 3600, c_d) for g in gaps]
    )


def test_ours_shrinks_on_an_hourly_cron_and_matches_the_optimum():
    trace = traces.cron_trace("hourly", "0 * * * *", 30, seed=0)
    inputs = CELL.inputs()
    actions, ttls = shrink.ours(trace, inputs)
    assert set(actions) == {"shrink"}
    assert np.all(trace.gaps <= ttls)  # every next run finds the shrunk cluster
    result = shrink.evaluate(trace, inputs, "ours-auto")
    assert result["ratio"] == pytest.approx(1.0, abs=1e-3)
    assert result["share_shrink"] == 1.0 and result["mean_wait_min"] == 10.0
    without = shrink.evaluate(trace, inputs, "ours-auto-2")
    assert without["ratio"] > 1.5  # deleting every hour costs far more than shrinking


def test_goal_and_report_from_a_small_run(monkeypatch):
    monkeypatch.setattr(shrink, "CELLS", (CELL,))
    monkeypatch.setattr(traces, "POISSON_RUNS", 40)
    monkeypatch.setattr(traces, "BURSTY_RUNS", 40)
    monkeypatch.setattr(traces, "ADVERSARIAL_RUNS", 40)
    monkeypatch.setattr(
        traces, "CRON_TRACES", (("hourly", "0 * * * *", 40), ("weekly", "0 3 * * 1", 20))
    )
    monkeypatch.setattr(traces, "CHANGE_CRONS", (("0 * * * *", 20), ("0 3 * * *", 10)))
    monkeypatch.setattr(traces, "MISSED_TRACES", (("hourly-missed", "0 * * * *", 40, 0.2),))
    monkeypatch.setattr(traces, "SHIFTED_TRACES", (("hourly-shifted", "0 * * * *", 40),))
    results = shrink.run(1)
    (goal,) = results["goals"]
    assert goal["id"] == "S1" and math.isfinite(goal["measured"])
    assert goal["met"] == (goal["measured"] <= 1.02 + 1e-9)
    text = shrink_report.markdown(results)
    assert "| hourly |" in text and "**ours auto**" in text
    assert ("| met |" in text) == goal["met"]


def test_the_report_names_the_policies_in_the_benchmark_order():
    assert tuple(shrink_report.SHORT) == shrink.POLICIES
