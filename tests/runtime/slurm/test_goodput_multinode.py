"""Goodput in node-seconds on a 2-node run: the DDP example preempted on the emulator.

As ``test_goodput_truth`` for one node: the truth comes from records. Billed: the emulator's
record of each run times the nodes it held. Useful: rank 0's step log (``--step-log``), the last
run of each step, times the two nodes that computed it. The metric is what the training step
reports from Slurm's records, its polls and the collective checkpoints' history.
"""

from __future__ import annotations

import sys

import pytest

from benchmarks.goodput.metric import true_billed_seconds, true_useful_seconds
from tests.job_log_files import job_log
from vsp.components.runtime.core import polling
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.training import goodput
from vsp.components.runtime.training.backends import slurm

pytest.importorskip("torch", reason="the DDP example needs the torch extra: pip install .[torch]")

CLUSTER = "llmtrain"
POLL = polling.Backoff(initial=0.05, maximum=0.1, jitter=0)
STEPS, NODES = 600, 2  # long enough that the third preemption lands, however slow the start


@pytest.mark.slow
def test_two_node_goodput_is_within_two_percent_of_the_truth(slurm_cluster, tmp_path):
    emulator = slurm_cluster(CLUSTER, slurm_preempt_notice_seconds=1.0)
    # Seed 5: draws of 5.9, 8.1 and 9.5 s, after the trainer's start (torch, rendezvous: ~3 s).
    emulator.app.slurm.set_preemption_plan(
        CLUSTER, mode="poisson", mean_seconds=6.0, seed=5, max_count=3
    )
    work = tmp_path / "shared"
    command = [sys.executable, "-m", "vsp.examples.ddp_trainer", "--steps", str(STEPS)]
    command += ["--save-every", "15", "--step-seconds", "0.04", "--seed", "2"]
    command += ["--step-log", str(work / "steps.log")]
    training = slurm.SlurmTraining(
        command=command,
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
        environment={"GLOO_SOCKET_IFNAME": "lo"},
        nodes=NODES,
        launcher="srun",
        nccl_env_file="",
    )
    outcome = train_on_cluster.train_on_cluster(
        project="test-project",
        location="us-central1",
        cluster_id=CLUSTER,
        training=training,
        spot_partition="spot",
        run_key="goodput-2-nodes",
        poll_backoff=POLL,
        timeout_seconds=300,
        max_preemptions=5,
    )
    metrics = outcome.metrics
    [job_id] = outcome.result.job_ids
    billed, preempted = true_billed_seconds(emulator, CLUSTER, job_id)
    useful = true_useful_seconds(work / "steps.log", STEPS) * NODES
    log = job_log(work, job_id).read_text()[-3000:]
    assert preempted == metrics["preemptions"] == 3, log
    figures = [metrics[f"{name}_node_seconds"] for name in goodput.FIGURES]
    assert sum(figures) == pytest.approx(metrics["billed_node_seconds"], abs=0.01)
    print(
        f"2 nodes: billed {metrics['billed_node_seconds']} node-s (truth {billed:.3f}), useful "
        f"{metrics['useful_node_seconds']} (truth {useful:.3f}), goodput {metrics['goodput']} "
        f"(truth {useful / billed:.4f})"
    )
    assert metrics["billed_node_seconds"] == pytest.approx(billed, rel=0.02)
    assert metrics["useful_node_seconds"] == pytest.approx(useful, rel=0.02)
    truth = useful / billed
    assert abs(metrics["goodput"] - truth) <= 0.02 * truth, (metrics, useful, billed)
