"""Work lost and goodput only from what the step can see: unknown, never 0, when the
checkpoints live where the step cannot read them."""

from __future__ import annotations

from components.runtime import manifests, recovery, training_metrics, training_step
from components.runtime.training_run import RunResult


def _preempted_run() -> RunResult:
    attempt = recovery.Attempt("1", recovery.Target("spot", spot=True))
    attempt.outcome = recovery.Outcome.SUCCEEDED
    attempt.nodes = 1
    events = [
        {"time": 0.0, "job_id": "1", "event": "running"},
        {"time": 60.0, "job_id": "1", "event": "requeued"},
        {"time": 70.0, "job_id": "1", "event": "running"},
        {"time": 100.0, "job_id": "1", "event": "succeeded"},
    ]
    return RunResult([attempt], 100.0, events=events)


def test_invisible_checkpoints_leave_goodput_out_when_a_run_was_interrupted():
    result = _preempted_run()
    known = training_metrics.compute(result, checkpoint_times=[50.0], now=100.0)
    unknown = training_metrics.compute(result, checkpoint_times=None, now=100.0)
    assert known["work_lost_seconds"] == 10.0  # requeued at 60, last checkpoint at 50
    assert "goodput" in known and "work_lost_seconds" in known
    assert "goodput" not in unknown and "work_lost_seconds" not in unknown
    assert unknown["node_hours_billed"] == known["node_hours_billed"]


def test_an_uninterrupted_run_needs_no_checkpoints_to_know_nothing_was_lost():
    attempt = recovery.Attempt("1", recovery.Target("spot", spot=True))
    attempt.outcome = recovery.Outcome.SUCCEEDED
    events = [
        {"time": 0.0, "job_id": "1", "event": "running"},
        {"time": 10.0, "job_id": "1", "event": "succeeded"},
    ]
    metrics = training_metrics.compute(
        RunResult([attempt], 10.0, events=events), checkpoint_times=None, now=10.0
    )
    assert metrics["work_lost_seconds"] == 0 and metrics["goodput"] == 1.0


def test_visibility_and_the_note(tmp_path):
    assert manifests.checkpoints_visible(tmp_path)
    assert not manifests.checkpoints_visible(tmp_path / "on-the-cluster")
    note = training_step.unknown_goodput_note("/home/run/ckpt")
    assert "/home/run/ckpt" in note and "gs://BUCKET/PATH" in note
