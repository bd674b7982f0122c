"""The training step's checks around the run: what it refuses before any submission, and what
it warns about when the trainer ends."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from tests.runtime.slurm.test_train_step import (
    CLUSTER,
    LOCATION,
    POLL,
    PROJECT,
    SUBMIT,
    TRAINER,
    slurm_calls,
    train,
    training,
)
from vsp.components.runtime.core import errors
from vsp.components.runtime.steps import train_on_cluster


@pytest.fixture
def cluster(slurm_cluster):
    return slurm_cluster(CLUSTER)


def test_an_empty_checkpoint_dir_is_refused_before_any_submission(cluster, tmp_path):
    # It once silently disabled resuming: every preemption restarted from step 0.
    spec = dataclasses.replace(training(tmp_path, [*TRAINER, "--steps", "5"]), checkpoint_dir="")
    before = len(slurm_calls(cluster, SUBMIT))
    with pytest.raises(errors.UserError, match="checkpoint_dir is empty"):
        train(spec)
    assert len(slurm_calls(cluster, SUBMIT)) == before == 0


def test_a_cluster_that_does_not_exist_is_a_user_error_before_any_submission(emulator, tmp_path):
    spec = training(tmp_path, [*TRAINER, "--steps", "5"])
    with pytest.raises(errors.UserError) as caught:
        train_on_cluster.train_on_cluster(
            project=PROJECT, location=LOCATION, cluster_id="nosuch", training=spec,
            spot_partition="spot", fallback_partition="ondemand", run_key="run-1",
            poll_backoff=POLL, timeout_seconds=30,
        )  # fmt: skip
    assert str(caught.value).startswith(
        f"cluster projects/{PROJECT}/locations/{LOCATION}/modelDevelopmentClusters/nosuch does "
        "not exist, so no job can be submitted to it. If an earlier step of this run created or "
        "reused it, it was deleted since (another run's teardown, the reaper, or by hand"
    )
    assert "Fix: check cluster_id (or cluster_name) and location" in str(caught.value)
    assert [e["method"] for e in emulator.journal()] == ["GET"]  # the one read, no submit


def test_a_model_register_model_would_refuse_is_warned_about_when_training_ends(
    cluster, tmp_path, caplog
):
    writes = (
        "import os, pathlib; d = pathlib.Path(os.environ['VSP_MODEL_DIR'], 'export'); "
        "d.mkdir(parents=True); (d / 'weights.bin').write_bytes(b'w')"
    )
    outcome = train(training(tmp_path, [sys.executable, "-c", writes]))
    assert outcome.result.attempts
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(
        m.startswith("register_model would refuse this run's model: model directory ")
        and "manifest.json is missing: the folder holds export, written without vsp's model files"
        in m
        for m in warned
    ), warned


def test_a_trainer_that_exits_0_without_a_model_fails_the_training_step(cluster, tmp_path):
    # It ended in success, and register_model then failed three times with "rerun the step".
    spec = training(tmp_path, [sys.executable, "-c", "print('trained, forgot to save')"])
    with pytest.raises(errors.UserError) as caught:
        train(spec)
    assert str(caught.value) == (
        f"the trainer ended with success (exit 0), but model_dir {spec.model_dir} does not "
        "exist: it wrote no model, and the trainer contract's exit 0 means the model is "
        "written. Fix: make the trainer write its final model to $VSP_MODEL_DIR before it exits "
        "0 (model_files.write_model_dir; docs/trainer-contract.md), or exit non-zero when it "
        "cannot."
    )
    assert len(slurm_calls(cluster, SUBMIT)) == 1  # one job: a failure, not retried


def test_an_empty_model_dir_fails_the_training_step_too(cluster, tmp_path):
    makes = "import os; os.makedirs(os.environ['VSP_MODEL_DIR'])"
    with pytest.raises(errors.UserError, match=r"model_dir \S+ is empty: it wrote no model"):
        train(training(tmp_path, [sys.executable, "-c", makes]))


def test_a_trainer_exiting_143_without_a_notice_is_a_failure_not_a_preemption(cluster, tmp_path):
    # It was requeued as preempted until the budget ran out (moved to on-demand on the way).
    exits = [sys.executable, "-c", "import sys; print('giving up'); sys.exit(143)"]
    with pytest.raises(errors.UserError) as caught:
        train(training(tmp_path, exits), max_preemptions=5)
    text = str(caught.value)
    assert "exit code 1" in text and "giving up" in text, text
    assert "but no notice (SIGTERM or SIGUSR1) reached this job" in text
    assert len(slurm_calls(cluster, SUBMIT)) == 1
