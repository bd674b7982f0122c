"""Hang detection on a real Slurm 24.11: a trainer frozen with SIGSTOP is found hung, its job
cancelled through the Slurm Job API and resubmitted, and the run resumes to a bit-identical model.

The emulator forwards the Slurm Job API to the real slurmrestd; the jobs run under the real
slurmd on this machine, so the test itself stops the trainer (the pid its progress file names)
once it reports step 40, as a deadlock would leave it.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from tests.job_log_files import job_log
from vsp.components.runtime.core import polling
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.trainer import progress
from vsp.components.runtime.training import hang
from vsp.components.runtime.training.backends import slurm

pytestmark = pytest.mark.slurm_conformance

CLUSTER = "confhang"
TRAINER = [sys.executable, "-m", "vsp.examples.trainer", "--seed", "4", "--samples", "256"]
STEPS = ["--steps", "150", "--step-seconds", "0.03"]
FLOOR, INTERVAL = 4.0, 0.2


def freeze_at(checkpoint_dir: str, step: int, stop: threading.Event, frozen: list) -> None:
    """SIGSTOPs the first process whose progress file reports ``step`` or later outside a save
    (a deadlock in a training step; a save stuck on I/O has its own, wider bound)."""
    root = progress.folder(checkpoint_dir)
    while not stop.is_set():
        for path in sorted(root.glob("*.json")) if root.is_dir() else []:
            found = progress.Progress.parse(path.read_text())
            if found is not None and found.step >= step and found.phase == "step":
                os.kill(found.pid, signal.SIGSTOP)
                frozen.append((found, time.time()))
                return
        time.sleep(0.05)


@pytest.mark.slow
def test_a_frozen_trainer_on_real_slurm_is_cancelled_resubmitted_and_resumes_bit_identical(
    tmp_path, slurm_cluster, held_real_slurm
):
    slurm_cluster(CLUSTER, slurmrestd=held_real_slurm)
    os.chmod(tmp_path, 0o755)
    work = tmp_path / "shared"
    training = slurm.SlurmTraining(
        command=[*TRAINER, *STEPS, "--checkpoint-every-steps", "20"],
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
        environment={progress.INTERVAL_ENV: str(INTERVAL)},
    )
    stop, frozen = threading.Event(), []
    watcher = threading.Thread(target=freeze_at, args=(training.checkpoint_dir, 40, stop, frozen))
    watcher.start()
    try:
        outcome = train_on_cluster.train_on_cluster(
            project="test-project",
            location="us-central1",
            cluster_id=CLUSTER,
            training=training,
            spot_partition="spot",
            run_key=f"run-hang-real-{uuid.uuid4().hex[:8]}",  # the Slurm keeps earlier runs' jobs
            poll_backoff=polling.Backoff(initial=0.2, maximum=0.5, jitter=0),
            timeout_seconds=300,
            hang_rule=hang.HangRule(floor_seconds=FLOOR, step_factor=1.0),
            max_hangs=1,
        )
    finally:
        stop.set()
        watcher.join()
    first, second = outcome.result.attempts
    assert (first.outcome, second.outcome) == (Outcome.CANCELLED, Outcome.SUCCEEDED)
    assert first.hung_because.startswith(f"hung at step {frozen[0][0].step} ")
    assert outcome.metrics["hangs"] == 1
    hung_at = next(e["time"] for e in outcome.result.events if e["event"] == "hung")
    took = hung_at - frozen[0][1]
    assert FLOOR - INTERVAL - 0.5 <= took <= FLOOR + INTERVAL + 0.5 + 1.0
    log = job_log(work, second.job_id)
    assert "resumed from ckpt-" in log.read_text()
    reference = tmp_path / "reference"
    env = {**os.environ, "VSP_CHECKPOINT_DIR": str(reference / "ckpt")}
    env["VSP_MODEL_DIR"] = str(reference / "model")
    unpaced = [*STEPS, "--step-seconds", "0"]  # the sleep per step does not change the model
    subprocess.run([*TRAINER, *unpaced], env=env, check=True, capture_output=True)
    trained = pathlib.Path(training.model_dir) / "model.npz"
    assert trained.read_bytes() == (reference / "model" / "model.npz").read_bytes()
