"""Hang detection end to end: real trainer processes on the emulated Slurm.

A trainer frozen with SIGSTOP (the emulator's ``slurm_freeze`` fault) is found hung within the
bound, cancelled, resubmitted once and resumes from its checkpoint to a model bit-identical to an
uninterrupted run. A long blocking save, a slow start-up and a 10x slower step rate are not hangs.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from tests.job_log_files import job_log
from vsp.components.runtime.core import errors, polling
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.trainer import progress
from vsp.components.runtime.training import hang
from vsp.components.runtime.training.backends import slurm

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "llmtrain"
SLURM_CALL = r":callSlurmRestApi$"
POLL = polling.Backoff(initial=0.1, maximum=0.2, jitter=0)
TRAINER = [sys.executable, "-m", "vsp.examples.trainer", "--seed", "5", "--samples", "256"]
INTERVAL = 0.2  # progress writes, s
FLOOR = 3.0  # hang_floor_seconds of these tests


@pytest.fixture
def cluster(slurm_cluster):
    return slurm_cluster(CLUSTER)


def spec(tmp_path, args) -> slurm.SlurmTraining:
    work = tmp_path / "shared"
    return slurm.SlurmTraining(
        command=[*TRAINER, *args],
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
        environment={progress.INTERVAL_ENV: str(INTERVAL)},
    )


def train(training, floor=FLOOR, factor=20.0, **options):
    return train_on_cluster.train_on_cluster(
        project=PROJECT,
        location=LOCATION,
        cluster_id=CLUSTER,
        training=training,
        spot_partition="spot",
        run_key="run-hang",
        poll_backoff=POLL,
        timeout_seconds=300,
        hang_rule=hang.HangRule(floor_seconds=floor, step_factor=factor),
        **options,
    )


def deletes(emulator):
    return [
        e
        for e in emulator.journal()
        if (e.get("body") or {}).get("method") == "HTTP_METHOD_DELETE"
        and e["body"].get("path", "").startswith("/slurm/v0.0.42/job/")
    ]


def reference_model(tmp_path, args) -> bytes:
    where = tmp_path / "reference"
    env = {
        **os.environ,
        "VSP_CHECKPOINT_DIR": str(where / "ckpt"),
        "VSP_MODEL_DIR": str(where / "model"),
    }
    done = subprocess.run([*TRAINER, *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return (where / "model" / "model.npz").read_bytes()


@pytest.mark.slow
def test_a_frozen_trainer_is_found_hung_resubmitted_once_and_resumes_bit_identical(
    cluster, tmp_path
):
    args = ["--steps", "150", "--step-seconds", "0.03", "--checkpoint-every-steps", "20"]
    cluster.add_fault(action="slurm_freeze", path=SLURM_CALL, body="job/submit", step=70)
    training = spec(tmp_path, args)
    outcome = train(training, factor=1.0, max_hangs=1)  # the bound is the floor

    first, second = outcome.result.attempts
    assert (first.outcome, second.outcome) == (Outcome.CANCELLED, Outcome.SUCCEEDED)
    assert first.hung_because.startswith("hung at step ")
    assert "rank 0 on " in first.hung_because
    assert outcome.metrics["hangs"] == 1 and outcome.metrics["preemptions"] == 0
    assert outcome.metrics["hang_node_hours_saved"] > 0
    # The report shows the hang on the attempt and both metrics.
    assert f"hang: {first.hung_because}" in outcome.report_html
    assert "hang_node_hours_saved" in outcome.report_html and ">hangs<" in outcome.report_html
    assert len(deletes(cluster)) == 1
    freezes = [e for e in cluster.app.slurm.preemptions(CLUSTER) if e["kind"] == "fault"]
    assert [(e["outcome"], e["jobId"]) for e in freezes] == [("FREEZE", int(first.job_id))]
    # Detected within the bound after the freeze: the floor, give or take one progress write
    # and one poll (plus the emulator's 0.2 s tick and scheduling slack).
    hung_at = next(e["time"] for e in outcome.result.events if e["event"] == "hung")
    took = hung_at - freezes[0]["epoch"]
    assert FLOOR - INTERVAL - POLL.maximum <= took <= FLOOR + INTERVAL + POLL.maximum + 1.0
    log = job_log(training.working_directory, second.job_id)
    assert "resumed from ckpt-" in log.read_text()
    model = (pathlib.Path(training.model_dir) / "model.npz").read_bytes()
    assert model == reference_model(tmp_path, args[:2])


@pytest.mark.slow
def test_hangs_beyond_the_budget_fail_with_the_step_and_the_log_tail(cluster, tmp_path):
    args = ["--steps", "400", "--step-seconds", "0.03", "--checkpoint-every-steps", "20"]
    cluster.add_fault(action="slurm_freeze", path=SLURM_CALL, body="job/submit", step=30)
    with pytest.raises(errors.UserError) as info:
        train(spec(tmp_path, args), floor=1.5, max_hangs=0)
    text = str(info.value)
    assert "hung at step " in text and "budget max_hangs=0" in text
    assert "last lines of the job's log" in text and "step 30/400" in text
    assert len(deletes(cluster)) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        # a blocking save of 5 s (longer than the floor) every 25 steps
        ["--save-mode", "blocking", "--save-block-seconds", "5", "--checkpoint-every-steps", "25"],
        # a start-up of 6 s before the first step
        ["--startup-seconds", "6"],
        # from step 20 on, 10x slower steps (0.15 s -> 1.5 s, each longer than a 1 s floor)
        ["--step-seconds", "0.15", "--slow-from-step", "20", "--slow-step-seconds", "1.5"],
    ],
    ids=["long-blocking-save", "slow-start-up", "ten-times-slower-steps"],
)
def test_no_false_positive(cluster, tmp_path, args):
    steps = ["--steps", "30"] if "--slow-from-step" in args else ["--steps", "60"]
    # The save and the start-up are longer than a bound of FLOOR (factor 1): only their
    # exclusion passes them. The slow steps are longer than a 1 s floor: only the learned rate
    # (20 x the step time) passes them.
    slow = "--slow-from-step" in args
    rule = {"floor": 1.0, "factor": 20.0} if slow else {"floor": FLOOR, "factor": 1.0}
    outcome = train(spec(tmp_path, [*steps, *args]), max_hangs=0, **rule)
    assert [a.outcome for a in outcome.result.attempts] == [Outcome.SUCCEEDED]
    assert outcome.metrics["hangs"] == 0 and len(deletes(cluster)) == 0
