"""Benchmark: the training step's API calls per job-hour and its state-change detection time.

Measured on the Vertex emulator (``benchmarks.polling.emulated``), time scaled x1/60: the
training step watches a Spot training job under seeded Poisson preemptions (M = 1 h, 30 s
notice, 2 min requeue), with every Vertex request and every Cloud Storage read counted through
the modelled FUSE cache (60 s), in both channels: the beacon file, and the job's Slurm comment
(the beacon folder not writable). The goals are judged on these runs.

Simulated beside them, at full scale on a fake clock (``benchmarks.polling.sim``), clearly
labelled and judged on nothing: seeded 4 h jobs of four families, polled by the same plan (its
beacon reads counted) and by the fixed 20 s poller the step used before, and many jobs on one
cluster sharing one list call.

Writes ``polling.json`` (every number, the command and its wall time) and ``polling.md``.

Usage::

    python -m benchmarks.polling.run [--out benchmarks/results] [--runs 6] [--steps 3000]
        [--step-seconds 0.02] [--parallel 3] [--seeds 30] [--shared-jobs 8]
        [--first-seed 0] [--variant NAME ...] [--name polling]

``--first-seed`` runs other preemption plans than the committed results' (seeds ``S .. S +
runs - 1``), to check that the goals hold off the seeds they were first measured on;
``--variant`` runs only the named channel variants (``emulated.VARIANTS``, their labels as
words: ``push-25-unannounced``); ``--name`` names
the results files.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import json
import multiprocessing
import os
import pathlib
import platform
import random
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import results_files
from benchmarks.polling import emulated, goals, report, sim
from vsp.components.runtime.training import poll_plan, progress_feed

DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "results"
NAME = "polling"
POLL_SECONDS = 20.0
SIM_ROWS = (
    ("spot", poll_plan.BEACON),
    ("spot", poll_plan.COMMENT),
    ("hard-kill", poll_plan.BEACON),
    ("beacon-lost", poll_plan.BEACON),
    ("no-beacon", poll_plan.BEACON),
)


def _latencies(found: list[tuple[float, bool]]) -> dict[str, Any]:
    latencies = [d for d, _ in found]
    return {
        "changes": len(found),
        "missed_changes": sum(1 for _, missed in found if missed),
        "latency_p50": sim.percentile(latencies, 50),
        "latency_p95": sim.percentile(latencies, 95),
        "latency_max": max(latencies),
    }


def simulate(seeds: int, shared_jobs: int) -> dict[str, Any]:
    """The simulated rows (plan per family and channel, and the fixed poller) and the shared
    cluster; calls per job-hour count Vertex calls and beacon reads."""
    settings = poll_plan.PlanSettings.for_poll_seconds(POLL_SECONDS)
    rows = []
    for family, channel in SIM_ROWS:
        rates, vertex, found = [], [], []
        for seed in range(seeds):
            trace = sim.make_trace(random.Random(f"{family}-{seed}"), family)
            calls, reads = sim.run_plan(trace, settings, channel)
            rates.append((len(calls) + reads) * 3600.0 / trace.end)
            vertex.append(len(calls) * 3600.0 / trace.end)
            found += sim.detections(trace, calls)
        rows.append(
            {
                "family": family,
                "poller": f"plan, {channel}",
                "calls_per_job_hour_mean": sum(rates) / len(rates),
                "calls_per_job_hour_max": max(rates),
                "vertex_calls_per_job_hour_mean": sum(vertex) / len(vertex),
                **_latencies(found),
            }
        )
    rates, found = [], []
    for seed in range(seeds):
        trace = sim.make_trace(random.Random(f"spot-{seed}"), "spot")
        calls = sim.run_fixed(trace, random.Random(f"jitter-{seed}"), POLL_SECONDS)
        rates.append(len(calls) * 3600.0 / trace.end)
        found += sim.detections(trace, calls)
    rows.append(
        {
            "family": "spot",
            "poller": "fixed 20 s, no beacon",
            "calls_per_job_hour_mean": sum(rates) / len(rates),
            "calls_per_job_hour_max": max(rates),
            "vertex_calls_per_job_hour_mean": sum(rates) / len(rates),
            **_latencies(found),
        }
    )
    traces = [sim.make_trace(random.Random(f"shared-{i}"), "spot") for i in range(shared_jobs)]
    list_calls, reads, found = sim.run_shared(traces, settings)
    job_hours = sum(t.end for t in traces) / 3600.0
    shared = {
        "jobs": shared_jobs,
        "list_calls": list_calls,
        "beacon_reads": reads,
        "calls_per_job_hour_mean": (list_calls + reads) / job_hours,
        **_latencies(found),
    }
    return {"seeds": seeds, "rows": rows, "shared": shared}


def measure(
    runs: int,
    steps: int,
    step_s: float,
    parallel: int,
    first_seed: int = 0,
    variants: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """``runs`` scaled runs per variant on the emulator (seeds ``first_seed`` on), ``parallel``
    at once (each in a spawned process with its own emulator), summarized per variant.

    Args:
        variants: Labels of ``emulated.VARIANTS`` to run; None runs them all.
    """
    chosen = [v for v in emulated.VARIANTS if variants is None or v[0] in variants]
    seeds = range(first_seed, first_seed + runs)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(parallel, mp_context=context) as pool:
        jobs = {
            (label, seed): pool.submit(emulated.run_one, channel, seed, steps, step_s, share)
            for seed in seeds
            for label, channel, share in chosen
        }
        found = {key: job.result() for key, job in jobs.items()}
    summaries = []
    for label, _, share in chosen:
        done = [found[label, seed] for seed in seeds]
        hours = sum(r["scaled_job_hours"] for r in done)
        vertex = sum(r["vertex_calls"] for r in done)
        storage = sum(r["storage_calls"] for r in done)
        pubsub = sum(r.get("pubsub_calls", 0) for r in done)
        seconds = [
            d["seconds"] * emulated.SCALE
            for r in done
            for d in r["detections"]
            if d["seconds"] is not None
        ]
        never = sum(1 for r in done for d in r["detections"] if d["seconds"] is None)
        errors = [
            (r["goodput"]["metric"] - r["goodput"]["truth"]) / r["goodput"]["truth"]
            for r in done
            if r.get("goodput") and r["goodput"]["metric"] is not None
        ]
        summaries.append(
            {
                "channel": label,
                "unannounced_share": share,
                "runs": done,
                "scaled_job_hours": hours,
                "vertex_calls": vertex,
                "storage_calls": storage,
                "pubsub_calls": pubsub,
                "calls_per_job_hour": (vertex + storage + pubsub) / hours,
                "vertex_calls_per_job_hour": vertex / hours,
                "storage_calls_per_job_hour": storage / hours,
                "pubsub_calls_per_job_hour": pubsub / hours,
                "preemptions": sum(r["preemptions"] for r in done),
                "changes": len(seconds) + never,
                "never_seen": never,
                "latency_p50": sim.percentile(seconds, 50),
                "latency_p95": sim.percentile(seconds, 95),
                "latency_max": max(seconds) if seconds else None,
                "channels_seen": sorted({c for r in done for c in r["channels_seen"]}),
                "goodput_errors": errors,
            }
        )
    return summaries


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point: measures, simulates, and writes the JSON and Markdown."""
    prog = "python -m benchmarks.polling.run"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--runs", type=int, default=6, help="emulated runs per channel")
    parser.add_argument("--steps", type=int, default=3000, help="trainer steps per run")
    parser.add_argument("--step-seconds", type=float, default=0.02, help="seconds per step")
    parser.add_argument("--parallel", type=int, default=3, help="emulated runs at once")
    parser.add_argument("--seeds", type=int, default=30, help="simulated jobs per row")
    parser.add_argument(
        "--shared-jobs", type=int, default=8, help="simulated jobs sharing one list call"
    )
    parser.add_argument(
        "--first-seed", type=int, default=0, help="the first emulated run's seed (default 0)"
    )
    slugs = {goals.slug(label): label for label, _, _ in emulated.VARIANTS}
    parser.add_argument(
        "--variant",
        action="append",
        choices=list(slugs),
        help="a channel variant to run, repeatable (default: all; push-25-unannounced is push "
        "with a quarter of the preemptions unannounced)",
    )
    parser.add_argument(
        "--name", default=NAME, help=f"results file name, without extension (default {NAME})"
    )
    parser.add_argument(
        "--from-json", action="store_true", help="only recompute the goals and the Markdown"
    )
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9_-]+", args.name):
        parser.error(f"--name {args.name!r}: use letters, digits, '_' and '-' only")
    if args.from_json:
        if not (args.out / f"{args.name}.json").is_file():
            parser.error(f"--from-json: no {args.out / args.name}.json; run the benchmark first")
        results = json.loads((args.out / f"{args.name}.json").read_text())
        results["goals"] = goals.goals(results["emulated"], results["simulated"])
        results_files.write(args.out, args.name, results, report.markdown(results))
        return 0
    if min(args.runs, args.steps, args.parallel, args.seeds, args.shared_jobs) < 1:
        parser.error("--runs, --steps, --parallel, --seeds and --shared-jobs must be >= 1")
    if args.step_seconds <= 0:
        parser.error("--step-seconds must be > 0")
    if args.first_seed < 0:
        parser.error("--first-seed must be >= 0")
    variants = [slugs[v] for v in args.variant] if args.variant else None
    started = time.monotonic()
    summaries = measure(
        args.runs, args.steps, args.step_seconds, args.parallel, args.first_seed, variants
    )
    simulated = simulate(args.seeds, args.shared_jobs)
    settings = emulated.settings()
    full = poll_plan.PlanSettings.for_poll_seconds(POLL_SECONDS)
    extra = "".join(f" --variant {v}" for v in args.variant or ())
    if args.first_seed:
        extra += f" --first-seed {args.first_seed}"
    if args.name != NAME:
        extra += f" --name {args.name}"
    results = {
        "name": args.name,
        "command": f"{prog} --runs {args.runs} --steps {args.steps} --step-seconds "
        f"{args.step_seconds:g} --parallel {args.parallel} --seeds {args.seeds} --shared-jobs "
        f"{args.shared_jobs}{extra}",
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_seconds": round(time.monotonic() - started, 1),
        "settings": full.__dict__ | {"heartbeat_seconds": full.heartbeat_seconds},
        "scaled_settings": settings.__dict__ | {"scale": emulated.SCALE},
        "feed": dataclasses.asdict(progress_feed.FeedSettings()),
        "emulated": summaries,
        "simulated": simulated,
    }
    results["goals"] = goals.goals(summaries, simulated)
    results_files.write(args.out, args.name, results, report.markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
