"""The keep-or-delete benchmark's simulator: costs, OPT, policies and traces (not the benchmark)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.teardown import cost, ours, policies, traces
from vsp.components.runtime.core import gcp_labels
from vsp.components.runtime.teardown import cadence

BETA_1H = policies.PRICES[1]  # r = 1.0/h, C = 1.0, beta = 1 h


def _gaps(*hours: float) -> np.ndarray:
    return np.array(hours) * 3600.0


def test_prices_give_the_stated_break_even_times():
    assert [p.beta_s for p in policies.PRICES] == pytest.approx([900, 3600, 14400])
    assert [p.recreation_cost for p in policies.PRICES] == pytest.approx([0.25, 1, 4])


def test_opt_per_gap_is_min_of_idle_and_recreation():
    gaps = _gaps(0, 0.25, 1, 3)
    assert policies.opt_costs(gaps, BETA_1H) == pytest.approx([0, 0.25, 1, 1])


@pytest.mark.parametrize(
    ("ttl_h", "expected"),
    [
        (0.0, [0.0, 1.0, 1.0, 1.0]),  # delete: C for every gap but an empty one
        (1.0, [0.0, 0.25, 1.0, 2.0]),  # break-even: r g up to beta, then r beta + C
        (math.inf, [0.0, 0.25, 1.0, 3.0]),  # keep forever: r g
    ],
)
def test_gap_costs_of_fixed_ttls(ttl_h, expected):
    gaps = _gaps(0, 0.25, 1, 3)
    ttls = np.full(4, ttl_h * 3600.0)
    assert policies.gap_costs(gaps, ttls, BETA_1H) == pytest.approx(expected)


def test_evaluate_counts_recreations_and_delay():
    gaps = _gaps(0.25, 3, 3, 0.5)
    metrics = policies.evaluate(gaps, np.full(4, 3600.0), BETA_1H)
    assert metrics["cost"] == pytest.approx(0.25 + 2 + 2 + 0.5)
    assert metrics["opt"] == pytest.approx(0.25 + 1 + 1 + 0.5)
    assert metrics["ratio"] == pytest.approx(4.75 / 2.75)
    assert metrics["worst_gap_ratio"] == pytest.approx(2.0)
    assert metrics["creates"] == 2
    assert metrics["delayed_runs_pct"] == 50.0
    assert metrics["p95_delay_min"] == pytest.approx(20.0)  # provisioning minutes


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("prices", policies.PRICES, ids=lambda p: p.label)
def test_break_even_ttl_is_at_most_twice_opt_on_every_gap(seed, prices):
    rng = np.random.default_rng(seed)
    gaps = np.concatenate(
        [
            rng.exponential(prices.beta_s, 300),
            prices.beta_s * rng.pareto(1.5, 300),
            prices.beta_s * (1 + rng.uniform(0, 1e-3, 50)),
            np.zeros(3),
        ]
    )
    trace = traces.Trace(
        "random",
        "poisson",
        np.cumsum(np.append(0.0, gaps)),
        np.zeros(len(gaps) + 1),
        (None,) * (len(gaps) + 1),
    )
    ttls = policies.policy_ttls("break-even-ttl", trace, prices)
    costs = policies.gap_costs(gaps, ttls, prices)
    opt = policies.opt_costs(gaps, prices)
    assert np.all(costs <= 2.0 * opt + 1e-12)
    assert np.all(costs >= opt - 1e-12)


@pytest.mark.parametrize("cron", ["0 * * * *", "0 */4 * * *", "0 3 * * *", "0 9-18 * * 1-5"])
@pytest.mark.parametrize("prices", policies.PRICES, ids=lambda p: p.label)
def test_ours_equals_opt_on_an_exact_cron_trace(cron, prices):
    trace = traces.cron_trace("exact", cron, 60, seed=0, jitter_s=0.0, zero_durations=True)
    ttls = policies.ours_ttls(trace, prices, "auto")
    costs = policies.gap_costs(trace.gaps, ttls, prices)
    assert costs == pytest.approx(policies.opt_costs(trace.gaps, prices), abs=1e-9)


def test_ours_keep_without_cadence_is_the_break_even_ttl():
    trace = traces.poisson_trace(1.0, BETA_1H.beta_s, seed=3)
    ttls = policies.ours_ttls(trace, BETA_1H, "keep", reaper_cron=None)
    assert ttls == pytest.approx(np.full(len(ttls), BETA_1H.beta_s), abs=1.0)  # label: whole s


def test_the_reaper_deletes_at_its_first_tick_after_the_label():
    trace = traces.poisson_trace(1.0, BETA_1H.beta_s, seed=3)
    ttls = policies.ours_ttls(trace, BETA_1H, "keep")  # cadence.REAPER_CRON
    ends = trace.ends[:-1]
    label = np.floor(ends + BETA_1H.beta_s)
    assert ttls == pytest.approx((np.floor(label / 600) + 1) * 600 - ends, abs=1e-6)
    assert np.all((ttls > BETA_1H.beta_s - 1) & (ttls <= BETA_1H.beta_s + 600))


@pytest.mark.parametrize("cron", ["*/10 * * * *", "5,35 * * * *", "0 * * * *", "*/7 * * * *"])
def test_reaped_at_matches_the_cron_ticks(cron):
    moments = 1.8e9 + np.random.default_rng(2).random(100) * 1e6
    moments[:10] = np.floor(moments[:10] / 600) * 600  # on a tick: the next one deletes
    for moment in moments:
        expected = cadence.ticks_between(cron, math.floor(moment), math.inf, 1)[0]
        assert ours.reaped_at(float(moment), cron) == expected
        label = gcp_labels.parse_label_time(gcp_labels.format_label_time(float(moment)))
        assert ours.label_expiry(float(moment)) == label


def test_fixed_ttl_totals_match_the_per_gap_sum():
    gaps = np.append(np.random.default_rng(4).exponential(BETA_1H.beta_s, 300), [0.0, 0.0])
    ttls = np.concatenate([[0.0, math.inf], np.unique(gaps)])
    totals = policies.fixed_ttl_totals(gaps, ttls, BETA_1H)
    for ttl, total in zip(ttls, totals, strict=True):
        expected = policies.gap_costs(gaps, np.full(len(gaps), ttl), BETA_1H).sum()
        assert total == pytest.approx(expected, rel=1e-12, abs=1e-9)


def test_missed_and_shifted_traces():
    missed = traces.missed_trace("m", "0 * * * *", 1000, 0.2, seed=1)
    ticks = traces.cron_ticks("0 * * * *", 1000)
    assert missed.family == "cron-missed"
    assert 0.17 < 1 - len(missed.starts) / 1000 < 0.23
    # Every run starts 0-60 s after one of the ticks, and some gaps span two ticks or more.
    offsets = missed.starts - ticks[np.searchsorted(ticks, missed.starts) - 1]
    assert np.all((offsets >= 0) & (offsets <= traces.START_JITTER_S))
    assert np.any(np.diff(missed.starts) > 2 * 3600 - 60)
    shifted = traces.shifted_trace("s", "0 * * * *", 1000, seed=1)
    late = shifted.starts - ticks
    assert shifted.family == "cron-shifted" and np.all(shifted.gaps > 0)
    assert np.all((late >= 0) & (late <= 35 * 60))
    assert 0.07 < np.mean(late > 5 * 60) < 0.13  # one in ten delayed 5-30 min


def test_ours_auto_uses_the_cron_of_each_run_across_a_schedule_change():
    trace = traces.change_trace(seed=0)
    ttls = policies.ours_ttls(trace, BETA_1H, "auto")
    first_n = traces.CHANGE_CRONS[0][1]
    assert np.all(ttls[: first_n - 1] > 0)  # hourly, 1 h idle <= beta: keep
    assert ttls[first_n - 1] > 0  # the last hourly run still expects the next hour
    assert np.all(ttls[first_n:] == 0)  # daily, beyond beta: delete


def test_randomized_ttls_lie_in_zero_beta_with_the_expected_ratio():
    gaps = _gaps(0.01, 0.3, 0.9, 1.0, 2.0, 50.0)
    ttls = policies.randomized_ttls(BETA_1H.beta_s, len(gaps), 4000, seed=1)
    assert ttls.shape == (4000, len(gaps))
    assert ttls.min() >= 0 and ttls.max() <= BETA_1H.beta_s
    expected = policies.randomized_expected_costs(gaps, BETA_1H)
    opt = policies.opt_costs(gaps, BETA_1H)
    assert expected / opt == pytest.approx(np.full(len(gaps), math.e / (math.e - 1)))
    sampled = policies.gap_costs(gaps, ttls, BETA_1H).mean(axis=0)
    assert sampled[1:] == pytest.approx(expected[1:], rel=0.05)


def test_best_fixed_ttl_is_no_worse_than_the_simple_ttls():
    gaps = np.random.default_rng(7).exponential(BETA_1H.beta_s, 200)
    best = policies.best_fixed_ttl(gaps, BETA_1H)
    total = policies.gap_costs(gaps, np.full(200, best), BETA_1H).sum()
    for ttl in (0.0, BETA_1H.beta_s, math.inf, 0.5 * BETA_1H.beta_s):
        assert total <= policies.gap_costs(gaps, np.full(200, ttl), BETA_1H).sum()


def test_poisson_online_bound_at_mean_gap_beta_is_e_over_e_minus_one():
    assert policies.poisson_online_bound(1.0) == pytest.approx(math.e / (math.e - 1))
    assert policies.poisson_online_bound(0.5) < policies.poisson_online_bound(1)


def test_traces_do_not_overlap_and_have_the_stated_sizes():
    for trace in traces.all_traces(BETA_1H.beta_s, seed=0):
        assert np.all(trace.gaps >= 0), trace.name
        assert 200 <= len(trace.starts) <= 1000, trace.name
        assert np.all(trace.durations <= traces.MAX_DURATION_S), trace.name
    hourly = traces.cron_trace("hourly", "0 * * * *", 10, seed=0)
    assert np.all(np.diff(hourly.starts) < 3600 + traces.START_JITTER_S)


def test_goals_mark_met_and_not_met_from_the_numbers():
    def row(trace, family, policy, ratio, worst=1.0):
        return {
            "trace": trace,
            "family": family,
            "beta": "1h",
            "policy": policy,
            "ratio": ratio,
            "ratio_max": ratio,
            "worst_gap_ratio": worst,
            "cost": ratio * 10.0,  # one OPT per trace: costs in the ratios' proportions
        }

    rows = [
        row("hourly", "cron", "ours-auto", 1.0),
        row("hourly", "cron", "break-even-ttl", 1.0),
        row("hourly", "cron", "randomized-ttl", 1.58),
        row("poisson-1b", "poisson", "ours-auto", 1.6),
        row("poisson-1b", "poisson", "break-even-ttl", 2.0 + 1e-12, worst=2.0),
        row("poisson-1b", "poisson", "randomized-ttl", 1.61),
        row("poisson-1b", "poisson", "always-delete", 1.62),
        row("poisson-1b", "poisson", "best-fixed-ttl", 1.5),
        {**row("hourly", "cron", "knows-the-law", 1.0), "bound": 0.99},
        row("hourly-missed-10%", "cron-missed", "ours-auto", 1.09),
        {**row("hourly-missed-10%", "cron-missed", "knows-the-law", 1.08), "bound": 1.07},
    ]
    goals = {g["id"]: g for g in cost.goals(rows, ttl_draws=10)}
    assert not goals["1"]["met"] and goals["1"]["where"] == "hourly-missed-10% at beta 1h"
    assert goals["1'"]["met"] and goals["1'"]["measured"] == pytest.approx(1.09 / 1.07)
    assert goals["1'"]["where"] == "hourly-missed-10% at beta 1h"
    assert goals["1'"]["bound_over_1.02"] == ["hourly-missed-10% at beta 1h (1.0700)"]
    assert goals["2"]["met"] and goals["2'"]["met"]
    assert not goals["3"]["met"] and goals["3"]["where"] == "poisson-1b at beta 1h"
    assert not goals["5"]["met"] and goals["5"]["measured"] == 1.6
    assert goals["8"]["met"] and goals["8"]["measured"] == pytest.approx(1.6 / 1.62)
    assert not goals["9"]["met"] and goals["9"]["measured"] == pytest.approx(1.6 / 1.5)
    assert goals["9"]["where"] == "poisson-1b at beta 1h"


@pytest.mark.parametrize("n", [1, 2, 5, 20, 99, 100, 999])
def test_p95_delay_from_counts_is_numpy_percentile(n):
    recreated = np.random.default_rng(n).random((300, n)) < np.linspace(0, 1, 300)[:, None]
    delays = np.where(recreated, BETA_1H.provisioning_minutes, 0.0)
    got = policies.p95_delay(recreated.sum(axis=1), n, BETA_1H)
    assert got == pytest.approx(np.percentile(delays, 95, axis=1), abs=1e-12)


def test_the_command_names_the_seeds_and_the_results_file():
    default = "python -m benchmarks.teardown.cost --seeds 10 --ttl-draws 1000"
    assert cost.command(10, 1000) == default
    assert cost.command(5, 100, first_seed=1000, name="fresh") == (
        "python -m benchmarks.teardown.cost --seeds 5 --first-seed 1000 --ttl-draws 100 "
        "--name fresh"
    )
