"""The goodput metric against the truth on seeded, preempted runs of the example trainer.

``python -m benchmarks.goodput.metric [--seeds 1,3,4,5,6,7] [--out benchmarks/results]
[--name goodput_metric]``

For each seed, an in-process Vertex emulator (Slurm timings of the tests: 0.4 s notice, 0.1 s
requeue hold) runs the training step (``train_on_cluster``, polls every 0.05-0.1 s) on the
example trainer (240 steps of about 0.04 s, a periodic save every 30 steps, ``--step-log``)
while the emulator preempts the job at Poisson times of mean 2.5 s drawn from the seed (at most
3). The metric is what the step reports; the truth comes from records, never from sleeps:

* useful seconds: from the trainer's step log, the time of the last run of each step (the run
  the model kept), from its start to its end;
* billed seconds: from the emulator's record of each run: a preempted run holds its node from
  its start until its notice ends, the last one from its start to its end.

Writes ``goodput_metric.json`` and ``goodput_metric.md`` (machine, date, per seed the metric,
the truth and the error; the goal: every seed within 2% of the truth, met / not met).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import requests

import vsp
from vsp.components.runtime.cluster import resource, rules
from vsp.components.runtime.core import polling, rest
from vsp.components.runtime.slurm import api
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.training import goodput
from vsp.components.runtime.training.backends import slurm
from vsp.examples.trainer.step_log import read_step_log
from vsp.vertex_emulator import config, server

PROJECT, LOCATION, CLUSTER = "bench-project", "us-central1", "goodput"
CLUSTER_BODY = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "cluster_full.yaml"
POLL = polling.Backoff(initial=0.05, maximum=0.1, jitter=0)
STEPS, STEP_SECONDS, SAVE_EVERY, MEAN_SECONDS, PREEMPTIONS = 240, 0.04, 30, 2.5, 3
GOAL = 0.02
SETTINGS = config.EmulatorSettings(
    provisioning_delay_seconds=0.05,
    update_delay_seconds=0.1,
    scale_up_delay_seconds=0.1,
    delete_delay_seconds=0.1,
    tick_interval_seconds=0.05,
    slurm_kill_wait_seconds=0.3,
    slurm_preempt_notice_seconds=0.4,
    slurm_requeue_delay_seconds=0.1,
    slurm_node_recovery_seconds=0.3,
)


def true_useful_seconds(step_log: pathlib.Path, steps: int = STEPS) -> float:
    """Seconds spent on the run of each step that the model kept (its last run), from the
    step's start until the loop began the next step or a checkpoint save (the loop's own work
    between two updates is the step's; a save's time is no step's: ``StepLog``)."""
    last: dict[int, tuple[float, float]] = {}
    for step, began, ended, _ in read_step_log(step_log):
        last[step] = (began, ended)
    if sorted(last) != list(range(1, steps + 1)):
        raise AssertionError(f"{step_log} does not hold steps 1..{steps}")
    return sum(ended - began for began, ended in last.values())


def true_billed_seconds(
    emulator: server.EmulatorServer, cluster: str, job_id: str
) -> tuple[float, int]:
    """Node-seconds the emulator held nodes for the job, and how many runs were preempted."""
    events = [e for e in emulator.app.slurm.preemptions(cluster) if str(e["jobId"]) == job_id]
    billed = sum((e["runSeconds"] + e["noticeSeconds"]) * len(e["nodes"]) for e in events)
    job = next(j for j in emulator.app.slurm.jobs(cluster) if str(j["job_id"]) == job_id)
    billed += (job["end_time"] - job["start_time"]) * len(job.get("last_nodes") or [1])
    return billed, len(events)


