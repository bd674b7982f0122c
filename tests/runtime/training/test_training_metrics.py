"""Metrics of a run from its timeline and the trainer's checkpoint history."""

from __future__ import annotations

import pytest

from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.trainer.history import Record
from vsp.components.runtime.training import metrics as training_metrics
from vsp.components.runtime.training.backends.interface import RunResult
from vsp.components.runtime.training.recovery import Attempt, Target

SPOT, ONDEMAND = Target("spot", True), Target("ondemand", False)


def _result():
    attempts = [
        Attempt("1", SPOT, Outcome.PREEMPTED, requeues=1, nodes=2),
        Attempt("2", ONDEMAND, Outcome.SUCCEEDED, nodes=2),
    ]
    events = [
        (0, "1", "submitted"),
        (100, "1", "running"),
        (1900, "1", "requeued"),
        (2000, "1", "running"),
        (3800, "1", "preempted"),
        (3900, "2", "submitted"),
        (4000, "2", "running"),
        (7600, "2", "succeeded"),
    ]
    timeline = [{"time": float(t), "job_id": j, "event": e} for t, j, e in events]
    return RunResult(attempts, seconds=7600.0, events=timeline)


HISTORY = [
    Record("start", 150.0, 0, 0.0),  # 50 s of start-up
    Record("save", 1000.0, 100, 10.0, "periodic"),
    Record("save", 1600.0, 160, 20.0, "periodic"),  # resumed from: 1620..1900 lost (280 s)
    Record("resume", 2100.0, 160, 30.0),  # saves nothing before its preemption: 1670 s lost
    Record("resume", 4060.0, 160, 40.0),
    Record("save", 5000.0, 300, 20.0, "periodic"),
    Record("save", 7500.0, 500, 30.0, "final"),  # 100 s to write the model and exit
]


def test_metrics_from_a_timeline_with_requeue_preemption_and_fallback():
    metrics = training_metrics.compute(
        _result(),
        prices=training_metrics.Prices(spot_node_hour=1.0, ondemand_node_hour=4.0),
        history=HISTORY,
    )
    assert metrics["preemptions"] == 2
    assert metrics["resubmissions"] == 1
    assert metrics["running_seconds"] == 7200
    assert metrics["billed_node_seconds"] == 14400
    assert metrics["spot_node_hours"] == pytest.approx(2.0)  # 3600 s x 2 nodes
    assert metrics["node_hours_billed"] == pytest.approx(4.0)
    figures = {k: v for k, v in metrics.items() if k.endswith("_node_seconds")}
    assert figures == {
        "billed_node_seconds": 14400,
        "useful_node_seconds": 2 * (1600 - 150 - 10 + 7500 - 4100 - 20),
        "startup_node_seconds": 2 * (50 + 100 + 60),
        "reload_node_seconds": 2 * (30 + 40),
        "periodic_save_node_seconds": 2 * (10 + 20 + 20),
        "notice_window_node_seconds": 0,
        "finish_node_seconds": 2 * 100,
        "work_lost_node_seconds": 2 * (280 + 1670),
    }
    assert sum(figures.values()) == 2 * figures["billed_node_seconds"]
    assert metrics["goodput"] == round(9640 / 14400, 4)
    assert metrics["cost"] == pytest.approx(2 * 1.0 + 2 * 4.0)
    assert metrics["estimated_spot_saving"] == pytest.approx(4 * 4.0 - 10.0)


def _requeued_once():
    attempt = Attempt("1", SPOT, Outcome.SUCCEEDED, requeues=1)
    events = [(0, "running"), (100, "requeued"), (110, "running"), (200, "succeeded")]
    timeline = [{"time": float(t), "job_id": "1", "event": e} for t, e in events]
    return RunResult([attempt], 200.0, events=timeline)


NOTICE_RUN = [
    Record("start", 5.0, 0, 1.0),
    Record("save", 30.0, 25, 2.0, "periodic"),
    Record("save", 90.0, 80, 3.0, "notice"),
    Record("resume", 112.0, 80, 2.0),
    Record("save", 190.0, 200, 1.0, "final"),
]


def test_the_billed_notice_window_after_a_notice_save_is_its_own_figure_not_work_lost():
    metrics = training_metrics.compute(_requeued_once(), history=NOTICE_RUN)
    assert metrics["notice_window_node_seconds"] == 10  # 90 (notice save began) .. 100
    assert metrics["work_lost_node_seconds"] == 0
    assert metrics["useful_node_seconds"] == (90 - 6 - 2) + (190 - 114)
    assert metrics["periodic_save_node_seconds"] == 2
    assert metrics["startup_node_seconds"] == 5 + 2
    assert metrics["reload_node_seconds"] == 1 + 2
    assert metrics["finish_node_seconds"] == 10
    assert metrics["goodput"] == round(158 / 190, 4)


