"""The online lower bound of the keep-or-delete benchmark (``benchmarks.teardown.law``)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.teardown import law, policies, traces

BETA_1H = policies.PRICES[1]  # r = 1.0/h, C = 1.0
BETA_4H = policies.PRICES[2]  # r = 1.0/h, C = 4.0


def _missed(name: str, seed: int = 0) -> traces.Trace:
    _name, cron, ticks, share = next(t for t in traces.MISSED_TRACES if t[0] == name)
    return traces.missed_trace(name, cron, ticks, share, seed)


def test_atoms_weigh_the_next_tick_by_the_share_of_runs_that_come():
    trace = _missed("hourly-missed-20%")
    gaps, weights = law.gap_atoms(trace)
    assert gaps.shape == weights.shape == (len(trace.starts) - 1, 40 * 60)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    # The first 60 atoms are the next tick's 1 s jitter steps, 80% of the weight.
    np.testing.assert_allclose(weights[:, :60].sum(axis=1), 0.8)
    np.testing.assert_allclose(np.diff(gaps[:, :60], axis=1), 1.0)
    # The next ones are an hour later.
    np.testing.assert_allclose(gaps[:, 60] - gaps[:, 0], 3600.0)


def test_atoms_before_the_run_end_weigh_nothing_and_keep_times_are_never_negative():
    # A run 31 min 40 s late that lasts 29 min 10 s ends 50 s after the next tick.
    hour = 3600.0
    tick = traces.T0 + hour
    starts = np.array([tick + 1900.0, tick + hour + 100.0])
    trace = traces.Trace(
        "hourly-shifted", "cron-shifted", starts, np.array([1750.0, 60.0]), ("0 * * * *",) * 2
    )
    gaps, weights = law.gap_atoms(trace)
    early = gaps <= 0
    assert early.sum() == 10  # the first 10 jitter atoms (5 s steps) of the next tick
    assert (weights[early] == 0).all()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    ttls, _expected = law.best_ttls(gaps, weights, BETA_1H)
    assert (ttls >= 0).all()


def test_the_best_keep_time_is_the_least_expected_cost_over_every_keep_time():
    # Two gaps with a three-atom law each; compare with a brute force over a fine grid.
    gaps = np.array([[600.0, 3000.0, 9000.0], [-30.0, 1200.0, 4000.0]])
    weights = np.array([[0.5, 0.3, 0.2], [0.0, 0.6, 0.4]])
    ttls, expected = law.best_ttls(gaps, weights, BETA_1H)
    grid = np.concatenate([np.arange(0.0, 12000.0, 10.0), [np.inf]])
    for row in range(2):
        brute = [
            float(np.sum(weights[row] * policies.gap_costs(gaps[row], t, BETA_1H))) for t in grid
        ]
        assert expected[row] == pytest.approx(min(brute), abs=1e-12)
        chosen = policies.gap_costs(gaps[row], ttls[row], BETA_1H)
        assert float(np.sum(weights[row] * chosen)) == pytest.approx(expected[row], abs=1e-12)
    # Row 0: keeping 600 s costs 600/3600 + 0.5 (half the gaps re-create); 3000 s costs 0.7.
    assert ttls[0] == 600.0 and expected[0] == pytest.approx(600.0 / 3600.0 + 0.5)


@pytest.mark.parametrize(
    ("name", "prices"),
    [("hourly-missed-10%", BETA_1H), ("hourly-missed-20%", BETA_1H),
     ("every-4h-missed-10%", BETA_4H)],
)  # fmt: skip
def test_no_online_rule_is_within_1_02x_of_the_optimum_on_these_traces(name, prices):
    """An independent, cruder bound says the same as the atoms.

    A rule keeping ``T`` after a run that ends ``o`` before the next tick pays at least ``C``
    when ``T < o``; otherwise ``r o`` when the tick's run comes and, when it is missed (share
    ``p``), at least ``r o + min(C, r * interval)``. The optimum pays at most
    ``min(r (o + 60 s), C)`` and ``C``.
    """
    trace = _missed(name)
    share = law.missed_share(trace)
    cron = trace.crons[0]
    ticks = traces.cron_ticks(cron, 3000)
    own = np.searchsorted(ticks, trace.starts[:-1], side="right") - 1
    before = ticks[own + 1] - trace.ends[:-1]
    interval = ticks[own + 2] - ticks[own + 1]
    r, c = prices.idle_price_per_hour / 3600.0, prices.recreation_cost
    least = np.minimum(c, r * before + share * np.minimum(c, r * interval))
    opt_at_most = (1 - share) * np.minimum(r * (before + 60.0), c) + share * c
    crude = least.sum() / opt_at_most.sum()
    bound = law.evaluate(trace, prices)["bound"]
    assert 1.02 < crude <= bound + 1e-9


def test_the_bound_is_one_where_keeping_through_the_tick_always_pays():
    trace = traces.cron_trace("hourly", "0 * * * *", 300, seed=1)
    metrics = law.evaluate(trace, BETA_1H)
    assert metrics["bound"] == pytest.approx(1.0, abs=1e-3)
    assert 1.0 <= metrics["ratio"] < 1.01


def test_families_without_a_law_are_refused():
    trace = traces.poisson_trace(1.0, BETA_1H.beta_s, seed=0)
    with pytest.raises(ValueError, match="no law for the poisson family"):
        law.gap_atoms(trace)