def start_emulator(
    state_dir: pathlib.Path, notice: float, settings: config.EmulatorSettings = SETTINGS
) -> server.EmulatorServer:
    """An in-process emulator (``notice`` s from SIGTERM to SIGKILL on a Spot preemption;
    ``settings`` for the rest) with a running cluster the caller may submit to. It sets
    ``VERTEX_EMULATOR_HOST`` for this process, so one emulator per process at a time."""
    settings = settings.replace(slurm_preempt_notice_seconds=notice)
    emulator = server.EmulatorServer(state_dir, port=0, settings=settings)
    emulator.start()
    os.environ["VERTEX_EMULATOR_HOST"] = emulator.address
    body = rules.load_cluster_spec(CLUSTER_BODY).to_request_body()
    body["orchestratorSpec"]["slurmSpec"]["prologBashScripts"] = ["#!/bin/bash\ntrue\n"]
    parent = f"projects/{PROJECT}/locations/{LOCATION}"
    url = f"{emulator.base_url}/v1beta1/{parent}/modelDevelopmentClusters"
    created = requests.post(url, params={"model_development_cluster_id": CLUSTER}, json=body)
    created.raise_for_status()
    deadline = time.monotonic() + 30
    while (
        not requests.get(f"{emulator.base_url}/v1beta1/{created.json()['name']}").json().get("done")
    ):
        if time.monotonic() > deadline:
            raise RuntimeError("the emulated cluster did not come up in 30 s")
        time.sleep(0.05)
    ref = resource.ClusterRef(PROJECT, LOCATION, CLUSTER)
    vertex = rest.VertexRestClient(LOCATION)
    client = api.SlurmClient(vertex, ref)
    client.ensure_association("ml", client.whoami(), ["spot", "ondemand"])
    return emulator


def trainer_training(
    seed: int,
    work: pathlib.Path,
    *,
    steps: int = STEPS,
    step_seconds: float = STEP_SECONDS,
    save: Sequence[str] = ("--checkpoint-every-steps", str(SAVE_EVERY)),
) -> slurm.SlurmTraining:
    """The example trainer's run for ``seed`` in ``work``, writing its step log there.

    Args:
        seed: The trainer's seed.
        work: Host folder of the step log, checkpoints and model.
        steps: Training steps.
        step_seconds: Simulated seconds of work per step.
        save: The trainer's checkpoint flags (default: a periodic save every 30 steps).
    """
    command = [sys.executable, "-m", "vsp.examples.trainer", "--seed", str(seed)]
    command += ["--samples", "256", "--steps", str(steps)]
    command += ["--step-seconds", str(step_seconds), "--keep", "1", *save]
    command += ["--step-log", str(work / "steps.log")]
    return slurm.SlurmTraining(
        command=command,
        environment=trainer_environment(),
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
    )


def trainer_environment() -> dict[str, str]:
    """``PYTHONPATH`` for the trainer job: the folder this process imports ``vsp`` from first.

    Slurm gives a job none of the step's environment, so without it the trainer would import
    whatever ``vsp`` the interpreter finds by itself (e.g. another checkout's editable install)
    and the benchmark would measure other code than its own.
    """
    here = str(pathlib.Path(vsp.__file__).resolve().parents[1])
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != here]
    return {"PYTHONPATH": os.pathsep.join([here, *rest])}


def run_seed(seed: int, root: pathlib.Path, notice: float = 0.4) -> dict[str, Any]:
    """One preempted run; the metric and the truth."""
    emulator = start_emulator(root / "emulator", notice)
    try:
        emulator.app.slurm.set_preemption_plan(
            CLUSTER, mode="poisson", mean_seconds=MEAN_SECONDS, seed=seed, max_count=PREEMPTIONS
        )
        work = root / "shared"
        training = trainer_training(seed, work)
        outcome = train_on_cluster.train_on_cluster(
            project=PROJECT,
            location=LOCATION,
            cluster_id=CLUSTER,
            training=training,
            spot_partition="spot",
            run_key=f"goodput-{seed}",
            poll_backoff=POLL,
            timeout_seconds=600,
            max_preemptions=PREEMPTIONS + 2,
        )
        [job_id] = outcome.result.job_ids
        billed, preempted = true_billed_seconds(emulator, CLUSTER, job_id)
    finally:
        emulator.app.slurm.shutdown()
        emulator.stop()
    useful = true_useful_seconds(work / "steps.log")
    metrics = outcome.metrics
    truth = useful / billed
    return {
        "seed": seed,
        "notice_seconds": notice,
        "preemptions": preempted,
        "metric": metrics["goodput"],
        "truth": round(truth, 4),
        "error": round((metrics["goodput"] - truth) / truth, 4),
        "useful_seconds": {"metric": metrics["useful_node_seconds"], "truth": round(useful, 3)},
        "billed_seconds": {"metric": metrics["billed_node_seconds"], "truth": round(billed, 3)},
        "figures": {name: metrics[f"{name}_node_seconds"] for name in goodput.FIGURES},
    }


