"""``teardown_history``: the keep time that would have cost least over observed idle gaps."""

from __future__ import annotations

import pytest

from vsp.components.runtime.teardown import decision as teardown_decision
from vsp.components.runtime.teardown import history
from vsp.components.runtime.teardown import inputs as teardown_inputs


def test_idle_gaps_subtract_this_runs_duration_when_it_is_listed():
    # Runs started at 0, 3600, 7200; this one (started 7200) ends at 7500: 300 s long.
    assert history.idle_gaps([0, 3600, 7200], now=7500) == [3300.0, 3300.0]


def test_idle_gaps_keep_start_gaps_when_this_run_is_not_listed():
    assert history.idle_gaps([0, 3600, 7200], now=20000) == [3600.0, 3600.0]
    assert history.idle_gaps([5.0], now=10) == []


@pytest.mark.parametrize(
    ("gaps", "ttl"),
    [
        ([600.0, 600.0, 600.0], 600.0),  # always back in 10 min: keep 10 min
        ([36000.0, 36000.0], 0.0),  # always 10 h away: delete
        ([600.0, 600.0, 36000.0], 600.0),  # mostly short: keep for the short ones only
        ([600.0, 36000.0, 36000.0], 600.0),  # a short keep still pays off for one in three
        ([2700.0, 36000.0, 36000.0], 0.0),  # 45 min idle for one in three does not: delete
    ],
)
def test_best_ttl_picks_the_cheapest_keep_time(gaps, ttl):
    # r = 1/h, C = 1 (break-even 1 h).
    chosen, average = history.best_ttl(gaps, 1.0, 1.0)
    assert chosen == ttl
    expected = sum(min(g, ttl) / 3600 + (1.0 if g > ttl else 0.0) for g in gaps) / len(gaps)
    assert average == pytest.approx(expected)


def test_best_ttl_is_never_worse_than_delete_or_keep_forever():
    gaps = [100.0, 5000.0, 200.0, 90000.0, 3000.0, 7000.0]
    chosen, average = history.best_ttl(gaps, 2.0, 3.0)
    delete = 3.0
    forever = sum(2.0 * g / 3600 for g in gaps) / len(gaps)
    assert average <= min(delete, forever)
    assert chosen in {0.0, *gaps}


def test_decide_with_history_keeps_for_the_learned_time():
    now = 1_800_000_000.0
    starts = [now - 4 * 3600 - 300, now - 3 * 3600 - 300, now - 2 * 3600 - 300, now - 3600 - 300]
    starts.append(now - 300)  # this run, 5 min long; earlier idle gaps are 55 min
    inputs = teardown_inputs.TeardownInputs(
        idle_price_per_hour=1.0,
        provisioning_minutes=20.0,
        provisioning_price_per_hour=1.0,
        delay_penalty_per_hour=10.0,
        run_start_times=starts,
        now=now,
    )
    decision = teardown_decision.decide(inputs)
    assert decision.action == "keep"
    # The reaper (every 10 minutes, from now) deletes at its first tick after the expiry: the
    # tick an hour on is the first to cover a 55 min gap; the label expires 30 s before it.
    assert decision.expires_at == pytest.approx(now + 3570)
    assert "over the last 4 idle gaps, keeping 59 min 30 s costs least" in decision.reason


def test_a_keep_the_reaper_would_stretch_past_its_worth_is_a_delete():
    # Idle gaps alternate 6 min and 2 h; re-creating costs 0.25 USD, idle 1 USD/h. Kept for
    # 6 min, the average would be 0.05 + (0.1 + 0.25) / 2 = 0.225 USD a gap, under 0.25; but
    # the reaper runs every 10 minutes, so a 6 min keep lasts 10 min: 0.05 + (0.167 + 0.25) / 2
    # = 0.258 USD, and deleting at once is cheaper.
    now = 1_800_000_000.0  # a reaper tick
    gaps = [360.0, 7200.0, 360.0, 7200.0]
    starts = [now - 300.0]
    for gap in reversed(gaps):
        starts.insert(0, starts[0] - gap - 300.0)
    inputs = teardown_inputs.TeardownInputs(
        idle_price_per_hour=1.0,
        provisioning_minutes=10.0,
        provisioning_price_per_hour=1.5,
        delay_penalty_per_hour=0.0,
        run_start_times=starts,
        now=now,
    )
    assert inputs.recreation_cost == pytest.approx(0.25)
    assert history.idle_gaps(starts, now) == pytest.approx(gaps)
    decision = teardown_decision.decide(inputs)
    assert decision.action == "delete", decision.reason
    kept_6_min, kept_10_min = history.average_costs(gaps, [360.0, 600.0], 1.0, 0.25)
    assert (kept_6_min, kept_10_min) == pytest.approx((0.225, 0.05 + (600 / 3600 + 0.25) / 2))
