"""Two training tasks chained on one checkpoint folder (pretraining, then fine-tuning from its
final checkpoint): the second counts only its own jobs, and the hand-over is no preemption.

Before, the second task's billed time and goodput took in the first task's processes (196.8 s
billed for a 3.5 s task, goodput 0.031), and its trainer read the hand-over as a failed
interruption (the failure estimate went from 0.0196 to 0.0385).
"""

from __future__ import annotations

import logging
import re
import sys

import pytest

from tests.job_log_files import job_log
from vsp.components.runtime.core import polling
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.trainer import history
from vsp.components.runtime.training import driver
from vsp.components.runtime.training.backends import slurm

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "chain"
TRAINER = [sys.executable, "-m", "vsp.examples.trainer", "--samples", "64", "--step-seconds"]


@pytest.fixture
def cluster(slurm_cluster):
    return slurm_cluster(CLUSTER)


def _train(tmp_path, task: str, steps: int, seconds: str):
    work = tmp_path / task
    spec = slurm.SlurmTraining(
        command=[*TRAINER, seconds, "--steps", str(steps)],
        working_directory=str(work),
        checkpoint_dir=str(tmp_path / "shared-ckpt"),
        model_dir=str(work / "model"),
        account="ml",
    )
    return train_on_cluster.train_on_cluster(
        project=PROJECT,
        location=LOCATION,
        cluster_id=CLUSTER,
        training=spec,
        spot_partition="spot",
        run_key=f"chain-{task}",
        poll_backoff=polling.Backoff(initial=0.1, maximum=0.2, jitter=0),
        timeout_seconds=120,
    )


def test_a_task_continuing_another_checkpoint_counts_only_its_own_jobs(cluster, tmp_path):
    first = _train(tmp_path, "pretrain", 10, "0.3")
    second = _train(tmp_path, "finetune", 14, "0.05")
    assert first.result.preemptions == second.result.preemptions == 0
    # The fine-tuning resumed from the pretraining's final checkpoint...
    records = history.read(tmp_path / "shared-ckpt")
    starts = [r for r in records if r.event in history.START_EVENTS]
    assert [(r.event, r.step) for r in starts] == [("start", 0), ("resume", 10)]
    # ...and its figures are its own: its billed time is its job's, far below the ~3 s the
    # pretraining's processes ran, and its goodput is not diluted by them.
    billed_first = first.metrics["billed_node_seconds"]
    billed_second = second.metrics["billed_node_seconds"]
    assert billed_first > 3.0
    assert billed_second < billed_first
    assert second.metrics["goodput"] > 0.2
    # The hand-over is no interruption: neither landed nor failed.
    assert history.notice_outcomes(records) == (0, 0)
    log = job_log(tmp_path / "finetune", second.result.job_ids[0]).read_text()
    assert re.search(r"resumed from \S+ at step 10 .*resume #0", log), log[-1500:]


def test_own_records_keeps_the_lines_from_the_first_job_event_on(caplog):
    lines = [
        history.Record("start", 100.0, 0, 0.1),
        history.Record("save", 103.0, 10, 0.1, "final"),
        history.Record("resume", 200.4, 10, 0.1),
        history.Record("save", 201.0, 14, 0.1, "final"),
    ]
    events = [{"time": 200.9, "event": "running", "job_id": "2"}]
    with caplog.at_level(logging.WARNING, logger=driver.__name__):
        assert driver.own_records(lines, events) == lines[2:]
    # Resuming another run's checkpoint is said: right for a chain, not for a schedule's runs.
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "resumed from step 10" in warning and "give checkpoint_dir a {run}" in warning
    caplog.clear()
    assert driver.own_records(None, events) is None
    assert driver.own_records(lines, []) == lines
    assert driver.own_records(lines[2:], events) == lines[2:]  # all its own: nothing to say
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