def test_a_notice_save_the_next_process_did_not_resume_from_is_work_lost():
    torn = [r if r.event != "resume" else Record("resume", 112.0, 25, 2.0) for r in NOTICE_RUN]
    metrics = training_metrics.compute(_requeued_once(), history=torn)
    assert metrics["notice_window_node_seconds"] == 0
    assert metrics["work_lost_node_seconds"] == 100 - 32  # after the periodic save at 30 + 2
    assert metrics["useful_node_seconds"] == (30 - 6) + (190 - 114)
    assert metrics["periodic_save_node_seconds"] == 2


def test_a_stretch_in_which_the_trainer_never_started_is_start_up():
    history = NOTICE_RUN[3:]  # the first process wrote nothing (killed while starting)
    metrics = training_metrics.compute(_requeued_once(), history=history)
    assert metrics["startup_node_seconds"] == 100 + 2
    assert metrics["useful_node_seconds"] == 76


def test_an_open_interval_is_billed_until_now():
    result = _result()
    result.events = result.events[:2]
    metrics = training_metrics.compute(result, now=460.0, history=None)
    assert metrics["running_seconds"] == 360
    assert metrics["work_lost_node_seconds"] == 0
    assert "goodput" not in metrics  # no history: where the time went is unknown


def test_a_process_that_starts_before_its_stretch_moves_the_stretch_start():
    # The second stretch's start is an estimate (half a poll window late here): the process
    # that began at 109.5 ran in it, so the node ran from 109.5 at the latest.
    result = _requeued_once()
    history = [
        *NOTICE_RUN[:3],
        Record("resume", 109.5, 80, 2.0),
        Record("save", 190.0, 200, 1.0, "final"),
    ]
    metrics = training_metrics.compute(result, history=history)
    # No start-up, reload from 109.5 to 111.5, then training to 190.
    assert metrics["useful_node_seconds"] == (90 - 6 - 2) + (190 - 111.5)
    assert metrics["startup_node_seconds"] == 5
    assert metrics["reload_node_seconds"] == 1 + 2
    assert metrics["notice_window_node_seconds"] == 10
    assert metrics["work_lost_node_seconds"] == 0
    assert metrics["billed_node_seconds"] == 190.5
    assert metrics["running_seconds"] == 190.5


def test_a_stretch_ends_no_earlier_than_the_history_of_its_process():
    # The requeue was seen at 100 (a poll window's middle) but the notice save that began at
    # 99 blocked until 102: the node ran until 102 at least, never into the next stretch.
    history = [*NOTICE_RUN[:2], Record("save", 99.0, 80, 3.0, "notice"), *NOTICE_RUN[3:]]
    metrics = training_metrics.compute(_requeued_once(), history=history)
    assert metrics["billed_node_seconds"] == 102 + 90
    assert metrics["notice_window_node_seconds"] == 102 - 99
    assert metrics["useful_node_seconds"] == (99 - 6 - 2) + (190 - 114)
    late = [*NOTICE_RUN[:2], Record("save", 99.0, 80, 30.0, "notice"), *NOTICE_RUN[3:]]
    capped = training_metrics.compute(_requeued_once(), history=late)
    assert capped["billed_node_seconds"] == 110 + 90  # up to the next stretch's start
    intervals = training_metrics.run_intervals(_requeued_once(), 200.0, history)
    assert [(i.start, i.end, i.ended_by) for i in intervals] == [
        (0.0, 102.0, "requeued"),
        (110.0, 200.0, "succeeded"),
    ]
    assert training_metrics.run_intervals(_requeued_once(), 200.0)[0].end == 100.0


def test_a_periodic_save_at_the_last_step_of_a_run_that_succeeded_is_its_finish():
    history = [*NOTICE_RUN[:4], Record("save", 190.0, 200, 1.0, "periodic")]
    metrics = training_metrics.compute(_requeued_once(), history=history)
    assert metrics["finish_node_seconds"] == 10
    assert metrics["work_lost_node_seconds"] == 0
    assert metrics["periodic_save_node_seconds"] == 2


def test_a_notice_before_the_first_step_saves_step_0_and_loses_nothing():
    history = [
        Record("start", 5.0, 0, 1.0),
        Record("save", 7.0, 0, 1.0, "notice"),
        Record("resume", 112.0, 0, 2.0),
        Record("save", 190.0, 200, 1.0, "final"),
    ]
    metrics = training_metrics.compute(_requeued_once(), history=history)
    assert metrics["work_lost_node_seconds"] == 0
    assert metrics["notice_window_node_seconds"] == 100 - 7
    assert metrics["useful_node_seconds"] == 1 + (190 - 114)
