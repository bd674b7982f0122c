"""The training step's calls and detection times, measured on the Vertex emulator, time x1/60.

One run is the training step (``train_runner.train_on_cluster`` with the poll plan of
``PlanSettings.for_poll_seconds(20 / 60, cache_seconds=60 / 60)``: every interval, the FUSE
cache included, divided by 60) on an emulated training cluster, running the example trainer
while the emulator's seeded Poisson preemption plan (mean 60 s of running time: M = 1 h)
reclaims the Spot node with a 0.5 s notice (30 s) and requeues the job after 2 s (2 min). The
checkpoints and the job's log are on the emulated Cloud Storage (``$VSP_GCS_FUSE_ROOT``), as in
the example pipelines, so the job keeps its beacon beside the checkpoints; in the ``comment``
channel a file stands where the beacon folder would be, so the job cannot write it and keeps
its beacon in its Slurm comment instead. In the ``push`` channel the job writes the beacon file
and also publishes its state changes to a Pub/Sub topic, and the step waits on a pull of its
subscription between looks (``progress_feed``): the emulator holds a pull that finds nothing
for ``PULL_HOLD_SECONDS`` (90 s, the one figure reported for real Pub/Sub, scaled), and the
step's feed settings (pull timeout, acknowledgement batching, pauses) are scaled too.

Counted: every Vertex request the step sent (``vertex_calls``: submit, lookups and every Slurm
Job API call), every Cloud Storage read the modelled FUSE cache let through
(``storage_calls``: beacon, progress records for the hang rule, log) and every Pub/Sub request
(``pubsub_calls``: the subscription's create and delete, each pull, each acknowledgement), per
scaled job-hour of supervision (the step's supervised seconds x 60 / 3600).

Goodput: the step's own figure (``goodput``, ``billed_node_seconds``) against the truth of
``benchmarks.goodput.metric`` (the trainer's step log, the emulator's run records), so the
metric is checked under the plan's rare Vertex calls too, not only under frequent polls.

Detection: the emulator's state changes of the job (each run's start; each preemption, at its
notice; the end) against the step's observations (``RunResult.observations``: wall time and
what the step knew: Vertex's state and restart count, the beacon's run and state). A change is
detected at the first observation that shows it: a run's start by Vertex RUNNING (or a later
run) or a beacon of that run; a preemption by a higher restart count, a beacon of a later run,
or the run's own ``notice``/``exiting``; the end by SUCCEEDED or the last run's ``exiting``.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import tempfile
from collections.abc import Sequence
from typing import Any

from benchmarks.goodput import metric as goodput_metric
from benchmarks.goodput import scaled_run
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.training import hang, poll_plan, progress_feed, storage_reads

SCALE = 60.0
POLL_SECONDS = 20.0 / SCALE
CACHE_SECONDS = storage_reads.FUSE_TTL_SECONDS / SCALE
CHANNELS = ("beacon", "comment", "push")
TOPIC = f"projects/{goodput_metric.PROJECT}/topics/vsp-progress"
PULL_HOLD_SECONDS = 90.0 / SCALE
_FEED = progress_feed.FeedSettings()
FEED = progress_feed.FeedSettings(
    **{f.name: getattr(_FEED, f.name) / SCALE for f in dataclasses.fields(_FEED)}
)  # every interval of the component's default, scaled
# (label, channel, share of preemptions without notice) measured by ``run.measure``.
VARIANTS = (
    ("beacon", "beacon", 0.0),
    ("comment", "comment", 0.0),
    ("push", "push", 0.0),
    ("push, 25% unannounced", "push", 0.25),
)
# The component's default hang rule (floor 1800 s, 20 steps), scaled: its progress reads count.
HANG_RULE = hang.HangRule(1800.0 / SCALE, 20.0)
ENDING = ("notice", "exiting")


def settings() -> poll_plan.PlanSettings:
    """The component's default plan (``poll_seconds`` 20, FUSE cache 60 s), scaled x1/60."""
    return poll_plan.PlanSettings.for_poll_seconds(POLL_SECONDS, cache_seconds=CACHE_SECONDS)


