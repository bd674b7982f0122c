"""``teardown_expiry``: an expiry bounded by the break-even time, and misses learned from runs."""

from __future__ import annotations

import datetime

import pytest

from vsp.components.runtime.teardown import cadence, expiry, history
from vsp.components.runtime.teardown.decision import decide
from vsp.components.runtime.teardown.inputs import TeardownInputs


def _epoch(*args: int) -> float:
    return datetime.datetime(*args, tzinfo=datetime.timezone.utc).timestamp()


def _inputs(**kw) -> TeardownInputs:
    """Idle 6/h, re-creation 24: break-even B = 4 h."""
    base = dict(
        idle_price_per_hour=6.0,
        provisioning_minutes=30.0,
        provisioning_price_per_hour=48.0,
        delay_penalty_per_hour=0.0,
    )
    base.update(kw)
    return TeardownInputs(**base)


def test_ticks_between_and_before():
    now = _epoch(2026, 1, 5, 10, 30)
    hours = cadence.ticks_between("0 * * * *", now, now + 4 * 3600, 100)
    assert hours == [_epoch(2026, 1, 5, h) for h in (11, 12, 13, 14)]
    assert cadence.ticks_between("0 * * * *", now, now + 4 * 3600, 2) == hours[:2]
    # The first tick is listed even beyond ``until``.
    assert cadence.ticks_between("0 9 * * 1", now, now + 60, 5) == [_epoch(2026, 1, 12, 9)]
    assert cadence.tick_at_or_before("0 9 * * 1", now) == _epoch(2026, 1, 5, 9)
    assert cadence.tick_at_or_before("0 * * * *", _epoch(2026, 1, 5, 10)) == _epoch(2026, 1, 5, 10)
    assert cadence.tick_at_or_before("0 9 * * 1", _epoch(2026, 1, 5, 8)) == _epoch(2025, 12, 29, 9)


def test_average_costs_match_the_per_gap_sum():
    gaps = [600.0, 3600.0, 7200.0, 0.0, 20000.0]
    ttls = [0.0, 600.0, 5000.0, 7200.0, 1e9]
    got = history.average_costs(gaps, ttls, 6.0, 24.0, reuse_cost=1.0)
    for ttl, value in zip(ttls, got, strict=True):
        costs = [6.0 * min(g, ttl) / 3600 + (1.0 if g <= ttl else 24.0) for g in gaps]
        assert value == pytest.approx(sum(costs) / len(gaps))


def test_history_sample_counts_a_missed_and_a_late_run():
    # Hourly: 06:00, 07:00, (08:00 missed) 09:00, 10:20 (20 min late, the current run).
    starts = [_epoch(2026, 1, 5, h, m) for h, m in ((6, 0), (7, 0), (9, 0), (10, 20))]
    now = _epoch(2026, 1, 5, 10, 25)
    gaps, missed, late = expiry.history_sample("0 * * * *", starts, now, slack=900.0)
    # Replayed from the current run's tick (10:00): next tick 11:00, 12:00 after a miss, and
    # 11:20 for a start 20 min late.
    assert gaps == [35 * 60.0, 95 * 60.0, 55 * 60.0]
    assert (missed, late) == (1, 1)


def _every_4h_history(end: float, miss_every: int | None) -> list[float]:
    ticks = [end - 4 * 3600 * k for k in range(60)][::-1]
    if miss_every:
        ticks = [t for i, t in enumerate(ticks) if i % miss_every or t == end]
    return ticks


def test_frequent_misses_make_deleting_cheaper_than_keeping_through_them():
    # Every 4 h with B = 4 h: the next tick is 3 h 55 min away (23.50 < 24 to keep). With one
    # run in five missed, keeping pays 23.50 + the keep past the missed tick + 24 a fifth of
    # the time, more than deleting (24) every time.
    start = _epoch(2026, 1, 5, 8)
    now = start + 300
    cron = "0 */4 * * *"
    d = decide(_inputs(schedule_cron=cron, now=now, run_start_times=_every_4h_history(start, 5)))
    assert d.action == "delete"
    assert d.expires_at is None
    assert "over the last 47 runs of the schedule, 11 came one or more ticks late" in d.reason
    assert d.cost_if_kept > d.cost_if_deleted == 24.0
    # With no run missed the same schedule keeps, until max(12:00 + 1 h slack, now + 4 h).
    kept = decide(_inputs(schedule_cron=cron, now=now, run_start_times=_every_4h_history(start, 0)))
    assert kept.action == "keep"
    assert kept.cost_if_kept == pytest.approx(6.0 * (4 * 3600 - 300) / 3600)
    assert kept.expires_at == _epoch(2026, 1, 5, 13)
    assert "It expires at max(t_K + slack, now + B)" in kept.reason


def test_a_missed_run_within_the_break_even_time_finds_the_cluster_warm():
    # Hourly at B = 4 h, the 11:00 and 12:00 runs missed: the 13:00 run still reuses the cluster,
    # where an expiry at the next tick + slack (11:15) would have paid 24 to re-create it.
    now = _epoch(2026, 1, 5, 10, 5)
    d = decide(_inputs(schedule_cron="0 * * * *", now=now))
    assert d.action == "keep"
    assert d.expires_at == _epoch(2026, 1, 5, 14, 15)  # max(14:00 + 15 min, 10:05 + 4 h)
    assert d.expires_at > _epoch(2026, 1, 5, 13)