def goals(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The goal per notice length, in the form ``benchmarks.summary`` reads."""
    found = []
    for notice, met in report["goal_met"].items():
        runs = [r for r in report["runs"] if f"{r['notice_seconds']:g}" == notice]
        worst = max(runs, key=lambda r: abs(r["error"]))
        found.append(
            {
                "id": f"goodput-metric-notice-{notice}",
                "goal": f"goodput metric within 2% of the truth on every seed ({notice} s notice)",
                "measured": f"worst {worst['error']:+.2%} over {len(runs)} seeds "
                f"({', '.join(str(r['seed']) for r in runs)})",
                "where": f"seed {worst['seed']}",
                "met": met,
            }
        )
    return found


def markdown(report: dict[str, Any]) -> str:
    """The results as Markdown."""
    lines = [
        "# Goodput metric against the truth",
        "",
        f"{report['date']} on {report['machine']}; `{report['command']}`; "
        f"wall time {report['wall_seconds']:.0f} s.",
        "",
        "Truth: useful seconds from the trainer's step log (the last run of each step, from "
        "its start until the loop began the next step or a save), billed seconds from the "
        "emulator's record "
        "of each run (start to notice end; the last run to its end). Metric: what the training "
        "step reports (Slurm job records, polls and the checkpoint history). Error: (metric - "
        "truth) / truth. Notice 0.4 s is a Spot preemption time-scaled (GCE gives 30 s); "
        "notice 0 kills at once (no notice save), so work is lost and the run's end is only "
        "seen by polling.",
        "",
        "## Goal",
        "",
        "| goal | notice s | measured (worst seed) | result |",
        "|---|---|---|---|",
    ]
    for notice, met in report["goal_met"].items():
        runs = [r for r in report["runs"] if f"{r['notice_seconds']:g}" == notice]
        worst = max(runs, key=lambda r: abs(r["error"]))
        lines.append(
            f"| goodput metric within 2% of the truth on every seed | {notice} | "
            f"{worst['error']:+.2%} (seed {worst['seed']}) | {'met' if met else 'not met'} |"
        )
    lines += [
        "",
        "## Per seed",
        "",
        "| notice s | seed | preemptions | metric | truth | error | useful s metric / truth | "
        "billed s metric / truth |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in report["runs"]:
        useful, billed = run["useful_seconds"], run["billed_seconds"]
        lines.append(
            f"| {run['notice_seconds']:g} | {run['seed']} | {run['preemptions']} "
            f"| {run['metric']:.4f} | {run['truth']:.4f} "
            f"| {run['error']:+.2%} | {useful['metric']:.2f} / {useful['truth']:.2f} | "
            f"{billed['metric']:.2f} / {billed['truth']:.2f} |"
        )
    names = goodput.FIGURES
    lines += ["", "## Where the billed node-seconds went (metric)", ""]
    lines += ["| notice s | seed | " + " | ".join(n.replace("_", " ") for n in names) + " |"]
    lines += ["|---|---|" + "---|" * len(names)]
    for run in report["runs"]:
        cells = " | ".join(f"{run['figures'][n]:.2f}" for n in names)
        lines.append(f"| {run['notice_seconds']:g} | {run['seed']} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the seeds and writes the results; returns the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,3,4,5,6,7", help="comma-separated seeds")
    parser.add_argument(
        "--notices", default="0.4,0", help="comma-separated notice lengths in seconds"
    )
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument(
        "--name", default="goodput_metric", help="results file name (e.g. for other seeds)"
    )
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    notices = [float(s) for s in args.notices.split(",") if s.strip()]
    started = time.monotonic()
    runs = []
    for notice in notices:
        for seed in seeds:
            with tempfile.TemporaryDirectory(prefix=f"goodput-{seed}-") as folder:
                runs.append(run_seed(seed, pathlib.Path(folder), notice))
            print(json.dumps(runs[-1]), flush=True)
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}",
        "command": "python -m benchmarks.goodput.metric --seeds "
        + ",".join(map(str, seeds))
        + " --notices "
        + ",".join(f"{n:g}" for n in notices)
        + ("" if args.name == "goodput_metric" else f" --name {args.name}"),
        "goal": f"|metric - truth| / truth <= {GOAL:.0%} on every run",
        "goal_met": {
            f"{n:g}": all(abs(r["error"]) <= GOAL for r in runs if r["notice_seconds"] == n)
            for n in notices
        },
        "wall_seconds": round(time.monotonic() - started, 1),
        "runs": runs,
    }
    report["goals"] = goals(report)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / f"{args.name}.md").write_text(markdown(report))
    return report


if __name__ == "__main__":
    main()
