"""Goodput of checkpoint policies under Spot preemption: full-scale discrete-event simulation.

``python -m benchmarks.goodput.policy [--out benchmarks/results] [--seeds 3] [--work-hours 1000]``

Two settings at real scale (M = 1 h exponential, R = 2 min, 30 s notice, 2% of preemptions
unannounced, 1 s steps): an asynchronous save (2 s snapshot + 24 s background persist) and a
fully blocking 30 s save. Policies: Young/Daly periodic saves plus a save on the notice (the
former default), ours (``NoticeFirst``, the default), and notice-only saves (with and without the
unannounced preemptions; without them it is the bound). Daly's analytic goodput is shown beside.
Writes ``goodput_policy.json`` and ``goodput_policy.md`` (machine, date, goals met or not); the
scaled emulator runs of ``benchmarks.goodput.scaled`` are quoted when their JSON is present.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import statistics
import sys
from collections.abc import Sequence

from benchmarks.goodput import sim

DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "results"
GOAL_ASYNC = 0.95
POLICIES = ("young-daly", "ours", "notice-only")
SCENARIOS = (
    sim.Scenario("async (2 s snapshot + 24 s persist)", block_s=2.0, persist_s=24.0),
    sim.Scenario("blocking (30 s save)", block_s=30.0, persist_s=0.0),
)


def machine() -> dict:
    """Where and when the benchmark ran."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _cell(sc: sim.Scenario, kind: str, seeds: int) -> dict:
    runs = [sim.simulate(sc, kind, seed) for seed in range(seeds)]
    parts = ("restart", "after_notice", "save_block", "lost")
    return {
        "policy": kind,
        "p_no_notice": sc.p_no_notice,
        "goodput_mean": statistics.fmean(r.goodput for r in runs),
        "goodput_per_seed": [r.goodput for r in runs],
        "finished": all(r.finished for r in runs),
        "overhead_share": {
            p: statistics.fmean(getattr(r, p) / r.billed for r in runs) for p in parts
        },
        "preemptions": statistics.fmean(r.preemptions for r in runs),
        "notice_saves_failed": statistics.fmean(r.notice_saves_failed for r in runs),
        "periodic_saves": statistics.fmean(r.periodic_saves for r in runs),
        "interval_s": _interval(sc, kind),
    }


def _interval(sc: sim.Scenario, kind: str) -> float | None:
    policy = sim.make_policy(kind, sc)
    return None if policy is None else policy.interval_s


def run(seeds: int, work_hours: float) -> dict:
    """Every scenario x policy, the analytic Daly value and the goals."""
    scenarios = []
    for base in SCENARIOS:
        sc = dataclasses.replace(base, work_s=work_hours * 3600.0)
        cells = [_cell(sc, kind, seeds) for kind in POLICIES]
        cells.append(_cell(dataclasses.replace(sc, p_no_notice=0.0), "notice-only", seeds))
        policy = sim.make_policy("ours", sc)
        scenarios.append(
            {
                "scenario": dataclasses.asdict(sc),
                "daly_analytic": sim.daly_goodput(sc),
                "ours_explain": policy.explain(),
                "cells": cells,
            }
        )
    ours_async = scenarios[0]["cells"][1]["goodput_mean"]
    blocking = scenarios[1]
    goals = [
        {
            "goal": f"ours >= {GOAL_ASYNC} (async save, mean of {seeds} seeds, full scale)",
            "measured": ours_async,
            "met": ours_async >= GOAL_ASYNC,
        },
        {
            "goal": "blocking 30 s save: ours against Daly's analytic value (about 0.85)",
            "measured": blocking["cells"][1]["goodput_mean"],
            "reference": blocking["daly_analytic"],
            "met": None,
        },
    ]
    return {"machine": machine(), "seeds": seeds, "scenarios": scenarios, "goals": goals}


def markdown(results: dict, scaled: dict | None = None) -> str:
    """The Markdown report."""
    m = results["machine"]
    lines = [
        "# Goodput of checkpoint policies under Spot preemption",
        "",
        f"`python -m benchmarks.goodput.policy --seeds {results['seeds']}` on {m['platform']}"
        f" ({m['cpus']} CPUs, Python {m['python']}), {m['date']}. All numbers:"
        " `goodput_policy.json`.",
        "",
        "Goodput = useful training time / billed node time; mean of the seeds. Overheads are"
        " shares of billed time: restart, after notice (step boundary to hard stop), periodic"
        " save blocking, work lost.",
        "",
        "## Goals",
        "",
        "| goal | measured | reference | result |",
        "|---|---|---|---|",
    ]
    for goal in results["goals"]:
        ref = f"{goal['reference']:.4f}" if "reference" in goal else ""
        met = {True: "met", False: "NOT met", None: "reported"}[goal["met"]]
        lines.append(f"| {goal['goal']} | {goal['measured']:.4f} | {ref} | {met} |")
    for block in results["scenarios"]:
        sc = block["scenario"]
        lines += [
            "",
            f"## {sc['name']}",
            "",
            f"M = {sc['mtbf_s']:.0f} s, R = {sc['restart_s']:.0f} s, notice {sc['notice_s']:.0f}"
            f" s, {sc['work_s'] / 3600:.0f} h of training per seed. Daly's analytic goodput"
            f" (periodic saves only): **{block['daly_analytic']:.4f}**.",
            "",
            f"Ours: {block['ours_explain']}.",
            "",
            "| policy | unannounced | interval s | goodput | per seed | restart | after notice"
            " | save block | lost | notice saves failed |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in block["cells"]:
            interval = "-" if c["interval_s"] is None else f"{c['interval_s']:.1f}"
            per_seed = ", ".join(f"{g:.4f}" for g in c["goodput_per_seed"])
            share = c["overhead_share"]
            name = c["policy"] + ("" if c["finished"] else " (never finishes)")
            lines.append(
                f"| {name} | {c['p_no_notice']:.0%} | {interval} | {c['goodput_mean']:.4f} |"
                f" {per_seed} | {share['restart']:.4f} | {share['after_notice']:.4f} |"
                f" {share['save_block']:.4f} | {share['lost']:.4f} |"
                f" {c['notice_saves_failed']:.0f} of {c['preemptions']:.0f} |"
            )
    if scaled:
        lines += ["", scaled.get("markdown", "").rstrip()]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the simulation and writes the JSON and Markdown results."""
    prog = "python -m benchmarks.goodput.policy"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per cell (default 3)")
    parser.add_argument(
        "--work-hours", type=float, default=1000.0, help="training hours per seed (default 1000)"
    )
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.work_hours <= 0:
        parser.error("--seeds must be >= 1 and --work-hours > 0")
    results = run(args.seeds, args.work_hours)
    scaled_path = args.out / "goodput_scaled.json"
    scaled = json.loads(scaled_path.read_text()) if scaled_path.exists() else None
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "goodput_policy.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "goodput_policy.md").write_text(markdown(results, scaled))
    for goal in results["goals"]:
        state = {True: "met", False: "NOT met", None: "reported"}[goal["met"]]
        print(f"{goal['goal']}: {goal['measured']:.4f} ({state})")
    print(f"wrote {args.out / 'goodput_policy.json'} and {args.out / 'goodput_policy.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
