"""The goodput metric against the truth, on the example trainer preempted on the emulator.

The truth comes from records, never from sleeps: the useful time from the trainer's own step log
(``--step-log``: when each step began and ended; the last run of each step is the one the model
kept), the billed time from the emulator's record of each run (a preempted run holds its node
from its start until the notice ends; the last from its start to its end). The metric comes from
what the step saw: Slurm's job records, its polls and the checkpoint history.
"""

from __future__ import annotations

import pathlib
import sys

import pytest

from vsp.components.runtime.core import polling
from vsp.components.runtime.slurm import backend as slurm_backend
from vsp.components.runtime.slurm import train_runner as train_step
from vsp.components.runtime.training import goodput
from vsp.examples.trainer.step_log import read_step_log

CLUSTER = "llmtrain"
POLL = polling.Backoff(initial=0.05, maximum=0.1, jitter=0)
STEPS = 240


def true_useful_seconds(step_log: pathlib.Path) -> float:
    """Seconds spent on the run of each step that the model kept (its last run)."""
    last: dict[int, tuple[float, float]] = {}
    for step, began, ended in read_step_log(step_log):
        last[step] = (began, ended)
    assert sorted(last) == list(range(1, STEPS + 1))
    return sum(ended - began for began, ended in last.values())


def true_billed_seconds(emulator, job_id: str) -> tuple[float, int]:
    """Node-seconds the emulator held nodes for the job, and how many runs were preempted."""
    events = [e for e in emulator.app.slurm.preemptions(CLUSTER) if str(e["jobId"]) == job_id]
    billed = 0.0
    for event in events:
        assert len(event["nodes"]) == 1
        billed += event["runSeconds"] + event["noticeSeconds"]
    job = next(j for j in emulator.app.slurm.jobs(CLUSTER) if str(j["job_id"]) == job_id)
    billed += job["end_time"] - job["start_time"]
    return billed, len(events)


# Seeds whose first three draws (mean 2.5 s) all fall inside a run of the trainer, which needs
# about 11 s: 1 -> 0.36 (while it starts), 4.70, 3.61 s; 5 -> 2.44, 3.38, 3.96 s; 6 -> 3.94,
# 4.31, 1.66 s (``vertex_emulator.slurm.preemption.poisson_delays``).
@pytest.mark.parametrize("seed", [1, 5, 6])
def test_goodput_metric_is_within_two_percent_of_the_truth(slurm_cluster, tmp_path, seed):
    emulator = slurm_cluster(CLUSTER)
    emulator.app.slurm.set_preemption_plan(
        CLUSTER, mode="poisson", mean_seconds=2.5, seed=seed, max_count=3
    )
    work = tmp_path / "shared"
    step_log = work / "steps.log"
    command = [sys.executable, "-m", "vsp.examples.trainer", "--seed", str(seed)]
    command += ["--samples", "256", "--steps", str(STEPS), "--step-seconds", "0.04"]
    command += ["--checkpoint-every-steps", "30", "--keep", "1", "--step-log", str(step_log)]
    training = slurm_backend.SlurmTraining(
        command=command,
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
    )
    outcome = train_step.train_on_cluster(
        project="test-project",
        location="us-central1",
        cluster_id=CLUSTER,
        training=training,
        spot_partition="spot",
        run_key=f"goodput-{seed}",
        poll_backoff=POLL,
        timeout_seconds=300,
        max_preemptions=5,
    )
    metrics = outcome.metrics
    [job_id] = outcome.result.job_ids
    billed, preempted = true_billed_seconds(emulator, job_id)
    useful = true_useful_seconds(step_log)
    trainer_log = (work / f"slurm-{job_id}.out").read_text()[-2000:]
    assert preempted == metrics["preemptions"] == 3, trainer_log
    figures = [metrics[f"{name}_node_seconds"] for name in goodput.FIGURES]
    assert sum(figures) == pytest.approx(metrics["billed_node_seconds"], abs=0.01)
    assert metrics["billed_node_seconds"] == pytest.approx(billed, rel=0.02)
    assert metrics["useful_node_seconds"] == pytest.approx(useful, rel=0.02)
    truth = useful / billed
    assert abs(metrics["goodput"] - truth) <= 0.02 * truth, (metrics, useful, billed)
