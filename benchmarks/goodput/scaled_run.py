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
* the restart gap (SIGKILL to the next run's start) from the same records, and the start-up
  inside each run (run start to the first step the trainer began, from the step log).

The emulator sets ``VERTEX_EMULATOR_HOST`` for its process, so parallel runs each need their own
process (``benchmarks.goodput.scaled`` uses a spawned process pool).
"""

from __future__ import annotations

import json
import pathlib
import statistics
import tempfile
from collections.abc import Sequence
from typing import Any

from benchmarks.goodput import metric as goodput_metric
from vsp.components.runtime.core import polling
from vsp.components.runtime.steps import train_on_cluster
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


def trainer_flags(extra: Sequence[str]) -> list[str]:
    """A case's save flags plus the scaled prior and notice the trainer's policy is given."""
    return [*extra, "--mtbf-seconds", f"{MTBF_S:g}", "--notice-seconds", f"{NOTICE_S:g}"]


def run_case(
    extra: Sequence[str],
    seed: int,
    steps: int,
    step_s: float,
    plan: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One run of ``steps`` steps of ``step_s`` s under the plan of ``seed``, to completion.

    Args:
        extra: The case's trainer flags (save mode and costs, strategy).
        seed: Seed of the preemption plan and of the trainer.
        steps: Training steps.
        step_s: Simulated seconds per step.
        plan: More preemption plan fields (e.g. ``unannounced_share``).

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
                mean_seconds=MTBF_S,
                seed=seed,
                max_count=MAX_PREEMPTIONS,
                **(plan or {}),
            )
            work = root / "shared"
            training = goodput_metric.trainer_training(
                seed, work, steps=steps, step_seconds=step_s, save=trainer_flags(extra)
            )
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
        metrics_json = json.loads((work / "model" / "metrics.json").read_text())
        begins = [began for _, began, _, _ in read_step_log(work / "steps.log")]
        useful_log = goodput_metric.true_useful_seconds(work / "steps.log", steps)
    windows = run_windows(events, job)
    gaps = restart_gaps(windows)
    startups = startup_delays(windows, begins)
    metrics = outcome.metrics
    return {
        "seed": seed,
        "steps": metrics_json["steps"],
        "train_seconds": metrics_json["train_seconds"],
        "useful_seconds_step_log": useful_log,
        "billed_node_seconds": billed,
        "elapsed_seconds": windows[-1][1] - windows[0][0],
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
        "checkpoint_policy": metrics_json.get("checkpoint_policy", ""),
    }


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A case's figures over its runs (one per seed): goodput per seed and mean for the
    run-record billing and the elapsed billing, the step's metric, preemptions (and how many
    came unannounced), restart gaps, and the mean time per training step (above
    ``--step-seconds`` when the machine is busy)."""

    def mean(values: Sequence[float]) -> float | None:
        return statistics.fmean(values) if values else None

    billed = [r["train_seconds"] / r["billed_node_seconds"] for r in runs]
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
