"""Hang detection of one frozen rank of a 2-node ``srun`` job on a real Slurm 24.11.

The DDP example (gloo) runs on two slurmd nodes; once rank 1 reports step 50 the test stops that
rank's process with SIGSTOP (the pid its progress file names), as a hung rank would stop: rank 0
blocks in its next collective, alive. The step finds the job hung within the bound, names rank 1
and its node, cancels the job through the Slurm Job API and resubmits it once; the run resumes
from its collective checkpoint to a model bit-identical to an uninterrupted 2-node run, and no
process of the job remains (the process table is read). The emulated case is
``tests/runtime/slurm/test_hang_multinode.py``.
"""

from __future__ import annotations

import io
import os
import re
import signal
import sys
import threading
import time
import uuid

import numpy as np
import pytest

from tests.conformance.scenario_jobs import assert_no_process_left
from tests.job_log_files import job_log
from vsp.components.runtime.core import polling
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.trainer import progress
from vsp.components.runtime.training import hang
from vsp.components.runtime.training.backends import slurm

pytest.importorskip("torch", reason="the DDP example needs the torch extra: pip install .[torch]")

pytestmark = [pytest.mark.slurm_conformance, pytest.mark.slow]

ARGS = ["--steps", "120", "--save-every", "20", "--step-seconds", "0.03", "--seed", "3"]
# The floor is above this Slurm's time from a trainer's last step to its job's end (measured:
# about 1 s of interpreter exit after the model is written, then 3 s with the job still RUNNING
# after its batch script ended), which the rule counts as time without a step.
FLOOR, INTERVAL, POLL = 8.0, 0.2, polling.Backoff(initial=0.2, maximum=0.5, jitter=0)


def freeze_rank(checkpoint_dir: str, rank: int, step: int, stop: threading.Event, frozen: list):
    """SIGSTOPs rank ``rank``'s process once its progress file reports ``step`` or later."""
    root = progress.folder(checkpoint_dir)
    while not stop.is_set():
        for path in sorted(root.glob(f"*.{rank}.json")) if root.is_dir() else []:
            found = progress.Progress.parse(path.read_text())
            if found is not None and found.step >= step and found.phase == "step":
                os.kill(found.pid, signal.SIGSTOP)
                frozen.append((found, time.time()))
                return
        time.sleep(0.05)


def run(backend, name: str, run_key: str, freeze: bool):
    work = backend.workdir / name
    training = slurm.SlurmTraining(
        command=[sys.executable, "-m", "vsp.examples.ddp_trainer", *ARGS],
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
        environment={
            "PATH": os.environ["PATH"],
            "GLOO_SOCKET_IFNAME": "lo",
            progress.INTERVAL_ENV: str(INTERVAL),
        },
        nodes=2,
        launcher="srun",
        nccl_env_file="",
    )
    stop, frozen = threading.Event(), []
    args = (training.checkpoint_dir, 1, 50, stop, frozen)
    watcher = threading.Thread(target=freeze_rank, args=args)
    if freeze:
        watcher.start()
    try:
        outcome = train_on_cluster.train_on_cluster(
            project="test-project",
            location="us-central1",
            cluster_id="conf",
            training=training,
            spot_partition="spot",
            run_key=run_key,
            poll_backoff=POLL,
            timeout_seconds=300,
            hang_rule=hang.HangRule(floor_seconds=FLOOR, step_factor=1.0),
            max_hangs=1,
        )
    finally:
        stop.set()
        if freeze:
            watcher.join()
    return outcome, work, frozen


def model(work) -> dict[str, bytes]:
    arrays = np.load(io.BytesIO((work / "model" / "model.npz").read_bytes()))
    return {key: arrays[key].tobytes() for key in arrays.files}


def test_one_frozen_rank_on_two_real_nodes_is_named_cancelled_resumed_bit_identical(
    multinode_backend,
):
    backend = multinode_backend
    if backend.kind != "real":
        pytest.skip("the emulated case is tests/runtime/slurm/test_hang_multinode.py")
    run_key = f"hang-rank-real-{uuid.uuid4().hex[:8]}"  # the Slurm keeps earlier runs' jobs
    outcome, work, frozen = run(backend, "frozen", run_key, freeze=True)

    first, second = outcome.result.attempts
    assert (first.outcome, second.outcome) == (Outcome.CANCELLED, Outcome.SUCCEEDED)
    assert outcome.metrics["hangs"] == 1 and len(frozen) == 1
    record, stopped_at = frozen[0]
    log = job_log(work, first.job_id).read_text()
    node = re.search(rf"rank 1/2 on node (\S+) \(pid {record.pid},", log)
    assert node is not None, log[-2000:]
    assert f"rank 1 on {node.group(1)} " in first.hung_because, first.hung_because
    assert "its process stopped altogether" in first.hung_because, first.hung_because
    hung_at = next(e["time"] for e in outcome.result.events if e["event"] == "hung")
    took = hung_at - stopped_at
    print(f"real Slurm: frozen rank 1 found hung {took:.2f} s after SIGSTOP")
    assert FLOOR - INTERVAL - POLL.maximum <= took <= FLOOR + INTERVAL + POLL.maximum + 1.0
    resumed = job_log(work, second.job_id).read_text()
    assert re.search(r"resumed from step [1-9]\d* ", resumed), resumed[-2000:]
    assert_no_process_left(run_key)

    reference, reference_work, _ = run(backend, "reference", f"{run_key}-ref", freeze=False)
    assert [a.outcome for a in reference.result.attempts] == [Outcome.SUCCEEDED]
    assert model(work) == model(reference_work)
