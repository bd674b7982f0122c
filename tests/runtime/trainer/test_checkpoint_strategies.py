"""Tests of vsp.components.runtime.trainer.strategies: notice-first vs Young/Daly intervals."""

from __future__ import annotations

import math

import pytest

from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import history, strategies
from vsp.components.runtime.trainer import policy as cp

HOUR = 3600.0


def test_notice_first_lengthens_the_interval_when_the_save_fits() -> None:
    # async save at full scale: 2 s snapshot, 26 s until the manifest, 30 s notice
    costs = strategies.Costs(save_block_s=2.0, save_total_s=26.0, mtbf_s=HOUR, notice_s=30.0)
    assert costs.fits_notice
    interval = strategies.NoticeFirst(p_notice_fail=0.02).interval(costs)
    assert interval == math.sqrt(2 * 2.0 * HOUR / 0.02)
    assert round(interval, 1) == 848.5
    # Young/Daly with the same costs saves about every 2 minutes
    assert round(strategies.YoungDaly().interval(costs), 1) == 118.7
    assert round(strategies.NoticeFirst(p_notice_fail=0.5).interval(costs), 1) == 169.7


def test_notice_first_falls_back_when_the_save_does_not_fit() -> None:
    # fully blocking 30 s save, as long as the notice: Daly's interval
    costs = strategies.Costs(save_block_s=30.0, save_total_s=30.0, mtbf_s=HOUR, notice_s=30.0)
    assert not costs.fits_notice
    assert strategies.NoticeFirst().interval(costs) == strategies.daly_interval(30.0, HOUR)
    young = strategies.NoticeFirst(fallback=strategies.YoungDaly("young"))
    assert young.interval(costs) == math.sqrt(2 * 30.0 * HOUR)


def test_explanations_carry_the_numbers() -> None:
    fits = strategies.Costs(save_block_s=2.0, save_total_s=26.0, mtbf_s=HOUR, notice_s=30.0)
    assert strategies.NoticeFirst().explain(fits) == (
        "notice-first: a save takes 26 s (2 s blocking), mean time between preemptions 3600 s"
        " (prior); the save fits in the 30 s notice (with the 1.1x safety margin it needs), so"
        " periodic saves only"
        " insure against a failed notice save (p = 0.02: Beta prior centred on 0.02 worth 50"
        " preemptions; none in the checkpoint history yet): every 848.5 s of training"
        " = sqrt(2 x 2 s x 3600 s / 0.02)"
    )
    blocking = strategies.Costs(30.0, 30.0, 1800.0, 30.0, preemptions=3)
    assert strategies.NoticeFirst().explain(blocking) == (
        "notice-first: the save does not fit in the 30 s notice (with the 1.1x safety margin it"
        " needs), so"
        " young-daly: a save blocks training 30 s, mean time between preemptions 1800 s"
        " (3 preemptions observed); Daly's interval gives a periodic save every 308.9 s of"
        " training"
    )


def test_policy_uses_notice_first_by_default_and_explains() -> None:
    policy = cp.CheckpointPolicy(mtbf_s=HOUR)
    assert isinstance(policy.strategy, strategies.NoticeFirst)
    policy.record_save(10, 2.0, persisted=False)
    policy.record_persist(26.0)
    assert policy.interval_s == pytest.approx(848.528, abs=1e-3)
    assert "every 848.5 s" in policy.explain()
    policy.record_persist(60.0)  # 26 + 0.3 * (60 - 26) = 36.2 s: no longer fits
    assert policy.save_total_s == pytest.approx(36.2)
    assert policy.interval_s == strategies.daly_interval(2.0, HOUR)
    clamped = cp.CheckpointPolicy(mtbf_s=HOUR, initial_save_cost_s=2.0, max_interval_s=600.0)
    assert clamped.interval_s == 600.0
    assert clamped.explain().endswith(", clamped to 600 s")
    assert cp.CheckpointPolicy(every_steps=7).explain() == "fixed: a periodic save every 7 steps"
    assert cp.CheckpointPolicy(every_seconds=90.0).explain() == (
        "fixed: a periodic save every 90 s of training"
    )


def test_policy_state_keeps_both_costs() -> None:
    policy = cp.CheckpointPolicy(mtbf_s=HOUR)
    policy.record_save(4, 0.03, persisted=False)
    policy.record_persist(0.43)
    restored = cp.CheckpointPolicy(mtbf_s=HOUR)
    restored.load_state_dict(policy.state_dict())
    assert (restored.save_cost_s, restored.save_total_s) == (0.03, 0.43)
    assert restored.interval_s == policy.interval_s
    old = cp.CheckpointPolicy(mtbf_s=HOUR)  # a checkpoint written before save_total_s existed
    old.load_state_dict({"save_cost_s": 5.0, "measured_saves": 2})
    assert (old.save_total_s, old.measured_persists) == (5.0, 2)


