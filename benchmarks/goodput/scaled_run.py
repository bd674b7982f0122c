"""One scaled goodput run: the training step on an emulated cluster under seeded Spot preemptions.

An in-process Vertex emulator (``benchmarks.goodput.metric.start_emulator``) with the scaled
Slurm timings (notice 0.5 s from SIGTERM to SIGKILL, requeue delay and node recovery 2 s) runs
``train_runner.train_on_cluster`` on the example trainer while the emulator's Poisson
preemption plan (mean 60 s of running time, seeded) reclaims the Spot node. Everything measured
comes from records:

* useful seconds: the trainer's ``train_seconds`` (``metrics.json`` of the model: time in the
  steps the model holds, carried in every checkpoint), and beside it the step log's truth
  (``goodput_metric.true_useful_seconds``);
* billed node seconds: the emulator's record of each run (``goodput_metric.true_billed_seconds``:
  a preempted run from its start to the end of its notice, none for an unannounced one, the
  last one to its end); and
  elapsed seconds from the first run's start to the last one's end, which also bills the gaps
  between runs (node down, requeue delay);
* the restart gap (SIGKILL to the next run's start) from the same records, the start-up
  inside each run (run start to the first step the trainer began, from the step log), and the
  tail (the last step's end to the job's end: final save, model write, exit), which with the
  plan lets ``trace_of_run`` replay the run (``benchmarks.goodput.replay``).

A job on 2 nodes (``nodes``) runs the DDP example instead (the torch extra): its useful seconds
are rank 0's step log (the steps the model holds) per node, billed seconds count every node.

The emulator sets ``VERTEX_EMULATOR_HOST`` for its process, so parallel runs each need their own
process (``benchmarks.goodput.scaled`` uses a spawned process pool).
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from benchmarks.goodput import metric as goodput_metric
from benchmarks.goodput import replay
from vsp.components.runtime.core import polling
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.training.backends import slurm
from vsp.examples.trainer.step_log import read_step_log

MTBF_S, RESTART_S, NOTICE_S = 60.0, 2.0, 0.5
MAX_PREEMPTIONS = 40  # the plan's cap: far above the ~5 a 300 s run expects at M = 60 s
SETTINGS = goodput_metric.SETTINGS.replace(
    slurm_requeue_delay_seconds=RESTART_S,
    slurm_node_recovery_seconds=RESTART_S,
)
POLL = polling.Backoff(initial=0.25, maximum=1.0, jitter=0)  # seconds between the step's polls


def run_windows(events: Sequence[dict[str, Any]], job: dict[str, Any]) -> list[tuple[float, float]]:
    """(start, end) epoch seconds of each run of a job, oldest first.

    A preempted run (a timeline entry) ends when its notice ends (the SIGKILL); the last run is
    the job record's own start and end.

    Args:
        events: The job's preemption timeline entries (``epoch``, ``runSeconds``,
            ``noticeSeconds``), oldest first.
        job: The job's record (``start_time``, ``end_time`` epoch seconds).
    """
    windows = [
        (e["epoch"] - e["runSeconds"], e["epoch"] + e["noticeSeconds"])
        for e in sorted(events, key=lambda e: e["epoch"])
    ]
    windows.append((float(job["start_time"]), float(job["end_time"])))
    return windows


def restart_gaps(windows: Sequence[tuple[float, float]]) -> list[float]:
    """Seconds from each run's end to the next run's start (no node held, not billed)."""
    return [start - windows[i][1] for i, (start, _) in enumerate(windows[1:])]


def startup_delays(
    windows: Sequence[tuple[float, float]], step_begins: Sequence[float]
) -> list[float | None]:
    """Per run, seconds from its start to the first step the trainer began in it (interpreter
    start-up, prolog and checkpoint reload); None for a run that began no step."""
    delays: list[float | None] = []
    for start, end in windows:
        inside = [b for b in step_begins if start <= b < end]
        delays.append(min(inside) - start if inside else None)
    return delays


def trainer_flags(extra: Sequence[str], nodes: int = 1) -> list[str]:
    """A case's save flags plus the scaled prior and notice the trainer's policy is given (the
    job's mean time between preemptions: a node's over the job's ``nodes``)."""
    mtbf = MTBF_S / nodes
    return [*extra, "--mtbf-seconds", f"{mtbf:g}", "--notice-seconds", f"{NOTICE_S:g}"]


def ddp_training(
    seed: int, work: pathlib.Path, steps: int, step_s: float, flags: Sequence[str], nodes: int
) -> slurm.SlurmTraining:
    """The DDP example's run for ``seed`` on ``nodes`` nodes (``srun``, gloo over loopback),
    rank 0 writing the step log into ``work``."""
    command = [sys.executable, "-m", "vsp.examples.ddp_trainer", "--seed", str(seed)]
    command += ["--steps", str(steps), "--step-seconds", str(step_s), "--keep", "1", *flags]
    command += ["--step-log", str(work / "steps.log")]
    environment = {**goodput_metric.trainer_environment(), "GLOO_SOCKET_IFNAME": "lo"}
    return slurm.SlurmTraining(
        command=command,
        environment=environment,
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
        nodes=nodes,
        launcher="srun",
        nccl_env_file="",
    )


def _model_record(model: pathlib.Path, nodes: int, steps: int, step_log: pathlib.Path) -> dict:
    """Steps, useful seconds per node and the policy's explanation, from the model the run
    wrote: the numpy example's ``metrics.json`` (its ``train_seconds``), or for the DDP example
    its ``metadata.json`` and rank 0's step log (the time in the steps the model holds)."""
    if nodes == 1:
        metrics = json.loads((model / "metrics.json").read_text())
        return {
            "steps": metrics["steps"],
            "train_seconds": metrics["train_seconds"],
            "checkpoint_policy": metrics.get("checkpoint_policy", ""),
        }
    metadata = json.loads((model / "metadata.json").read_text())
    return {
        "steps": metadata["step"],
        "train_seconds": goodput_metric.true_useful_seconds(step_log, steps),
        "checkpoint_policy": metadata.get("checkpoint_policy", ""),
    }


def run_case(
    extra: Sequence[str],
    seed: int,
    steps: int,
    step_s: float,
    plan: dict[str, Any] | None = None,
    nodes: int = 1,
) -> dict[str, Any]:
    """One run of ``steps`` steps of ``step_s`` s under the plan of ``seed``, to completion.

    Args:
        extra: The case's trainer flags (save mode and costs, strategy).
        seed: Seed of the preemption plan and of the trainer.
        steps: Training steps.
        step_s: Simulated seconds per step.
        plan: More preemption plan fields (e.g. ``unannounced_share``).
        nodes: Nodes of the job. One runs the numpy example; more run the DDP example (the
            ``torch`` extra) on that many Spot nodes, with the plan's mean the job's time
            between preemptions (``MTBF_S / nodes``: the first of its nodes to go ends a run).

    Returns:
        The run's records: useful, billed and elapsed seconds, the step's own metric, runs,
        restart gaps and start-up delays.
    """
    with tempfile.TemporaryDirectory(prefix=f"goodput-scaled-{seed}-") as folder:
        root = pathlib.Path(folder)
        emulator = goodput_metric.start_emulator(root / "emulator", NOTICE_S, SETTINGS)
        cluster = goodput_metric.CLUSTER
        try:
            emulator.app.slurm.set_preemption_plan(
                cluster,
                mode="poisson",
                mean_seconds=MTBF_S / nodes,
                seed=seed,
                max_count=MAX_PREEMPTIONS,
                **(plan or {}),
            )
            work = root / "shared"
            if nodes == 1:
                training = goodput_metric.trainer_training(
                    seed, work, steps=steps, step_seconds=step_s, save=trainer_flags(extra)
                )
            else:
                flags = trainer_flags(extra, nodes)
                training = ddp_training(seed, work, steps, step_s, flags, nodes)
            outcome = train_on_cluster.train_on_cluster(
                project=goodput_metric.PROJECT,
                location=goodput_metric.LOCATION,
                cluster_id=cluster,
                training=training,
                spot_partition="spot",
                run_key=f"goodput-scaled-{seed}",
                poll_backoff=POLL,
                timeout_seconds=3 * steps * step_s + 600,
                max_preemptions=MAX_PREEMPTIONS + 2,
            )
            [job_id] = outcome.result.job_ids
            billed, preempted = goodput_metric.true_billed_seconds(emulator, cluster, job_id)
            events = [
                e for e in emulator.app.slurm.preemptions(cluster) if str(e["jobId"]) == job_id
            ]
            job = next(j for j in emulator.app.slurm.jobs(cluster) if str(j["job_id"]) == job_id)
            fired = emulator.app.slurm.preemption_plan(cluster)
        finally:
            emulator.app.slurm.shutdown()
            emulator.stop()
        model = _model_record(work / "model", nodes, steps, work / "steps.log")
        rows = read_step_log(work / "steps.log")
        begins = [began for _, began, _, _ in rows]
        useful_log = goodput_metric.true_useful_seconds(work / "steps.log", steps)
    windows = run_windows(events, job)
    gaps = restart_gaps(windows)
    startups = startup_delays(windows, begins)
    metrics = outcome.metrics
    return {
        "seed": seed,
        "nodes": nodes,
        "steps": model["steps"],
        "train_seconds": model["train_seconds"],
        "useful_seconds_step_log": useful_log,
        "billed_node_seconds": billed,
        "elapsed_seconds": windows[-1][1] - windows[0][0],
        "tail_s": windows[-1][1] - max(ended for _, _, ended, _ in rows),
        "preempted_run_seconds": [
            e["runSeconds"] for e in sorted(events, key=lambda e: e["epoch"])
        ],
        "plan": {"mean_s": MTBF_S / nodes, "max_count": MAX_PREEMPTIONS, **(plan or {})},
        "preemptions": preempted,
        "unannounced": sum(1 for e in events if not e["noticeSeconds"]),
        "plan_fired": fired["fired"],
        "restart_gaps_s": gaps,
        "startup_s": startups,
        "step_metric": {
            "goodput": metrics["goodput"],
            "useful_node_seconds": metrics["useful_node_seconds"],
            "billed_node_seconds": metrics["billed_node_seconds"],
        },
        "checkpoint_policy": model["checkpoint_policy"],
    }


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A case's figures over its runs (one per seed): goodput per seed and mean for the
    run-record billing and the elapsed billing, the step's metric, preemptions (and how many
    came unannounced), restart gaps, and the mean time per training step (above
    ``--step-seconds`` when the machine is busy)."""

    def mean(values: Sequence[float]) -> float | None:
        return statistics.fmean(values) if values else None

    billed = [r["train_seconds"] * r.get("nodes", 1) / r["billed_node_seconds"] for r in runs]
    elapsed = [r["train_seconds"] / r["elapsed_seconds"] for r in runs]
    metric = [r["step_metric"]["goodput"] for r in runs]
    gaps = [g for r in runs for g in r["restart_gaps_s"]]
    startups = [s for r in runs for s in r["startup_s"] if s is not None]
    return {
        "goodput_per_seed": billed,
        "goodput_mean": statistics.fmean(billed),
        "goodput_elapsed_per_seed": elapsed,
        "goodput_elapsed_mean": statistics.fmean(elapsed),
        "step_metric_per_seed": metric,
        "step_metric_mean": statistics.fmean(metric),
        "preemptions_per_seed": [r["preemptions"] for r in runs],
        "preemptions": sum(r["preemptions"] for r in runs),
        "unannounced_per_seed": [r.get("unannounced", 0) for r in runs],
        "restart_gap_mean_s": mean(gaps),
        "restart_gap_max_s": max(gaps) if gaps else None,
        "startup_mean_s": mean(startups),
        "step_time_mean_s": statistics.fmean(r["train_seconds"] / r["steps"] for r in runs),
    }


def trace_of_run(run: dict[str, Any], block_s: float, persist_s: float) -> replay.Trace | None:
    """The replay trace of one run's record (``benchmarks.goodput.replay``): the plan of its
    seed, its mean start-up and restart gap, its tail, the wall time of its steps (the step
    log's) to do, its useful time (``train_seconds``) to count, and the save measured
    (``block_s``, ``persist_s``); None for a record without the tail (an older result file)."""
    if run.get("tail_s") is None or "plan" not in run:
        return None
    startups = [s for s in run["startup_s"] if s is not None]
    gaps = run["restart_gaps_s"]
    plan = run["plan"]
    return replay.Trace.from_plan(
        run["seed"],
        plan["mean_s"],
        plan["max_count"],
        plan.get("unannounced_share", 0.0),
        work_s=run["useful_seconds_step_log"],
        startup_s=statistics.fmean(startups) if startups else 0.0,
        gap_s=statistics.fmean(gaps) if gaps else RESTART_S,
        tail_s=run["tail_s"],
        notice_s=NOTICE_S,
        block_s=block_s,
        persist_s=persist_s,
        step_s=run["useful_seconds_step_log"] / run["steps"],
        mtbf_s=plan["mean_s"],
        useful_s=run["train_seconds"],
    )
