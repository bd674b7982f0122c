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
from benchmarks.polling import emulated, report, sim
from vsp.components.runtime.training import poll_plan, progress_feed

DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "results"
NAME = "polling"
POLL_SECONDS = 20.0
GOAL_CALLS, GOAL_P95 = 60.0, 30.0
GOAL_GOODPUT = 0.02  # the goodput metric benchmark's goal, here under the poll plan
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


def pull_p95_floor(preemptions: int, changes: int, looks_per_hour: float = GOAL_CALLS) -> float:
    """The least p95 detection (s) any pull schedule of ``looks_per_hour`` looks can reach when
    ``preemptions`` of the ``changes`` come at memoryless times, even if every other change
    were seen at once.

    With looks splitting an hour into gaps ``L_i`` (``sum L_i = 3600``), a change at a uniform
    time waits more than ``d`` with probability ``sum max(0, L_i - d) / 3600 >= 1 - n d / 3600``
    (convexity; equal gaps reach it). The p95 is at most ``d`` only if the preemptions' share
    ``q`` of the changes times that probability is at most 0.05:
    ``d >= 3600 / n * (1 - 0.05 / q)`` (0 when ``q <= 0.05``).
    """
    share = preemptions / changes if changes else 0.0
    if share <= 0.05:
        return 0.0
    return 3600.0 / looks_per_hour * (1.0 - 0.05 / share)


def _slug(label: str) -> str:
    """A variant's label as a word: ``push, 25% unannounced`` -> ``push-25-unannounced``."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def _silent_floor(row: dict[str, Any], setting: str) -> list[dict]:
    """The lower bound of a push channel's p95 when some preemptions send no message.

    No message tells an unannounced preemption, so only a look (a Vertex call or a Cloud
    Storage read) sees it, and each Pub/Sub call the channel spends waiting for messages is one
    look fewer within the budget: ``pull_p95_floor`` over the unannounced preemptions with the
    looks left, ``GOAL_CALLS`` minus the channel's measured Pub/Sub calls per job-hour, every
    other change seen at once. Empty when every preemption was announced.
    """
    silent = sum(r.get("unannounced", 0) for r in row["runs"])
    if not silent:
        return []
    looks = max(GOAL_CALLS - row["pubsub_calls_per_job_hour"], 1.0)
    floor = pull_p95_floor(silent, row["changes"], looks)
    return [
        {
            "id": f"p95-floor-{_slug(row['channel'])}",
            "goal": f"lower bound: the p95 any schedule of the {looks:.1f} looks per job-hour "
            f"left beside this channel's Pub/Sub calls reaches on this change mix, every change "
            f"but the unannounced preemptions seen at once (no target; {setting})",
            "measured": round(floor, 1),
            "where": f"{silent} of {row['changes']} changes are unannounced preemptions at "
            "memoryless times",
            "met": None,
        }
    ]


def goals(summaries: Sequence[dict[str, Any]], simulated: dict[str, Any]) -> list[dict]:
    """The goals on the emulated runs (both channels), then the simulated figures (no target)."""
    found = []
    for row in summaries:
        slug = _slug(row["channel"])
        setting = (
            f"{row['channel']} channel, emulator x1/60, {row['scaled_job_hours']:.2f} scaled "
            f"job-hours, {row['preemptions']} preemptions"
        )
        if row.get("unannounced_share"):
            unannounced = sum(r.get("unannounced", 0) for r in row["runs"])
            setting += f", {unannounced} of them unannounced"
        found.append(
            {
                "id": f"calls-emulated-{slug}",
                "goal": f"API calls (Vertex + Cloud Storage reads + Pub/Sub) per job-hour <= "
                f"{GOAL_CALLS:g} ({setting})",
                "measured": round(row["calls_per_job_hour"], 1),
                "where": f"{row['vertex_calls_per_job_hour']:.1f} Vertex + "
                f"{row['storage_calls_per_job_hour']:.1f} Cloud Storage + "
                f"{row.get('pubsub_calls_per_job_hour', 0.0):.1f} Pub/Sub",
                "met": row["calls_per_job_hour"] <= GOAL_CALLS,
            }
        )
        found.append(
            {
                "id": f"p95-emulated-{slug}",
                "goal": f"p95 state-change detection <= {GOAL_P95:g} s ({setting})",
                "measured": round(row["latency_p95"], 1),
                "where": f"{row['changes']} changes, {row['never_seen']} never seen",
                "met": row["latency_p95"] <= GOAL_P95 and row["never_seen"] == 0,
            }
        )
        errors = row.get("goodput_errors") or []
        if errors:
            worst = max(errors, key=abs)
            found.append(
                {
                    "id": f"goodput-emulated-{slug}",
                    "goal": f"the step's goodput within {GOAL_GOODPUT:.0%} of the truth on every "
                    f"run under the poll plan ({setting})",
                    "measured": f"worst {worst:+.2%} over {len(errors)} runs",
                    "where": "truth: the trainer's step log and the emulator's run records",
                    "met": all(abs(e) <= GOAL_GOODPUT for e in errors)
                    and len(errors) == len(row["runs"]),
                }
            )
        if row["channel"].startswith("push"):
            found += _silent_floor(row, setting)
            continue  # the floor of pull schedules: the push channel is not one
        floor = pull_p95_floor(row["preemptions"], row["changes"])
        found.append(
            {
                "id": f"p95-floor-{slug}",
                "goal": f"lower bound: the p95 any pull schedule of {GOAL_CALLS:g} looks per "
                f"job-hour reaches on this change mix, every change but the preemptions seen at"
                f" once (no target; {setting})",
                "measured": round(floor, 1),
                "where": f"{row['preemptions']} of {row['changes']} changes are preemptions at "
                "memoryless times",
                "met": None,
            }
        )
    for row in simulated["rows"]:
        if row["poller"].startswith("plan") and row["family"] == "spot":
            found.append(
                {
                    "id": f"simulated-{row['poller'].split(', ')[1]}",
                    "goal": f"simulated only (full scale, fake clock, {simulated['seeds']} "
                    f"jobs): calls per job-hour and p95 s, {row['poller']} (no target)",
                    "measured": round(row["calls_per_job_hour_mean"], 1),
                    "where": f"p95 {row['latency_p95']:.1f} s",
                    "met": None,
                }
            )
    return found


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
    slugs = {_slug(label): label for label, _, _ in emulated.VARIANTS}
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
        results["goals"] = goals(results["emulated"], results["simulated"])
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
    results["goals"] = goals(summaries, simulated)
    results_files.write(args.out, args.name, results, report.markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