def test_from_name() -> None:
    assert isinstance(strategies.from_name("young-daly"), strategies.YoungDaly)
    notice_first = strategies.from_name("notice-first", formula="young", p_notice_fail=0.1)
    assert (notice_first.p_notice_fail, notice_first.fallback.formula) == (0.1, "young")
    with pytest.raises(errors.UserError, match="unknown checkpoint strategy 'often'"):
        strategies.from_name("often")
    for bad in (0.0, 1.5, math.nan):
        with pytest.raises(errors.UserError, match="p_notice_fail"):
            strategies.NoticeFirst(bad)
    with pytest.raises(errors.UserError, match="formula"):
        strategies.YoungDaly("fast")


def _costs(landed: int, failed: int) -> strategies.Costs:
    return strategies.Costs(2.0, 26.0, HOUR, 30.0, notices_landed=landed, notices_failed=failed)


def test_notice_first_learns_p_from_the_notice_outcomes() -> None:
    notice_first = strategies.NoticeFirst()
    # Beta(1, 49): p = (1 + failed) / (50 + landed + failed)
    assert notice_first.p(_costs(0, 0)) == 1 / 50
    assert notice_first.p(_costs(5, 0)) == 1 / 55
    assert notice_first.p(_costs(4, 1)) == 2 / 55
    assert notice_first.p(_costs(0, 50)) == 51 / 100
    assert notice_first.interval(_costs(0, 0)) == math.sqrt(2 * 2.0 * HOUR * 50)
    assert notice_first.interval(_costs(5, 0)) == math.sqrt(2 * 2.0 * HOUR * 55)
    assert notice_first.interval(_costs(4, 1)) == math.sqrt(2 * 2.0 * HOUR * 55 / 2)
    assert round(notice_first.interval(_costs(5, 0)), 2) == 889.94
    assert round(notice_first.interval(_costs(4, 1)), 2) == 629.29
    weak = strategies.NoticeFirst(p_notice_fail=0.1, prior_strength=10)
    assert weak.p(_costs(4, 1)) == (1 + 1) / 15
    assert notice_first.explain(_costs(4, 1)) == (
        "notice-first: a save takes 26 s (2 s blocking), mean time between preemptions 3600 s"
        " (prior); the save fits in the 30 s notice (with the 1.1x safety margin it needs), so"
        " periodic saves only"
        " insure against a failed notice save (p = 0.0364: Beta prior centred on 0.02 worth 50"
        " preemptions, updated by the checkpoint history: notice saves resumed from 4,"
        " preemptions without one 1): every 629.3 s of training = sqrt(2 x 2 s x 3600 s / 0.0364)"
    )
    with pytest.raises(errors.UserError, match="prior_strength"):
        strategies.NoticeFirst(prior_strength=0)


def _rec(event: str, time: float, step: int, reason: str = "") -> history.Record:
    return history.Record(event, time, step, 0.01, reason)


def test_notice_outcomes_from_a_hand_built_history() -> None:
    records = [
        _rec("start", 0.0, 0),
        _rec("save", 10.0, 30, "periodic"),
        _rec("save", 20.0, 55, "notice"),  # landed: the next process resumed from 55
        _rec("resume", 25.0, 55),
        _rec("save", 30.0, 60, "periodic"),
        _rec("resume", 45.0, 60),  # killed without notice: no notice save
        _rec("save", 50.0, 70, "notice"),  # never completed: the next resumed from 60
        _rec("resume", 55.0, 60),
        _rec("save", 60.0, 80, "notice"),  # landed
        _rec("resume", 62.0, 80),
        _rec("save", 70.0, 100, "final"),
    ]
    assert history.notice_outcomes(records) == (2, 2)
    assert history.notice_outcomes(list(reversed(records))) == (2, 2)
    assert history.notice_outcomes(records[:4]) == (1, 0)
    assert history.notice_outcomes([_rec("start", 0.0, 0), _rec("start", 9.0, 0)]) == (0, 1)
    assert history.notice_outcomes([_rec("start", 0.0, 0)]) == (0, 0)
    assert history.notice_outcomes([]) == (0, 0)


