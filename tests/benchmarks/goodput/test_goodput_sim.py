"""Tests of the goodput simulator in benchmarks/goodput/sim.py (not the benchmark itself)."""

from __future__ import annotations

import dataclasses
import json
import math
import random

import pytest

from benchmarks.goodput import policy as goodput_policy
from benchmarks.goodput import sim

SMALL = sim.Scenario("small", work_s=20 * 3600.0)


@pytest.mark.parametrize("kind", ["young-daly", "ours", "notice-only"])
@pytest.mark.parametrize("block_s,persist_s", [(2.0, 24.0), (30.0, 0.0)])
def test_billed_time_adds_up(kind: str, block_s: float, persist_s: float) -> None:
    sc = dataclasses.replace(SMALL, block_s=block_s, persist_s=persist_s)
    t = sim.simulate(sc, kind, seed=1, max_billed_factor=3.0)
    parts = t.useful + t.restart + t.after_notice + t.save_block + t.lost
    assert parts == pytest.approx(t.billed, rel=1e-9)
    assert t.restart == t.preemptions * sc.restart_s
    assert t.preemptions > 0


def test_without_preemptions_only_periodic_saves_cost() -> None:
    sc = dataclasses.replace(SMALL, mtbf_s=1e12, work_s=3600.0, block_s=2.0, persist_s=24.0)
    t = sim.simulate(sc, "young-daly", seed=0)
    tau = sim.make_policy("young-daly", sc).interval_s  # Daly(2 s, 1e12 s) >> 1 h
    assert tau > 3600.0
    assert (t.preemptions, t.periodic_saves, t.lost, t.finished) == (0, 0, 0.0, True)
    assert t.billed == 3600.0 and t.goodput == 1.0
    every_10_min = dataclasses.replace(sc, mtbf_s=1e12)
    policy = sim.make_policy("young-daly", every_10_min)
    policy.max_interval_s = 600.0
    # 3600 s of work with a 2 s block after every 600 s of training: saves at 600, ..., 3000
    tally = sim.Tally()
    committed, done = sim._attempt(every_10_min, random.Random(0), policy, 0.0, tally)
    assert (committed, done, tally.periodic_saves) == (3600.0, True, 5)
    assert tally.billed == 3600.0 + 5 * 2.0


def test_notice_only_cannot_finish_when_the_save_does_not_fit() -> None:
    sc = dataclasses.replace(SMALL, block_s=30.0, persist_s=0.0, p_no_notice=0.0)
    t = sim.simulate(sc, "notice-only", seed=0, max_billed_factor=2.0)
    assert (t.finished, t.useful, t.goodput) == (False, 0.0, 0.0)
    assert t.notice_saves_failed == t.preemptions


def test_daly_goodput_matches_the_formula() -> None:
    sc = dataclasses.replace(SMALL, block_s=30.0, persist_s=0.0)
    tau = sim.strategies.daly_interval(30.0, 3600.0)
    expected = tau / (3600.0 * math.exp(120.0 / 3600.0) * (math.exp((tau + 30.0) / 3600.0) - 1))
    assert sim.daly_goodput(sc) == pytest.approx(expected, rel=1e-12)
    assert round(sim.daly_goodput(sc), 3) == 0.848


def test_report_marks_the_goal(tmp_path) -> None:
    assert goodput_policy.main(["--out", str(tmp_path), "--seeds", "1", "--work-hours", "5"]) == 0
    text = (tmp_path / "goodput_policy.md").read_text()
    results = json.loads((tmp_path / "goodput_policy.json").read_text())
    goal = results["goals"][0]
    assert goal["met"] == (goal["measured"] >= 0.95)
    assert f"| {goal['measured']:.4f} |  | {'met' if goal['met'] else 'NOT met'} |" in text
    assert results["machine"]["cpus"] >= 1 and results["seeds"] == 1


def test_policies_get_the_project_intervals() -> None:
    async_save = sim.Scenario("async", block_s=2.0, persist_s=24.0)
    assert round(sim.make_policy("ours", async_save).interval_s, 1) == 848.5
    assert round(sim.make_policy("young-daly", async_save).interval_s, 1) == 118.7
    blocking = sim.Scenario("blocking", block_s=30.0, persist_s=0.0)
    daly = sim.strategies.daly_interval(30.0, 3600.0)
    assert sim.make_policy("ours", blocking).interval_s == daly
    assert sim.make_policy("notice-only", blocking) is None
