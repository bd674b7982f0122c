"""Pre-warm before a known cron tick: the rule the teardown decision weighs, and its row in the
report."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.teardown.prewarm_cases import (
    DAILY,
    NOW,
    TICK,
    utc,
    with_margin,
)
from vsp.components.runtime.core import errors, gcp_labels
from vsp.components.runtime.teardown import (
    cadence,
    decision,
    expiry,
    prewarm,
    report,
)
from vsp.components.runtime.teardown import inputs as teardown_inputs

# ----- the rule ------------------------------------------------------------------------------


def test_pre_warm_is_off_unless_a_margin_is_given():
    chosen = decision.decide(DAILY)
    assert (chosen.action, chosen.prewarm) == ("delete", None)
    assert chosen.as_metrics()["teardown_prewarm"] == 0.0
    assert "teardown_prewarm_at" not in chosen.as_metrics()


def test_the_reaper_tick_before_the_latest_start_creates_it_and_the_cost_is_exact():
    chosen = decision.decide(with_margin(5))
    # Latest start 06:00 - 5 min - 20 min = 05:35; the reaper's tick at or before it is 05:30,
    # so the cluster is ready at 05:50, 10 min before the run.
    assert chosen.action == "delete"
    assert chosen.prewarm == prewarm.PrewarmPlan(
        tick=TICK,
        create_at=utc(2026, 12, 5, 5, 30),
        ready_at=utc(2026, 12, 5, 5, 50),
        expires_at=TICK + 6 * 3600,  # the daily cron's slack: a quarter of a day
        cost=pytest.approx(20 / 60 * 100 + 10 / 60 * 100),
    )
    assert chosen.why == "pre-warming before the next run is cheaper"
    assert "re-created by the reaper at 2026-12-05 05:30:00 UTC, ready 10 min before" in (
        chosen.reason
    )
    assert chosen.summary()[0] == (
        "delete: pre-warming before the next run is cheaper (next run in 4 h 30 min; "
        "re-created at 2026-12-05 05:30:00 UTC)"
    )
    assert chosen.summary()[1] == (
        "costs: keep 450.00 USD, re-create 133.33 USD, pre-warm 50.00 USD; idle 100.00 USD/h"
    )
    metrics = chosen.as_metrics()
    assert metrics["teardown_prewarm"] == 1.0
    assert metrics["teardown_prewarm_at"] == utc(2026, 12, 5, 5, 30)
    assert metrics["teardown_cost_if_prewarmed"] == pytest.approx(50.0)
    assert chosen.as_labels() == {gcp_labels.TEARDOWN: "delete"}


def test_a_tick_closer_than_provisioning_and_margin_is_not_pre_warmed():
    chosen = decision.decide(with_margin(5, now=TICK - 24 * 60))  # 24 min < 20 + 5
    assert chosen.prewarm is None


def test_keeping_wins_when_the_gap_is_short():
    hourly = with_margin(
        5, schedule_cron="0 * * * *", now=TICK - 40 * 60, provisioning_price_per_hour=300.0
    )
    chosen = decision.decide(hourly)
    # keep 40 min: 66.67 USD; pre-warm: the 100 USD creation (20 min at 300 USD/h) and more.
    assert chosen.action == "keep" and chosen.prewarm is None
    assert chosen.cost_if_kept == pytest.approx(66.6667, abs=1e-3)


def test_without_a_delay_penalty_re_creating_is_never_beaten():
    chosen = decision.decide(with_margin(5, delay_penalty_per_hour=0.0))
    # re-creating costs P itself (33.33 USD); pre-warming P plus idle time.
    assert chosen.action == "delete" and chosen.prewarm is None


@pytest.mark.parametrize("policy", ["keep", "shrink", "delete"])
def test_a_policy_override_is_never_pre_warmed(policy):
    chosen = decision.decide(with_margin(5, policy=policy, shrunk_price_per_hour=10.0))
    assert chosen.action == policy and chosen.prewarm is None


def test_missed_runs_of_the_schedule_add_their_waste_to_the_estimate():
    # The daily run came on 8 of the last 10 days (two ticks missed).
    days = [d for d in range(25, 31) if d != 27] + [1, 2, 3, 4] + []
    starts = (
        [utc(2026, 11, d, 6, 0) for d in days if d >= 25]
        + [utc(2026, 12, d, 6, 0) for d in (1, 3, 4)]
        + [utc(2026, 12, 5, 0, 0)]
    )
    inputs = with_margin(5, run_start_times=sorted(starts), delay_penalty_per_hour=3000.0)
    slack = 6 * 3600.0
    sample, missed, late = expiry.history_sample(inputs.schedule_cron, sorted(starts), NOW, slack)
    share = (missed + late) / len(sample)
    assert missed >= 2 and 0 < share < 1
    chosen = decision.decide(inputs)
    r = 100 / 3600
    lead = 10 * 60
    expected = 20 / 60 * 100 + r * lead + share * (r * (lead + slack) + inputs.recreation_cost)
    assert chosen.prewarm is not None
    assert chosen.prewarm.cost == pytest.approx(expected)


def test_a_negative_margin_is_refused_before_anything():
    with pytest.raises(errors.SpecValidationError) as caught:
        decision.decide(with_margin(-1))
    assert "prewarm_margin_minutes" in str(caught.value)


@settings(max_examples=150, deadline=None)
@given(
    idle=st.floats(1.0, 500.0),
    provisioning=st.floats(1.0, 60.0),
    penalty=st.floats(0.0, 2000.0),
    margin=st.floats(0.5, 60.0),
    idle_hours=st.floats(0.2, 30.0),
)
def test_a_chosen_pre_warm_is_cheaper_than_every_other_choice_and_ready_in_time(
    idle, provisioning, penalty, margin, idle_hours
):
    inputs = teardown_inputs.TeardownInputs(
        idle_price_per_hour=idle,
        provisioning_minutes=provisioning,
        provisioning_price_per_hour=idle,
        delay_penalty_per_hour=penalty,
        schedule_cron="0 6 * * *",
        now=TICK - idle_hours * 3600.0 if idle_hours < 24 else TICK - 3600.0,
        prewarm_margin_minutes=margin,
    )
    chosen = decision.decide(inputs)
    plan = chosen.prewarm
    if plan is None:
        return
    assert chosen.action == "delete"
    assert plan.cost < min(c for c in (chosen.cost_if_kept, chosen.cost_if_deleted) if c)
    assert inputs.now is not None and plan.create_at > inputs.now
    assert plan.create_at == cadence.tick_at_or_before(cadence.REAPER_CRON, plan.create_at)
    assert plan.ready_at == pytest.approx(plan.create_at + provisioning * 60)
    assert plan.ready_at <= plan.tick - margin * 60 + 1e-6


def test_the_report_shows_the_pre_warm_weighed():
    inputs = with_margin(5)
    page = report.html_section(inputs, decision.decide(inputs))
    assert (
        "<th>pre-warm (deleted now, re-created by the reaper before the next run)</th>"
        "<td>50.00 USD: created at 2026-12-05 05:30:00 UTC, ready 2026-12-05 05:50:00 UTC</td>"
    ) in page
    off = report.html_section(DAILY, decision.decide(DAILY))
    assert "before the next run)</th><td>not weighed</td>" in off
