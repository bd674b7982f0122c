"""Keep, shrink or delete: the decision weighs the three with the same ski-rental arithmetic.

Prices of the default cluster (2 x a3-highgpu-8g Spot + 1 x a3-highgpu-8g on demand + a login
n2-standard-8 on demand, from the price table): keeping 159.67/h, shrunk 0.39/h (the login
node), 20 min to re-create and 10 min to scale back up at 159.67/h + 10/h delay penalty.
"""

from __future__ import annotations

import datetime

import pytest

from vsp.components.runtime.teardown import decision as teardown_decision
from vsp.components.runtime.teardown import inputs as teardown_inputs

FULL, LOGIN, PENALTY = 159.669972, 0.388472, 10.0
NOW = datetime.datetime(2026, 1, 5, 10, 0, 30, tzinfo=datetime.timezone.utc).timestamp()


def inputs(**changes) -> teardown_inputs.TeardownInputs:
    values = {
        "idle_price_per_hour": FULL,
        "provisioning_minutes": 20.0,
        "provisioning_price_per_hour": FULL,
        "delay_penalty_per_hour": PENALTY,
        "shrunk_price_per_hour": LOGIN,
        "scale_up_minutes": 10.0,
        "now": NOW,
    }
    values.update(changes)
    return teardown_inputs.TeardownInputs(**values)


def test_the_three_costs_of_a_gap():
    costs = inputs().choice_costs(3600.0)
    assert costs == pytest.approx(
        {
            "keep": FULL,
            "shrink": LOGIN + (FULL + PENALTY) / 6,
            "delete": (FULL + PENALTY) / 3,
        }
    )
    assert inputs().shrink_break_even_seconds == pytest.approx((FULL + PENALTY) / 6 / LOGIN * 3600)


@pytest.mark.parametrize(
    ("cadence", "action"),
    [
        ({"interval_seconds": 300.0}, "keep"),  # 13.31 < 28.67 < 56.56
        ({"schedule_cron": "0 * * * *"}, "shrink"),  # next run in 59.5 min
        ({"schedule_cron": "0 3 * * *"}, "shrink"),  # 17 h: 6.6 + 28.3 = 34.9 < 56.56
        ({"schedule_cron": "0 3 * * 1"}, "delete"),  # a week: 65 + 28.3 > 56.56
    ],
)
def test_the_cheapest_choice_wins(cadence, action):
    decision = teardown_decision.decide(inputs(**cadence))
    assert decision.action == action
    costs = inputs(**cadence).choice_costs(decision.idle_seconds)
    assert decision.cost_if_kept == pytest.approx(costs["keep"])
    assert decision.cost_if_shrunk == pytest.approx(costs["shrink"])
    assert decision.cost_if_deleted == pytest.approx(costs["delete"])
    assert min(costs, key=costs.get) == action
    labels = decision.as_labels()
    assert labels["vsp-teardown"] == action
    assert ("vsp-expires-at" in labels) == (action != "delete")


def test_the_reason_names_all_three_costs():
    decision = teardown_decision.decide(inputs(schedule_cron="0 * * * *"))
    assert decision.reason.startswith("Shrink the cluster: shrinking is cheaper; the next run")
    assert (
        "keeping costs 158.34 USD, shrinking costs 28.66 USD (0.39 USD/h plus a 10 min scale-up), "
        in (decision.reason)
    )
    assert "re-creating costs 56.56" in decision.reason
    metrics = decision.as_metrics()
    assert (metrics["teardown_keep"], metrics["teardown_shrink"]) == (0.0, 1.0)
    assert metrics["teardown_cost_if_shrunk"] == pytest.approx(decision.cost_if_shrunk)


def test_without_a_shrunk_price_shrinking_is_not_weighed():
    decision = teardown_decision.decide(
        inputs(schedule_cron="0 * * * *", shrunk_price_per_hour=None)
    )
    assert decision.action == "delete"
    assert decision.cost_if_shrunk is None and "shrinking" not in decision.reason
    # A shrunk price not below the idle price saves nothing, so it is not weighed either.
    assert not inputs(shrunk_price_per_hour=FULL).can_shrink


def test_ties_go_to_the_choice_the_next_run_waits_least_for():
    # Keep and shrink cost the same at exactly C_s / (r_k - r_s) of idle time.
    tie = (FULL + PENALTY) / 6 / (FULL - LOGIN) * 3600
    assert teardown_decision.decide(inputs(interval_seconds=tie - 1)).action == "keep"
    assert teardown_decision.decide(inputs(interval_seconds=tie + 1)).action == "shrink"
    assert teardown_decision._cheapest({"delete": 1.0, "shrink": 1.0, "keep": 1.0}) == "keep"
    assert teardown_decision._cheapest({"delete": 1.0, "shrink": 1.0}) == "shrink"


def test_policy_shrink_with_an_unknown_next_run_expires_at_its_break_even():
    decision = teardown_decision.decide(inputs(policy="shrink"))
    assert decision.action == "shrink"
    ttl = inputs().shrink_break_even_seconds
    assert decision.expires_at == pytest.approx(NOW + ttl)
    assert "with an expiry after 3 d 1 h idle" in decision.reason  # 72.79 h
    free = teardown_decision.decide(inputs(policy="shrink", shrunk_price_per_hour=0.0))
    assert free.expires_at == NOW + teardown_inputs.UNKNOWN_CADENCE_TTL_SECONDS


def test_history_picks_shrinking_for_the_learned_time():
    # Irregular gaps of 1-3 h between runs of 30 min: shrinking for the longest gap pays one
    # scale-up per run, less than keeping at 159.67/h or re-creating every time.
    starts = [NOW - 30 * 60 - offset for offset in (0, 7200, 18000, 21600, 32400)]
    decision = teardown_decision.decide(inputs(run_start_times=starts))
    assert decision.action == "shrink"
    # Until the reaper's first tick (every 10 minutes) past the longest gap (2 h 30 min from
    # 10:00:30): 12:40, the label 30 s before it.
    learned = "over the last 4 idle gaps, shrinking 2 h 39 min costs least on average"
    assert learned in decision.reason
    assert decision.expires_at == pytest.approx(NOW + 9570 - 30)


def test_validation_names_the_new_fields():
    for field in ("shrunk_price_per_hour", "scale_up_minutes"):
        with pytest.raises(teardown_inputs.SpecValidationError, match=field):
            teardown_decision.decide(inputs(**{field: -1.0}))
    with pytest.raises(teardown_inputs.SpecValidationError, match="auto, delete, keep, shrink"):
        teardown_decision.decide(inputs(policy="sleep"))
