"""Metrics of a run from its timeline."""

from __future__ import annotations

import pytest

from vsp.components.runtime.training import metrics as training_metrics
from vsp.components.runtime.training.recovery import Attempt, Outcome, Target
from vsp.components.runtime.training.supervisor import RunResult

SPOT, ONDEMAND = Target("spot", True), Target("ondemand", False)


def _result():
    attempts = [
        Attempt("1", SPOT, Outcome.PREEMPTED, requeues=1, nodes=2),
        Attempt("2", ONDEMAND, Outcome.SUCCEEDED, nodes=2),
    ]
    events = [
        (0, "1", "submitted"),
        (100, "1", "running"),
        (1900, "1", "requeued"),  # ran 1800 s, checkpoint at 1600 -> 300 s lost
        (2000, "1", "running"),
        (3800, "1", "preempted"),  # ran 1800 s, no checkpoint inside -> 1800 s lost
        (3900, "2", "submitted"),
        (4000, "2", "running"),
        (7600, "2", "succeeded"),
    ]
    timeline = [{"time": float(t), "job_id": j, "event": e} for t, j, e in events]
    return RunResult(attempts, seconds=7600.0, events=timeline)


def test_metrics_from_a_timeline_with_requeue_preemption_and_fallback():
    metrics = training_metrics.compute(
        _result(),
        prices=training_metrics.Prices(spot_node_hour=1.0, ondemand_node_hour=4.0),
        checkpoint_times=[1600.0, 5000.0],
    )
    assert metrics["preemptions"] == 2
    assert metrics["resubmissions"] == 1
    assert metrics["running_seconds"] == 7200
    assert metrics["spot_node_hours"] == pytest.approx(2.0)  # 3600 s x 2 nodes
    assert metrics["node_hours_billed"] == pytest.approx(4.0)
    assert metrics["work_lost_seconds"] == 2100
    assert metrics["goodput"] == pytest.approx((7200 - 2100) / 7200, abs=1e-4)
    assert metrics["cost"] == pytest.approx(2 * 1.0 + 2 * 4.0)
    assert metrics["estimated_spot_saving"] == pytest.approx(4 * 4.0 - 10.0)


def test_an_open_interval_is_billed_until_now():
    result = _result()
    result.events = result.events[:2]
    metrics = training_metrics.compute(result, now=460.0)
    assert metrics["running_seconds"] == 360
    assert metrics["work_lost_seconds"] == 0
