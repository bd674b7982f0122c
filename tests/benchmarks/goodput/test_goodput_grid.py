"""The goodput grid: its bound, its goals, and the policy fed what the trainer reads."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.goodput import grid, sim


def _scenario(**changes) -> sim.Scenario:
    return dataclasses.replace(sim.Scenario("small", work_s=20 * 3600.0), **changes)


def test_the_bound_is_at_least_every_fixed_interval_and_notice_only_on_the_same_traces():
    scenario = _scenario(p_no_notice=0.25, step_s=10.0)
    cell = grid.measure_cell(scenario, seeds=2)
    for seed, bound in enumerate(cell["bound_per_seed"]):
        for interval in (None, 120.0, 600.0, 3600.0):
            policy = None if interval is None else grid.FixedInterval(interval)
            assert sim.simulate_with(scenario, policy, seed).goodput <= bound + 1e-12


def test_the_policy_learns_the_notice_failures_it_sees():
    # Half the preemptions come without a notice: the policy, told so after each attempt,
    # saves more often than its prior would have it.
    scenario = _scenario(p_no_notice=0.5)
    policy = sim.make_policy("ours", scenario)
    prior = policy.interval_s
    sim.simulate_with(scenario, policy, seed=0)
    assert policy.notices_failed > 0 and policy.notices_landed > 0
    assert policy.interval_s < prior / 2


def test_the_policy_is_told_the_step_time_and_expects_step_late_notices():
    # A 10 s step makes a 26 s save miss a 30 s notice 60% of the time (the notice is seen up
    # to a step late, and only 4 s of slack remain): the prior is centred there from the start.
    policy = sim.make_policy("ours", _scenario(step_s=10.0))
    assert policy.step_s == 10.0
    p = 0.02 + 0.98 * 0.6
    assert policy.strategy.p(policy.costs()) == pytest.approx(p)
    assert policy.interval_s == pytest.approx((2 * 2.0 * 3600.0 / p) ** 0.5)
    assert sim.make_policy("ours", _scenario(step_s=1.0)).interval_s == pytest.approx(
        (2 * 2.0 * 3600.0 / 0.02) ** 0.5
    )


def test_goals_name_the_worst_cell():
    def row(restart, unannounced, step, save, ours, daly, bound):
        name = f"{restart}-{unannounced}-{step}-{save}"
        return dict(
            nodes=1, restart_s=restart, unannounced=unannounced, step_s=step, notice_save=save,
            name=name, ours=ours, young_daly=daly, bound=bound,
        )  # fmt: skip

    rows = [
        row(120.0, 0.0, 1.0, "fits", 0.96, 0.94, 0.962),
        row(300.0, 0.25, 10.0, "fits", 0.88, 0.881, 0.95),
    ]
    goals = {g["id"]: g for g in grid.goals(rows)}
    assert not goals["grid-bound"]["met"]
    assert goals["grid-bound"]["measured"] == pytest.approx(0.88 / 0.95)
    assert goals["grid-bound"]["where"] == "300.0-0.25-10.0-fits"
    assert not goals["grid-daly"]["met"] and goals["grid-daly"]["measured"] == pytest.approx(-0.001)
    assert goals["grid-headline"]["met"] and goals["grid-headline"]["measured"] == 0.96


def test_other_seeds_are_other_traces_and_the_daly_goal_shows_each_seed():
    scenario = _scenario(step_s=10.0)
    cell = grid.measure_cell(scenario, seeds=1, first_seed=3)
    assert cell["ours_per_seed"] == [sim.simulate(scenario, "ours", 3).goodput]
    assert cell["young_daly_per_seed"] == [sim.simulate(scenario, "young-daly", 3).goodput]
    assert cell["ours_per_seed"] != grid.measure_cell(scenario, seeds=1)["ours_per_seed"]
    row = dict(
        nodes=1, restart_s=120.0, unannounced=0.0, step_s=1.0, notice_save="fits", name="h",
        ours=0.951, young_daly=0.95, bound=0.96, ours_per_seed=[0.952, 0.95],
        young_daly_per_seed=[0.95, 0.9505],
    )  # fmt: skip
    daly = {g["id"]: g for g in grid.goals([row], "seeds 5 to 6")}["grid-daly"]
    assert daly["where"] == "h; per seed +0.00200, -0.00050"
    assert daly["goal"].endswith("(ours minus Young/Daly, worst cell, seeds 5 to 6)")
    tie = {**row, "name": "t", "step_s": 10.0, "ours": 0.9, "young_daly": 0.9}
    tie["ours_per_seed"] = [0.9]
    tie["young_daly_per_seed"] = [0.9]
    daly = {g["id"]: g for g in grid.goals([row, tie])}["grid-daly"]
    assert (daly["measured"], daly["met"]) == (0.0, True)
    assert daly["where"] == (
        "t: a tie; closest where they differ: h, +0.00100; per seed +0.00200, -0.00050"
    )
