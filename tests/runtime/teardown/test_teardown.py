from __future__ import annotations

import datetime
import math

import pytest

from vsp.components.runtime.core.errors import UserError
from vsp.components.runtime.core.gcp_labels import expired, format_label_time, parse_label_time
from vsp.components.runtime.teardown.decision import decide
from vsp.components.runtime.teardown.inputs import TeardownInputs


def _epoch(*args: int) -> float:
    return datetime.datetime(*args, tzinfo=datetime.timezone.utc).timestamp()


NOW = _epoch(2026, 1, 5, 10, 30)  # a Monday, 10:30 UTC


def _inputs(**kw) -> TeardownInputs:
    """Idle 6/h; re-creation 30 min at 48/h = 24, so break-even is exactly 4 h (no delay cost)."""
    base = dict(
        idle_price_per_hour=6.0,
        provisioning_minutes=30.0,
        provisioning_price_per_hour=48.0,
        delay_penalty_per_hour=0.0,
        now=NOW,
    )
    base.update(kw)
    return TeardownInputs(**base)


def test_hourly_cron_keeps_brief_example():
    inputs = TeardownInputs(
        idle_price_per_hour=6.0,
        provisioning_minutes=20.0,
        provisioning_price_per_hour=50.0,
        delay_penalty_per_hour=0.0,
        schedule_cron="0 * * * *",
        now=_epoch(2026, 1, 5, 10, 0, 1),
    )
    assert inputs.break_even_seconds / 3600 == pytest.approx(2.7778, abs=1e-4)
    d = decide(inputs)
    assert d.action == "keep"
    assert d.idle_seconds == pytest.approx(3599.0)
    assert d.cost_if_deleted == pytest.approx(50 / 3)


def test_hourly_cron_metrics_exact():
    d = decide(_inputs(schedule_cron="0 * * * *"))
    assert d.action == "keep"
    assert d.next_run == _epoch(2026, 1, 5, 11, 0)
    # max(t_K + slack, now + B): t_K = 14:00 (the last tick within B = 4 h of 10:30) + 15 min
    # (25% of 1 h) is before now + B = 14:30, so a run missed or late until 14:30 finds it warm.
    assert d.expires_at == _epoch(2026, 1, 5, 14, 30)
    assert d.as_metrics() == {
        "teardown_keep": 1.0,
        "teardown_shrink": 0.0,
        "teardown_prewarm": 0.0,
        "teardown_cost_if_deleted": 24.0,
        "teardown_break_even_seconds": 14400.0,
        "teardown_next_run": _epoch(2026, 1, 5, 11, 0),
        "teardown_idle_seconds": 1800.0,
        "teardown_cost_if_kept": 3.0,
        "teardown_expires_at": _epoch(2026, 1, 5, 14, 30),
    }
    assert "keeping is cheaper" in d.reason
    assert "is in 30 min:" in d.reason and "3.00" in d.reason and "24.00" in d.reason
    assert "break-even idle time 4 h" in d.reason


def test_weekly_cron_deletes():
    d = decide(_inputs(schedule_cron="0 9 * * 1"))
    assert d.action == "delete"
    assert d.next_run == _epoch(2026, 1, 12, 9, 0)
    assert d.idle_seconds == 7 * 86400 - 5400
    assert d.cost_if_kept == 6.0 * (7 * 24 - 1.5)
    assert d.expires_at is None
    assert d.as_labels() == {"vsp-teardown": "delete"}
    assert d.as_metrics()["teardown_keep"] == 0.0
    assert "teardown_expires_at" not in d.as_metrics()
    assert "deleting is cheaper" in d.reason


def test_delay_penalty_adds_to_recreation_cost():
    d = decide(_inputs(delay_penalty_per_hour=12.0, interval_seconds=3600))
    assert d.cost_if_deleted == 30.0  # 0.5 h x 48 + 0.5 h x 12
    assert d.break_even_seconds == 18000.0


