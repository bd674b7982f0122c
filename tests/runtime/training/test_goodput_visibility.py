"""Work lost and goodput only from what the step can see: unknown, never 0, when the
checkpoints live where the step cannot read them."""

from __future__ import annotations

import pytest

from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import manifests
from vsp.components.runtime.training import metrics as training_metrics
from vsp.components.runtime.training import recovery
from vsp.components.runtime.training import runner as training_step
from vsp.components.runtime.training.supervisor import RunResult


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


def test_pruned_checkpoints_still_count_through_their_history(tmp_path):
    import numpy as np  # noqa: PLC0415 - trainer-side library, only for writing checkpoints

    from vsp.components.runtime.trainer import checkpoint  # noqa: PLC0415

    saved = [checkpoint.save(tmp_path, step, {"w": np.zeros(2)}, {}, keep=2) for step in range(5)]
    assert [step for step, _ in manifests.list_checkpoints(tmp_path)] == [3, 4]
    created = [ref.manifest["created_unix"] for ref in saved]
    assert manifests.checkpoint_times(tmp_path) == sorted(created)
    # A run interrupted right after the first save lost (almost) nothing, although that
    # checkpoint was pruned since.
    result = _preempted_run()
    (tmp_path / "history" / "ckpt-0000000000.json").write_text('{"step": 0, "created_unix": 50.0}')
    times = manifests.checkpoint_times(tmp_path)
    assert 50.0 in times
    metrics = training_metrics.compute(result, checkpoint_times=times, now=100.0)
    assert metrics["work_lost_seconds"] == 10.0
    # An unreadable record is skipped with a warning, never fatal.
    (tmp_path / "history" / "ckpt-0000000001.json").write_text("{")
    assert manifests.checkpoint_times(tmp_path) == [50.0, *created[2:]]


def test_default_checkpoint_dir_is_beside_the_model_on_cloud_storage():
    key = "vsp-c1-run-7-train"
    assert manifests.default_checkpoint_dir("gs://b/runs/7/model", key) == (
        "gs://b/runs/7/checkpoints/vsp-c1-run-7-train"
    )
    assert manifests.default_checkpoint_dir("/gcs/b/model/", key) == (
        "/gcs/b/checkpoints/vsp-c1-run-7-train"
    )
    for bucket_only in ("gs://b", "/gcs/b", "/model"):
        with pytest.raises(errors.UserError, match="Fix: use gs://BUCKET/RUN/model"):
            manifests.default_checkpoint_dir(bucket_only, key)