def test_policy_feeds_the_notice_outcomes_to_the_strategy() -> None:
    policy = cp.CheckpointPolicy(mtbf_s=HOUR)
    policy.record_save(10, 2.0, persisted=False)
    policy.record_persist(26.0)
    policy.observe_notices(4, 1)
    assert policy.interval_s == math.sqrt(2 * 2.0 * HOUR * 55 / 2)
    assert "notice saves resumed from 4, preemptions without one 1" in policy.explain()
    policy.observe_notices(-3, 0)
    assert (policy.notices_landed, policy.notices_failed) == (0, 0)


def _stepped(step_s: float, landed: int = 0, failed: int = 0, total: float = 26.0):
    return strategies.Costs(
        2.0, total, HOUR, 30.0, notices_landed=landed, notices_failed=failed, step_s=step_s
    )


def test_a_step_longer_than_the_notice_slack_makes_notice_saves_fail() -> None:
    # A 26 s save in a 30 s notice leaves 4 s for the step boundary that sees the notice.
    assert _stepped(0.0).p_late == 0.0  # not measured yet
    assert _stepped(1.0).p_late == 0.0
    assert _stepped(4.0).p_late == 0.0
    assert _stepped(5.0).p_late == 0.2
    assert _stepped(10.0).p_late == 0.6
    assert _stepped(1.0, total=30.0).p_late == 1.0  # no slack at all
    assert _stepped(1.0, total=35.0).p_late == 1.0


def test_notice_first_centres_its_prior_on_the_step_late_notices() -> None:
    notice_first = strategies.NoticeFirst()
    # 0.02 + 0.98 x 0.6: the notice missed, or seen too late for the save
    assert notice_first.prior_p(_stepped(10.0)) == pytest.approx(0.608, abs=1e-15)
    assert notice_first.p(_stepped(10.0)) == pytest.approx(0.608, abs=1e-15)
    assert notice_first.interval(_stepped(10.0)) == pytest.approx(
        math.sqrt(2 * 2.0 * HOUR / 0.608), abs=1e-9
    )
    assert round(notice_first.interval(_stepped(10.0)), 1) == 153.9
    # short steps: exactly the old prior and interval
    assert notice_first.p(_stepped(1.0)) == 0.02
    assert notice_first.interval(_stepped(1.0)) == math.sqrt(2 * 2.0 * HOUR / 0.02)
    # the history still updates it: Beta(0.608 x 50, 0.392 x 50) with 3 landed and 7 failed
    assert notice_first.p(_stepped(10.0, 3, 7)) == pytest.approx((30.4 + 7) / 60, abs=1e-15)
    assert round(notice_first.interval(_stepped(10.0, 3, 7)), 1) == 152.0  # sqrt(14400 / 0.623)
    assert notice_first.explain(_stepped(10.0)) == (
        "notice-first: a save takes 26 s (2 s blocking), mean time between preemptions 3600 s"
        " (prior); the save fits in the 30 s notice (with the 1.1x safety margin it needs), so"
        " periodic saves only"
        " insure against a failed notice save (p = 0.608: Beta prior centred on 0.608 (0.02, or"
        " a 10 s step seeing the notice too late for the save: 0.6) worth 50 preemptions; none"
        " in the checkpoint history yet): every 153.9 s of training = sqrt(2 x 2 s x 3600 s /"
        " 0.608)"
    )
    # a save that does not fit falls back to Young/Daly, whatever the step
    assert notice_first.interval(_stepped(10.0, total=30.0)) == strategies.daly_interval(2.0, HOUR)


def test_policy_measures_the_step_time_and_carries_it_across_restarts() -> None:
    policy = cp.CheckpointPolicy(mtbf_s=HOUR, smoothing=0.5)
    policy.record_save(10, 2.0, persisted=False)
    policy.record_persist(26.0)
    assert policy.step_s == 0.0 and policy.interval_s == math.sqrt(2 * 2.0 * HOUR / 0.02)
    policy.record_step(8.0)
    assert policy.step_s == 8.0  # the first measurement is taken as is
    policy.record_step(12.0)
    assert policy.step_s == 10.0  # then a moving average (smoothing 0.5)
    assert policy.costs().step_s == 10.0
    assert policy.interval_s == pytest.approx(math.sqrt(2 * 2.0 * HOUR / 0.608), abs=1e-9)
    restored = cp.CheckpointPolicy(mtbf_s=HOUR)
    restored.load_state_dict(policy.state_dict())
    assert (restored.step_s, restored.measured_steps) == (10.0, 2)
    assert restored.interval_s == policy.interval_s
    older = cp.CheckpointPolicy(mtbf_s=HOUR)
    older.load_state_dict({"save_cost_s": 2.0, "save_total_s": 26.0})  # saved before step_s
    assert older.step_s == 0.0