def test_tz_prefixed_cron():
    # 10:30 UTC is 05:30 in New York (EST): next 09:00 EST is 14:00 UTC, 3.5 h away: keep.
    d = decide(_inputs(schedule_cron="TZ=America/New_York 0 9 * * *"))
    assert d.next_run == _epoch(2026, 1, 5, 14, 0)
    assert d.idle_seconds == 3.5 * 3600
    assert d.action == "keep"
    assert d.expires_at == _epoch(2026, 1, 5, 20, 0)  # slack 25% of 24 h
    # The same cron in UTC is 22.5 h away: delete.
    assert decide(_inputs(schedule_cron="0 9 * * *")).action == "delete"
    assert decide(_inputs(schedule_cron="CRON_TZ=Europe/Paris 0 9 * * *")).action == "delete"


def test_interval_seconds():
    d = decide(_inputs(interval_seconds=7200))
    assert (d.action, d.next_run, d.idle_seconds, d.cost_if_kept) == (
        "keep",
        NOW + 7200,
        7200.0,
        12.0,
    )
    # Predicted runs at now + 2 h and now + 4 h (= B): t_K + slack = now + 4 h + 30 min.
    assert d.expires_at == NOW + 14400 + 1800
    assert decide(_inputs(interval_seconds=86400)).action == "delete"


def test_exactly_break_even_keeps():
    assert decide(_inputs(interval_seconds=14400)).action == "keep"
    assert decide(_inputs(interval_seconds=14401)).action == "delete"


def test_min_slack():
    d = decide(_inputs(interval_seconds=1200))
    # 25% of 20 min is 5 min < 10 min floor; t_K = now + 4 h (B), the 12th run predicted.
    assert d.expires_at == NOW + 14400 + 600


def test_cadence_uses_median_gap_and_rolls_forward():
    base = NOW - 50000
    runs = [base + 43200, base, base + 3600, base + 7200]  # gaps 3600, 3600, 36000
    d = decide(_inputs(run_start_times=runs))
    assert d.next_run == NOW + 400  # last + 3600 is in the past; next slot after now
    assert d.idle_seconds == 400.0
    assert "median gap 3600 s of 4 earlier runs" in d.reason
    # The action comes from the observed idle gaps (start gaps less this run's 6800 s): 0, 0
    # and 29200 s; keeping pays only for the long one, so deleting costs least on average.
    assert "over the last 3 idle gaps, deleting at once costs least" in d.reason
    assert d.action == "delete"


def test_cadence_in_future_and_long_gap_deletes():
    runs = [NOW - 2 * 86400, NOW - 86400 + 60]
    d = decide(_inputs(run_start_times=runs))
    assert d.next_run == NOW + 120  # last (now - 86340) + median gap 86460
    # One gap is too few to tell a cadence by (the next run is 2 min away only if it repeats).
    assert d.action == "delete"
    assert d.why == "only 1 earlier idle gap(s), too few to tell the cadence, so deleting"
    runs = [NOW - 7 * 86400 - 3600, NOW - 3600]  # weekly: next run in 7 d - 1 h
    d = decide(_inputs(run_start_times=runs))
    assert (d.action, d.idle_seconds) == ("delete", 7 * 86400 - 3600.0)


def test_cron_preferred_over_interval_and_history():
    d = decide(_inputs(schedule_cron="0 9 * * 1", interval_seconds=60, run_start_times=[0, 60]))
    assert d.action == "delete"


def test_unknown_cadence_auto_deletes():
    for runs in ([], [NOW - 100], [NOW - 100, NOW - 100]):
        d = decide(_inputs(run_start_times=runs))
        assert d.action == "delete"
        assert d.next_run is None and d.idle_seconds is None and d.cost_if_kept is None
        assert "unknown" in d.reason
        assert set(d.as_metrics()) == {
            "teardown_keep",
            "teardown_shrink",
            "teardown_prewarm",
            "teardown_cost_if_deleted",
            "teardown_break_even_seconds",
        }


def test_policy_delete_overrides():
    d = decide(_inputs(policy="delete", schedule_cron="0 * * * *"))
    assert d.action == "delete"
    assert "policy is 'delete'" in d.reason
    assert d.expires_at is None
    assert d.cost_if_kept == 3.0


def test_policy_keep_overrides():
    d = decide(_inputs(policy="keep", schedule_cron="0 9 * * 1"))
    assert d.action == "keep"
    assert "policy is 'keep'" in d.reason
    assert d.as_labels() == {
        "vsp-teardown": "keep",
        "vsp-expires-at": "20260114t030000z",
    }  # Mon 09:00 + 42 h


