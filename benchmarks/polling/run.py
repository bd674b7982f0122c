"""Benchmark: Vertex calls per job-hour and state-change detection latency of the poll plan.

Simulates seeded Spot training jobs (``polling_sim``: M = 1 h between preemptions, 30 s notice,
requeue in place, 4 h of work) at full scale on a fake clock, and polls each twice: with the
project's poll plan (``training.poll_plan``, settings from ``poll_seconds=20``) and with the
fixed 20 s poller the step used before. Writes ``polling.json`` (every number) and
``polling.md`` (tables, the machine and date, and the goals met or not met).

Usage::

    python -m benchmarks.polling.run [--out benchmarks/results] [--seeds N] [--shared-jobs K]
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import random
import sys
from collections.abc import Sequence

from benchmarks import results_files
from benchmarks.polling import sim
from vsp.components.runtime.training import poll_plan

DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "results"
DEFAULT_SEEDS = 30
DEFAULT_SHARED_JOBS = 8
POLL_SECONDS = 20.0
GOAL_CALLS, GOAL_P95 = 60.0, 30.0
GOAL_FAMILIES = ("spot", "hard-kill")


def _summary(rates: list[float], found: list[tuple[float, bool]]) -> dict:
    latencies = [d for d, _ in found]
    return {
        "calls_per_job_hour_mean": sum(rates) / len(rates),
        "calls_per_job_hour_max": max(rates),
        "changes": len(found),
        "missed_changes": sum(1 for _, missed in found if missed),
        "latency_p50": sim.percentile(latencies, 50),
        "latency_p95": sim.percentile(latencies, 95),
        "latency_max": max(latencies),
    }


def run(seeds: int, shared_jobs: int) -> dict:
    """Every family with both pollers, the shared-cluster case, and the goals."""
    settings = poll_plan.PlanSettings.for_poll_seconds(POLL_SECONDS)
    rows = []
    for family in sim.FAMILIES:
        for poller in ("plan", "fixed-20s"):
            rates, found = [], []
            for seed in range(seeds):
                trace = sim.make_trace(random.Random(f"{family}-{seed}"), family)
                if poller == "plan":
                    calls = sim.run_plan(trace, settings)
                else:
                    calls = sim.run_fixed(trace, random.Random(f"jitter-{seed}"), POLL_SECONDS)
                rates.append(len(calls) * 3600.0 / trace.end)
                found += sim.detections(trace, calls)
            rows.append({"family": family, "poller": poller, **_summary(rates, found)})
    traces = [sim.make_trace(random.Random(f"shared-{i}"), "spot") for i in range(shared_jobs)]
    list_calls, found = sim.run_shared(traces, settings)
    job_hours = sum(t.end for t in traces) / 3600.0
    shared = {
        "jobs": shared_jobs,
        "list_calls": list_calls,
        **_summary([list_calls / job_hours], found),
    }
    goals = []
    for row in rows:
        if row["poller"] == "plan" and row["family"] in GOAL_FAMILIES:
            goals.append(
                {
                    "id": f"calls-{row['family']}",
                    "what": f"Vertex calls per job-hour <= {GOAL_CALLS:g} ({row['family']})",
                    "measured": row["calls_per_job_hour_mean"],
                    "met": row["calls_per_job_hour_mean"] <= GOAL_CALLS,
                }
            )
            goals.append(
                {
                    "id": f"p95-{row['family']}",
                    "what": f"p95 state-change detection <= {GOAL_P95:g} s ({row['family']})",
                    "measured": row["latency_p95"],
                    "met": row["latency_p95"] <= GOAL_P95,
                }
            )
    return {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seeds": seeds,
        "settings": settings.__dict__ | {"heartbeat_seconds": settings.heartbeat_seconds},
        "rows": rows,
        "shared": shared,
        "goals": goals,
    }


def markdown(results: dict) -> str:
    """The results as Markdown: goals, then every family and poller, then the shared case."""
    s = results["settings"]
    lines = [
        "# Polling: Vertex calls per job-hour and detection latency",
        "",
        f"`python -m benchmarks.polling.run --seeds {results['seeds']}` on {results['machine']}, "
        f"{results['date']} (all numbers: `polling.json`).",
        "",
        f"Simulated at full scale on a fake clock: {results['seeds']} seeded jobs per family, "
        "each 4 h of work, preemptions every M = 1 h on average with a 30 s notice, requeue held "
        "121 s + 15-30 s. Detection latency: from a Vertex-visible state change (PENDING, "
        "RUNNING, SUCCEEDED) to the first Vertex call that sees it; *missed*: the state had "
        "changed again before that call. Poll plan settings (`PlanSettings.for_poll_seconds(20)`"
        f"): beacon read {s['beacon_seconds']:g} s, cap {s['cap_seconds']:g} s, expect "
        f"{s['expect_seconds']:g} s, stale {s['stale_seconds']:g} s, fallback "
        f"{s['fallback_seconds']:g} s, pending {s['pending_seconds']:g} s, job heartbeat "
        f"{s['heartbeat_seconds']:g} s.",
        "",
        "## Goals",
        "",
        "| goal | measured | met |",
        "|---|---|---|",
    ]
    for goal in results["goals"]:
        state = "met" if goal["met"] else "**not met**"
        lines.append(f"| {goal['what']} | {goal['measured']:.1f} | {state} |")
    lines += [
        "",
        "## Per family",
        "",
        "| family | poller | calls / job-hour (mean) | (max) | p50 s | p95 s | max s | "
        "changes | missed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        lines.append(
            f"| {row['family']} | {row['poller']} | {row['calls_per_job_hour_mean']:.1f} | "
            f"{row['calls_per_job_hour_max']:.1f} | {row['latency_p50']:.1f} | "
            f"{row['latency_p95']:.1f} | {row['latency_max']:.1f} | {row['changes']} | "
            f"{row['missed_changes']} |"
        )
    shared = results["shared"]
    lines += [
        "",
        "Families: *spot* every preemption has its notice; *hard-kill* a quarter of them have "
        "none (no notice, no exiting: found when the beacon goes stale); *beacon-lost* the "
        "beacon stops in the first hour while the job runs on (the plan falls back to fixed "
        "polling); *no-beacon* the step never sees a beacon (checkpoints off Cloud Storage).",
        "",
        "## Many jobs on one cluster",
        "",
        f"{shared['jobs']} *spot* jobs on one cluster, one list call (`GET /slurm/v0.0.42/jobs`) "
        f"per cycle for every job that wants one (`poll_plan.SharedPlan`): {shared['list_calls']}"
        f" list calls, {shared['calls_per_job_hour_mean']:.1f} calls per job-hour, p95 "
        f"detection {shared['latency_p95']:.1f} s, {shared['missed_changes']} missed of "
        f"{shared['changes']}. The training step supervises one job, so it does not use this "
        "yet; the figure is what a cluster-wide poller would reach.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point: runs the benchmark and writes the JSON and Markdown results."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.polling.run", description=__doc__)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="jobs per family")
    parser.add_argument(
        "--shared-jobs", type=int, default=DEFAULT_SHARED_JOBS, help="jobs on the shared cluster"
    )
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.shared_jobs < 1:
        parser.error("--seeds and --shared-jobs must be >= 1")
    results = run(args.seeds, args.shared_jobs)
    results_files.write(args.out, "polling", results, markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
