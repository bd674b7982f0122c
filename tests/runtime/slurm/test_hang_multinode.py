"""Hang detection on a 2-node ``srun`` job: one rank of the DDP example frozen with SIGSTOP.

The emulator's ``slurm_freeze`` fault with ``rank: 1`` stops rank 1 only; rank 0 runs on into
its next collective and blocks there, alive. The step finds the job hung within the bound,
names rank 1 and its node (its process stopped writing altogether, while rank 0's heartbeat goes
on), cancels it, resubmits it once, the run resumes from its collective checkpoint to a model
bit-identical to an uninterrupted 2-node run, and no process of the job is left.
"""

from __future__ import annotations

import io
import pathlib
import re
import sys

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

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "llmtrain"
SLURM_CALL = r":callSlurmRestApi$"
POLL = polling.Backoff(initial=0.1, maximum=0.2, jitter=0)
INTERVAL = 0.2  # progress writes and heartbeats, s
FLOOR = 3.0  # hang_floor_seconds (factor 1: the bound is the floor)
ARGS = ["--steps", "120", "--save-every", "20", "--step-seconds", "0.03", "--seed", "3"]


def run(tmp_path, name: str, run_key: str, max_hangs: int = 1):
    work = tmp_path / name
    training = slurm.SlurmTraining(
        command=[sys.executable, "-m", "vsp.examples.ddp_trainer", *ARGS],
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
        environment={"GLOO_SOCKET_IFNAME": "lo", progress.INTERVAL_ENV: str(INTERVAL)},
        nodes=2,
        launcher="srun",
        nccl_env_file="",
    )
    outcome = train_on_cluster.train_on_cluster(
        project=PROJECT,
        location=LOCATION,
        cluster_id=CLUSTER,
        training=training,
        spot_partition="spot",
        run_key=run_key,
        poll_backoff=POLL,
        timeout_seconds=300,
        hang_rule=hang.HangRule(floor_seconds=FLOOR, step_factor=1.0),
        max_hangs=max_hangs,
    )
    return outcome, work


def model(work: pathlib.Path) -> dict[str, bytes]:
    arrays = np.load(io.BytesIO((work / "model" / "model.npz").read_bytes()))
    return {key: arrays[key].tobytes() for key in arrays.files}


@pytest.mark.slow
def test_one_frozen_rank_of_two_nodes_is_named_cancelled_resumed_bit_identical(
    slurm_cluster, tmp_path, monkeypatch
):
    reads: list[tuple[float, hang.Stall | None]] = []  # (epoch s, stall) of each progress read
    observe = hang.HangWatch.observe

    def recorded(self, job, restart, records, now, wall=None):
        found = observe(self, job, restart, records, now, wall)
        reads.append((wall, found))
        return found

    monkeypatch.setattr(hang.HangWatch, "observe", recorded)
    cluster = slurm_cluster(CLUSTER)
    cluster.add_fault(action="slurm_freeze", path=SLURM_CALL, body="job/submit", step=50, rank=1)
    outcome, work = run(tmp_path, "frozen", "hang-rank-1")

    first, second = outcome.result.attempts
    assert (first.outcome, second.outcome) == (Outcome.CANCELLED, Outcome.SUCCEEDED)
    assert outcome.metrics["hangs"] == 1 and outcome.metrics["preemptions"] == 0
    freezes = [e for e in cluster.app.slurm.preemptions(CLUSTER) if e["kind"] == "fault"]
    assert len(freezes) == 1 and freezes[0]["outcome"] == "FREEZE"
    assert freezes[0]["jobId"] == int(first.job_id)
    # The fault stopped rank 1 only; the message names rank 1 and the node it ran on.
    log = job_log(work, first.job_id).read_text()
    node = re.search(r"rank 1/2 on node (\S+) \(pid (\d+)", log)
    assert node is not None, log[-2000:]
    assert freezes[0]["rank"] == 1 and freezes[0]["pid"] == int(node.group(2))
    assert f"rank 1 on {node.group(1)} " in first.hung_because, first.hung_because
    assert "its process stopped altogether" in first.hung_because, first.hung_because
    # Declared at the first progress read past the bound after the freeze (the floor, give or
    # take one progress write and the emulator's 0.2 s tick), never before; and that read comes
    # within a poll of the bound, also when the read before the freeze saw the ranks saving
    # (whose wider bound once put off the next read to 3 x the floor: found 7.6 s late).
    frozen_at = freezes[0]["epoch"]
    hung_at = next(e["time"] for e in outcome.result.events if e["event"] == "hung")
    took = hung_at - frozen_at
    print(f"frozen rank 1 found hung {took:.2f} s after the freeze ({first.hung_because})")
    declared = next(wall for wall, stall in reads if stall is not None)
    past_bound = next(wall for wall, _ in reads if wall > frozen_at + FLOOR + INTERVAL + 0.2)
    assert declared <= past_bound, (declared - frozen_at, past_bound - frozen_at)
    assert FLOOR - INTERVAL - POLL.maximum <= took <= FLOOR + INTERVAL + POLL.maximum + 1.0
    # Cancelled once (both ranks' processes ended), resubmitted once, resumed from a checkpoint.
    resumed = job_log(work, second.job_id).read_text()
    assert re.search(r"resumed from step [1-9]\d* ", resumed), resumed[-2000:]
    assert_no_process_left("hang-rank-1")

    reference, reference_work = run(tmp_path, "reference", "hang-reference")
    assert [a.outcome for a in reference.result.attempts] == [Outcome.SUCCEEDED]
    assert model(work) == model(reference_work)