def test_policy_keep_without_cadence_expires_after_the_break_even_time():
    inputs = _inputs(policy="keep")
    d = decide(inputs)
    assert d.action == "keep"
    assert d.expires_at == pytest.approx(inputs.now + inputs.break_even_seconds)
    assert d.as_labels() == {
        "vsp-teardown": "keep",
        "vsp-expires-at": format_label_time(inputs.now + inputs.break_even_seconds),
    }
    assert "with an expiry after" in d.reason


def test_policy_keep_with_free_idle_and_no_cadence_expires_after_a_day():
    inputs = _inputs(policy="keep", idle_price_per_hour=0.0)
    d = decide(inputs)
    assert d.expires_at == pytest.approx(inputs.now + 24 * 3600)


def test_free_idle_always_keeps():
    d = decide(_inputs(idle_price_per_hour=0.0, schedule_cron="0 9 * * 1"))
    assert d.action == "keep"
    assert math.isinf(d.break_even_seconds)
    assert "break-even idle time never" in d.reason


@pytest.mark.parametrize("cron", ["every hour", "0 * * *", "0 0 * * * *", "61 * * * *", ""])
def test_unparsable_cron_names_field(cron):
    with pytest.raises(UserError) as err:
        decide(_inputs(schedule_cron=cron))
    assert "schedule_cron" in str(err.value)
    assert "Fix:" in str(err.value)


def test_unknown_zone_names_field():
    with pytest.raises(UserError, match="schedule_cron.*time zone.*Fix:"):
        decide(_inputs(schedule_cron="TZ=Mars/Olympus 0 * * * *"))
    # A typo is answered with the zone meant.
    with pytest.raises(UserError, match="Fix: did you mean 'Europe/Paris'\\? Use an IANA zone"):
        decide(_inputs(schedule_cron="TZ=Europe/Pariss 0 3 * * *"))


@pytest.mark.parametrize(
    ("cron", "said"),
    [
        ("0 25 * * *", "has 25 in its hour field, which takes 0-23."),
        ("0 9-25 * * *", "has 25 in its hour field, which takes 0-23."),
        ("61 * * * *", "has 61 in its minute field, which takes 0-59."),
        ("0 0 0 * *", "has 0 in its day-of-month field, which takes 1-31."),
        ("0 0 * 13 *", "has 13 in its month field, which takes 1-12."),
        ("0 3 * * 1,8", "has 8 in its day-of-week field, which takes 0-7."),
    ],
)
def test_a_number_out_of_its_fields_range_is_named_with_the_field(cron, said):
    # It was "is not a valid 5-field cron expression" for a cron of five fields.
    with pytest.raises(UserError) as err:
        decide(_inputs(schedule_cron=cron))
    assert f"schedule_cron = {cron!r}: {said} Fix:" in str(err.value)


@pytest.mark.parametrize(
    "field,value",
    [
        ("idle_price_per_hour", -1.0),
        ("provisioning_minutes", -5.0),
        ("provisioning_price_per_hour", math.nan),
        ("delay_penalty_per_hour", -0.1),
        ("interval_seconds", 0),
        ("policy", "sometimes"),
    ],
)
def test_invalid_inputs_name_field(field, value):
    with pytest.raises(UserError, match=f"{field}.*Fix:"):
        decide(_inputs(**{field: value}))


def test_label_time_format_roundtrip():
    t = _epoch(2026, 1, 5, 11, 15, 7)
    assert format_label_time(t) == "20260105t111507z"
    assert parse_label_time("20260105t111507z") == t


def test_expired():
    labels = decide(_inputs(schedule_cron="0 * * * *")).as_labels()
    assert labels["vsp-expires-at"] == "20260105t143000z"
    assert not expired(labels, now=_epoch(2026, 1, 5, 14, 30))
    assert expired(labels, now=_epoch(2026, 1, 5, 14, 30, 1))
    assert not expired({}, now=NOW)
    assert not expired(None, now=NOW)
    assert not expired({"vsp-teardown": "keep"}, now=NOW)
    assert not expired({"vsp-expires-at": "garbage"}, now=NOW)
    assert expired({"vsp-expires-at": "20000101t000000z"})  # default now
