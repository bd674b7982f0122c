"""Goodput only from what the step can see: unknown, never 0, when the checkpoint history lives
where the step cannot read it; the history itself, written when saves and resumes happen."""

from __future__ import annotations

import pytest

from vsp.components.runtime.core import errors
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.trainer import history as checkpoint_history
from vsp.components.runtime.trainer import history_writer, manifests
from vsp.components.runtime.trainer.history import Record
from vsp.components.runtime.training import driver, recovery
from vsp.components.runtime.training import metrics as training_metrics
from vsp.components.runtime.training.backends.interface import RunResult


def _preempted_run() -> RunResult:
    attempt = recovery.Attempt("1", recovery.Target("spot", spot=True))
    attempt.outcome = Outcome.SUCCEEDED
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
    history = [Record("start", 0.0, 0, 0.0), Record("save", 50.0, 40, 0.0, "periodic")]
    known = training_metrics.compute(result, history=history, now=100.0)
    unknown = training_metrics.compute(result, history=None, now=100.0)
    assert known["work_lost_node_seconds"] == 10.0  # requeued at 60, last checkpoint at 50
    assert known["goodput"] == round(50 / 90, 4)
    assert "goodput" not in unknown and "work_lost_node_seconds" not in unknown
    assert unknown["node_hours_billed"] == known["node_hours_billed"]


def test_an_uninterrupted_run_needs_no_history_to_know_nothing_was_lost():
    attempt = recovery.Attempt("1", recovery.Target("spot", spot=True))
    attempt.outcome = Outcome.SUCCEEDED
    events = [
        {"time": 0.0, "job_id": "1", "event": "running"},
        {"time": 10.0, "job_id": "1", "event": "succeeded"},
    ]
    metrics = training_metrics.compute(
        RunResult([attempt], 10.0, events=events), history=None, now=10.0
    )
    assert metrics["work_lost_node_seconds"] == 0 and "goodput" not in metrics


def test_visibility_and_the_notes(tmp_path):
    assert manifests.checkpoints_visible(tmp_path)
    assert not manifests.checkpoints_visible(tmp_path / "on-the-cluster")
    note = driver.unknown_goodput_note("/home/run/ckpt")
    assert "/home/run/ckpt" in note and "gs://BUCKET/PATH" in note
    seen = driver.unknown_goodput_note("/gcs/b/ckpt", visible=True)
    assert "no history.jsonl" in seen and "checkpoint.resume()" in seen
    # On Cloud Storage but absent: the trainer saved nothing, the folder is not elsewhere.
    for absent in ("/gcs/b/ckpt", "gs://b/ckpt"):
        none_saved = driver.unknown_goodput_note(absent)
        assert f"{absent} does not exist: the trainer saved no checkpoint" in none_saved
        assert "cluster's own storage" not in none_saved
        # Cancelled before the first save: no fix for the trainer is named.
        early = driver.unknown_goodput_note(absent, cancelled=True)
        assert "cancelled before the trainer saved its first checkpoint" in early
        assert "Fix" not in early
        # Failed before the first save (the trainer crashed): the failure names the fix.
        crashed = driver.unknown_goodput_note(absent, failed=True)
        assert crashed == (
            "unknown: the run failed before the trainer saved its first checkpoint, so there "
            "is no checkpoint history to read."
        )
    # On the cluster's own storage, a failed run's checkpoints may exist: the fix stands.
    assert "gs://BUCKET/PATH" in driver.unknown_goodput_note("/home/run/ckpt", failed=True)
    # Cancelled after saves that lack the history: the trainer's fix still stands.
    assert "checkpoint.resume()" in driver.unknown_goodput_note(
        "/gcs/b/ckpt", visible=True, cancelled=True
    )


def test_pruned_checkpoints_still_count_through_the_history(tmp_path):
    import numpy as np  # noqa: PLC0415 - trainer-side library, only for writing checkpoints

    from vsp.components.runtime.trainer import checkpoint  # noqa: PLC0415

    assert checkpoint.resume(tmp_path) is None
    reasons = ["periodic", "periodic", "periodic", "notice", "final"]
    for step, reason in enumerate(reasons, 1):
        checkpoint.save(tmp_path, step, {"w": np.zeros(2)}, {}, keep=2, reason=reason)
    assert [step for step, _ in manifests.list_checkpoints(tmp_path)] == [4, 5]
    assert checkpoint.resume(tmp_path).step == 5
    records = checkpoint_history.read(tmp_path)
    assert [(r.event, r.step, r.reason) for r in records] == [
        ("start", 0, ""),
        *((("save", step, reason) for step, reason in enumerate(reasons, 1))),
        ("resume", 5, ""),
    ]
    assert all(r.seconds >= 0 for r in records)
    assert [r.time for r in records] == sorted(r.time for r in records)
    # A torn line (an append cut short) is skipped with a warning, never fatal.
    with open(tmp_path / "history.jsonl", "a") as handle:
        handle.write('{"event": "save", "ti\n')
    assert checkpoint_history.read(tmp_path) == records
    assert checkpoint_history.read(tmp_path / "elsewhere") is None


def test_a_save_reason_outside_the_three_is_refused_before_writing(tmp_path):
    import numpy as np  # noqa: PLC0415

    from vsp.components.runtime.trainer import checkpoint  # noqa: PLC0415

    with pytest.raises(errors.UserError, match="reason must be one of periodic, notice, final"):
        checkpoint.save(tmp_path, 1, {"w": np.zeros(2)}, {}, reason="hourly")
    assert manifests.list_checkpoints(tmp_path) == []
    with pytest.raises(errors.UserError, match="Fix: pass reason='periodic'"):
        history_writer.record_save(tmp_path, 1, 0.0, 1.0, "hourly")


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


def test_a_saved_line_gives_the_whole_blocked_time_and_a_save_cut_short_keeps_its_first(tmp_path):
    history_writer.record_save(tmp_path, 30, 100.0, 0.5, "periodic")
    history_writer.record_saved(tmp_path, 30, 100.0, 0.75)
    history_writer.record_save(tmp_path, 60, 200.0, 0.5, "notice")  # killed before saved
    assert checkpoint_history.read(tmp_path) == [
        Record("save", 100.0, 30, 0.75, "periodic"),
        Record("save", 200.0, 60, 0.5, "notice"),
    ]