def changes(events: Sequence[dict[str, Any]], job: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's state changes from the emulator's records: ``{"kind", "run", "time"}``.

    Args:
        events: The job's preemption timeline entries (``epoch``, ``runSeconds``).
        job: The job's record (``start_time``, ``end_time``).
    """
    ordered = sorted(events, key=lambda e: e["epoch"])
    found = []
    for run, event in enumerate(ordered):
        found.append({"kind": "start", "run": run, "time": event["epoch"] - event["runSeconds"]})
        found.append({"kind": "preempted", "run": run, "time": float(event["epoch"])})
    last = len(ordered)
    found.append({"kind": "start", "run": last, "time": float(job["start_time"])})
    found.append({"kind": "end", "run": last, "time": float(job["end_time"])})
    return found


def shows(change: dict[str, Any], seen: dict[str, Any]) -> bool:
    """Whether the observation ``seen`` shows ``change`` (see the module docstring)."""
    run, requeues, outcome = change["run"], seen["requeues"], seen["outcome"]
    restart, state = seen["beacon"] if seen["beacon"] else (-1, "")
    if change["kind"] == "start":
        return (
            (outcome in ("RUNNING", "SUCCEEDED") and requeues >= run)
            or requeues > run
            or restart >= run
        )
    if change["kind"] == "preempted":
        return requeues > run or restart > run or (restart == run and state in ENDING)
    return outcome == "SUCCEEDED" or (restart == run and state == "exiting")


def detections(
    found: Sequence[dict[str, Any]], observations: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each change with the seconds until the step saw it (None: never seen)."""
    ordered = sorted(observations, key=lambda o: o["time"])
    result = []
    for change in found:
        first = next((o for o in ordered if shows(change, o)), None)
        seconds = None if first is None else max(0.0, first["time"] - change["time"])
        result.append({**change, "seconds": seconds})
    return result


def run_one(channel: str, seed: int, steps: int, step_s: float, unannounced: float = 0.0) -> dict:
    """One scaled run of ``steps`` trainer steps in ``channel`` under the plan of ``seed``.

    Args:
        channel: ``beacon`` (the job writes the beacon file), ``comment`` (it cannot) or
            ``push`` (it writes it and publishes its state changes).
        seed: Seed of the preemption plan and of the trainer.
        steps: Training steps.
        step_s: Simulated seconds per step.
        unannounced: Share of preemptions with no notice.

    Returns:
        Counts, supervised seconds, the changes with their detection times, and the channel
        the step saw.
    """
    if channel not in CHANNELS:
        raise ValueError(f"unknown channel {channel!r}; use one of {CHANNELS}")
    with tempfile.TemporaryDirectory(prefix=f"polling-{channel}-{seed}-") as folder:
        root = pathlib.Path(folder)
        gcs = root / "gcs"
        os.environ["VSP_GCS_FUSE_ROOT"] = str(gcs)
        (gcs / "bucket" / "logs").mkdir(parents=True)
        if channel == "comment":
            (gcs / "bucket" / "ckpt.beacon").write_text("not a folder: the job cannot write here")
        emulator = goodput_metric.start_emulator(
            root / "emulator",
            scaled_run.NOTICE_S,
            scaled_run.SETTINGS.replace(pubsub_pull_hold_seconds=PULL_HOLD_SECONDS),
        )
        push = {"progress_topic": TOPIC, "feed_settings": FEED} if channel == "push" else {}
        cluster = goodput_metric.CLUSTER
        try:
            plan: dict[str, Any] = {"unannounced_share": unannounced} if unannounced else {}
            emulator.app.slurm.set_preemption_plan(
                cluster,
                mode="poisson",
                mean_seconds=scaled_run.MTBF_S,
                seed=seed,
                max_count=scaled_run.MAX_PREEMPTIONS,
                **plan,
            )
            training = goodput_metric.trainer_training(
                seed, root / "shared", steps=steps, step_seconds=step_s
            )
            training = dataclasses.replace(
                training,
                checkpoint_dir="gs://bucket/ckpt",
                model_dir="gs://bucket/model",
                standard_output=str(gcs / "bucket" / "logs" / "slurm-%j.out"),
            )
            outcome = train_on_cluster.train_on_cluster(
                project=goodput_metric.PROJECT,
                location=goodput_metric.LOCATION,
                cluster_id=cluster,
                training=training,
                spot_partition="spot",
                run_key=f"polling-{channel}-{seed}",
                poll_settings=settings(),
                hang_rule=HANG_RULE,
                timeout_seconds=3 * steps * step_s + 600,
                max_preemptions=scaled_run.MAX_PREEMPTIONS + 2,
                **push,
            )
            [job_id] = outcome.result.job_ids
            events = [
                e for e in emulator.app.slurm.preemptions(cluster) if str(e["jobId"]) == job_id
            ]
            job = next(j for j in emulator.app.slurm.jobs(cluster) if str(j["job_id"]) == job_id)
            billed, _ = goodput_metric.true_billed_seconds(emulator, cluster, job_id)
            useful = goodput_metric.true_useful_seconds(root / "shared" / "steps.log", steps)
        finally:
            emulator.app.slurm.shutdown()
            emulator.stop()
            os.environ.pop("VSP_GCS_FUSE_ROOT", None)
    result = outcome.result
    observations = result.observations
    return {
        "channel": channel,
        "seed": seed,
        "unannounced_share": unannounced,
        "supervised_seconds": result.seconds,
        "scaled_job_hours": result.seconds * SCALE / 3600.0,
        "vertex_calls": result.vertex_calls,
        "storage_calls": result.storage_calls,
        "pubsub_calls": int(outcome.metrics.get("pubsub_calls", 0)),
        "preemptions": len(events),
        "unannounced": sum(1 for e in events if not e["noticeSeconds"]),
        "channels_seen": sorted({o["channel"] for o in observations}),
        "detections": detections(changes(events, job), observations),
        # The step's goodput under the plan against the truth (``benchmarks.goodput.metric``).
        "goodput": {"metric": outcome.metrics.get("goodput"), "truth": round(useful / billed, 4)},
        "billed_seconds": {"metric": outcome.metrics["billed_node_seconds"], "truth": billed},
    }
