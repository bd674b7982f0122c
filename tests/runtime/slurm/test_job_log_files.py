"""Each run's job log is a file of its own, also where two clusters number their jobs alike.

A cluster created again (a nightly schedule that deletes its cluster after each run) numbers its
jobs from 1. The log file used to be named by the job's id alone and opened for appending, so
with one log folder for every night, each night's job 1 added to the file of the night before,
and the step streamed the earlier night's lines as its own trainer's.
"""

from __future__ import annotations

import logging
import sys

import pytest

from vsp.components.runtime.core import polling
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.training import job_logs
from vsp.components.runtime.training.backends import slurm

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "nightly"
POLL = polling.Backoff(initial=0.1, maximum=0.2, jitter=0)
TRAINER = [sys.executable, "-m", "vsp.examples.trainer", "--samples", "64", "--steps", "5"]


def _night(tmp_path, night: str, seed: int):
    spec = slurm.SlurmTraining(
        command=[*TRAINER, "--seed", str(seed), "--step-seconds", "0.01"],
        working_directory=str(tmp_path / "home"),
        checkpoint_dir=str(tmp_path / night / "ckpt"),
        model_dir=str(tmp_path / night / "model"),
        standard_output=str(tmp_path / "logs" / job_logs.FILE_PATTERN),
    )
    return train_on_cluster.train_on_cluster(
        project=PROJECT,
        location=LOCATION,
        cluster_id=CLUSTER,
        training=spec,
        spot_partition="spot",
        fallback_partition="",
        run_key=night,
        poll_backoff=POLL,
        timeout_seconds=120,
    )


@pytest.mark.slow
def test_two_nights_on_clusters_created_again_keep_their_logs_apart(
    slurm_cluster, tmp_path, caplog
):
    caplog.set_level(logging.INFO)
    streamed = {}
    for night, seed in (("night-1", 3), ("night-2", 4)):
        # Created again (here: a new emulator): its jobs are numbered from 1.
        slurm_cluster(CLUSTER, state_dir=str(tmp_path / night / "emulator"))
        caplog.clear()
        outcome = _night(tmp_path, night, seed)
        assert outcome.result.job_ids == ["1"]
        streamed[night] = [r.getMessage() for r in caplog.records if "[job 1]" in r.getMessage()]
    logs = tmp_path / "logs"
    assert sorted(p.name for p in logs.iterdir()) == ["slurm-1-night-1.out", "slurm-1-night-2.out"]
    first = (logs / "slurm-1-night-1.out").read_text()
    second = (logs / "slurm-1-night-2.out").read_text()
    assert "starting from step 0 (seed 3)" in first and "(seed 4)" not in first
    assert "starting from step 0 (seed 4)" in second and "(seed 3)" not in second
    # The second night's step showed its own trainer's lines, none of the first night's.
    assert any("(seed 4)" in line for line in streamed["night-2"])
    assert not any("(seed 3)" in line for line in streamed["night-2"])


def test_a_log_path_expands_the_job_id_and_name_only():
    pattern = "/gcs/b/logs/%%j-" + job_logs.FILE_PATTERN
    assert job_logs.file_path(pattern, "12", "vsp-c1-run-7-train") == (
        "/gcs/b/logs/%j-slurm-12-vsp-c1-run-7-train.out"
    )
