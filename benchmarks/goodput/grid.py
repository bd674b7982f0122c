"""Goodput of the checkpoint policy over a grid of settings, against a notice-aware bound.

``python -m benchmarks.goodput.grid [--out benchmarks/results] [--seeds 3] [--first-seed 0]
[--work-hours 300] [--name goodput_grid]``

The full-scale simulation of ``benchmarks.goodput.sim`` (M = 1 h exponential, 30 s notice,
restart gaps billed) over every combination of:

* restart: 2 min (a warm node) and 5 min (a replacement Spot VM booting);
* unannounced preemptions: 0% and 25% (the hard stop comes without a notice);
* step time: 1 s and 10 s (the notice is seen at the next step boundary);
* the notice save: one that fits in the notice (2 s snapshot + 24 s persist) and one that does
  not (2 s snapshot + 40 s persist);
* nodes: 1 and 2. Each node is preempted independently (exponential, mean M), so a 2-node job
  is interrupted by the first of its nodes to go: every M/2 on average. Every node is billed
  until the job's hard stop and through the restart gap (the surviving node waits, billed,
  while the job requeues), so the job's goodput in node-seconds is its goodput in seconds.

**The bound.** Every policy of the project saves on the notice and, besides, periodically. The
best such policy in hindsight keeps one fixed interval; the bound of a cell is the best goodput
over fixed intervals (a log-spaced sweep from 1 min to 8 h, plus notice-only saves), measured on
the very preemptions of each seed, so no policy of that family does better on those traces except
by a finer interval (the sweep's step is 2^(1/4), within 1% of the optimum on the smooth
goodput-versus-interval curve). Young/Daly is the periodic interval of ``strategies.YoungDaly``
with the same notice save.

Goals: in every cell ours (``NoticeFirst``, the default) is at least 0.98 of the bound and never
below Young/Daly; the headline cell (2 min restart, every preemption announced, 1 s steps, a
save that fits) at least 0.95 with the restart gaps billed. ``--first-seed`` runs other
preemption traces (seeds ``first .. first + seeds - 1``) under another ``--name``, to check that
the goals do not hold only on the traces they were first measured on.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import pathlib
import statistics
import time

from benchmarks import results_files
from benchmarks.goodput import policy as goodput_policy
from benchmarks.goodput import sim

NAME = "goodput_grid"
DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "results"
RESTARTS = (120.0, 300.0)
UNANNOUNCED = (0.0, 0.25)
STEPS = (1.0, 10.0)
SAVES = {"fits": (2.0, 24.0), "does not fit": (2.0, 40.0)}
NODES = (1, 2)
MTBF_PER_NODE_S = 3600.0
# Fixed intervals of the bound's sweep: 1 min to 8 h, a factor 2^(1/4) apart.
SWEEP = tuple(60.0 * 2 ** (k / 4) for k in range(37))
TO_BOUND, HEADLINE = 0.98, 0.95


@dataclasses.dataclass
class FixedInterval:
    """A periodic save every ``interval_s`` (and the notice save every policy takes)."""

    interval_s: float

    def observe(self, preemptions: int, billed_s: float) -> None:
        """The interval never changes."""


def scenarios() -> list[tuple[dict, sim.Scenario]]:
    """Every cell of the grid: its settings and the simulation scenario."""
    out = []
    for nodes, restart, unannounced, step, (save, (block, persist)) in itertools.product(
        NODES, RESTARTS, UNANNOUNCED, STEPS, SAVES.items()
    ):
        cell = {
            "nodes": nodes,
            "restart_s": restart,
            "unannounced": unannounced,
            "step_s": step,
            "notice_save": save,
        }
        scenario = sim.Scenario(
            name=f"{nodes} node{'s' if nodes > 1 else ''}, restart {restart:g} s, "
            f"{unannounced:.0%} unannounced, {step:g} s steps, save {save}",
            mtbf_s=MTBF_PER_NODE_S / nodes,
            restart_s=restart,
            p_no_notice=unannounced,
            step_s=step,
            block_s=block,
            persist_s=persist,
        )
        out.append((cell, scenario))
    return out


def _goodput(scenario: sim.Scenario, policy, seed: int) -> float:
    """One seed's goodput under ``policy``: a kind name of ``sim.make_policy``, an object, or
    None (notice-only saves)."""
    if isinstance(policy, str):
        return sim.simulate(scenario, policy, seed).goodput
    return sim.simulate_with(scenario, policy, seed).goodput


def measure_cell(scenario: sim.Scenario, seeds: int, first_seed: int = 0) -> dict:
    """Ours, Young/Daly and the bound (the best fixed interval, per seed) for one cell, on the
    seeds ``first_seed .. first_seed + seeds - 1``."""
    numbers = range(first_seed, first_seed + seeds)
    ours = [_goodput(scenario, "ours", s) for s in numbers]
    young_daly = [_goodput(scenario, "young-daly", s) for s in numbers]
    bound, best_interval = [], []
    for seed in numbers:
        sweep = {None: _goodput(scenario, None, seed)}
        for interval in SWEEP:
            sweep[interval] = _goodput(scenario, FixedInterval(interval), seed)
        best = max(sweep, key=sweep.get)
        bound.append(sweep[best])
        best_interval.append(best)
    return {
        "ours": statistics.fmean(ours),
        "young_daly": statistics.fmean(young_daly),
        "bound": statistics.fmean(bound),
        "ours_per_seed": ours,
        "young_daly_per_seed": young_daly,
        "bound_per_seed": bound,
        "best_interval_s_per_seed": best_interval,
    }


def _per_seed_differences(row: dict) -> str:
    """ "; per seed: +0.0001, ..." (ours minus Young/Daly), when the row has them."""
    pairs = zip(row.get("ours_per_seed", []), row.get("young_daly_per_seed", []), strict=True)
    differences = [f"{ours - daly:+.5f}" for ours, daly in pairs]
    return f"; per seed {', '.join(differences)}" if differences else ""


def _daly_where(rows: list[dict], worst: dict) -> str:
    """The worst cell for "never below Young/Daly", and when it is a tie (both policies took
    the same interval, e.g. Daly's when the save does not fit), also the closest cell where
    they differ."""
    where = worst["name"] + _per_seed_differences(worst)
    differ = [r for r in rows if r["ours"] != r["young_daly"]]
    if worst["ours"] == worst["young_daly"] and differ:
        closest = min(differ, key=lambda r: r["ours"] - r["young_daly"])
        where = (
            f"{worst['name']}: a tie; closest where they differ: {closest['name']},"
            f" {closest['ours'] - closest['young_daly']:+.5f}{_per_seed_differences(closest)}"
        )
    return where


def goals(rows: list[dict], seeds: str = "") -> list[dict]:
    """The grid's three goals, each with its worst cell (``seeds``: which traces, for the
    goals' text, e.g. "seeds 0 to 4")."""
    on = f", {seeds}" if seeds else ""
    to_bound = min(rows, key=lambda r: r["ours"] / r["bound"])
    to_daly = min(rows, key=lambda r: r["ours"] - r["young_daly"])
    [headline] = [
        r
        for r in rows
        if (r["nodes"], r["restart_s"], r["unannounced"], r["step_s"], r["notice_save"])
        == (1, 120.0, 0.0, 1.0, "fits")
    ]
    return [
        {
            "id": "grid-bound",
            "goal": f"ours >= {TO_BOUND} of the notice-aware bound (best fixed interval in "
            f"hindsight) in every cell of the grid, 1- and 2-node jobs{on}",
            "measured": to_bound["ours"] / to_bound["bound"],
            "where": to_bound["name"],
            "met": to_bound["ours"] >= TO_BOUND * to_bound["bound"],
        },
        {
            "id": "grid-daly",
            "goal": "ours never below Young/Daly (with the same notice save) in any cell "
            f"(ours minus Young/Daly, worst cell{on})",
            "measured": to_daly["ours"] - to_daly["young_daly"],
            "where": _daly_where(rows, to_daly),
            "met": to_daly["ours"] >= to_daly["young_daly"],
        },
        {
            "id": "grid-headline",
            "goal": f"ours >= {HEADLINE} in the headline cell (2 min restart billed, every "
            f"preemption announced, 1 s steps, a save that fits{on})",
            "measured": headline["ours"],
            "where": headline["name"],
            "met": headline["ours"] >= HEADLINE,
        },
    ]


def markdown(results: dict) -> str:
    """The results page."""
    start = results.get("first_seed", 0)
    first = f" --first-seed {start}" if start else ""
    name = "" if results.get("name", NAME) == NAME else f" --name {results['name']}"
    seeds = f"{start} to {start + results['seeds'] - 1}"
    lines = [
        "# Goodput over a grid of settings, against the notice-aware bound",
        "",
        f"`python -m benchmarks.goodput.grid --seeds {results['seeds']}{first} --work-hours "
        f"{results['work_hours']:g}{name}` (seeds {seeds}; all numbers: `{results['name']}.json`),"
        f" run on {results['machine']['date']} in {results['run_seconds']:.0f} s.",
        "",
        "Full-scale simulation (`benchmarks.goodput.sim`): M = 1 h exponential per node (a "
        "2-node job: M / 2), 30 s notice, "
        "restart gaps billed. *Bound*: the best goodput over fixed save intervals (1 min to 8 h, "
        "a factor 2^(1/4) apart, and notice-only), each with the notice save, on the same "
        "preemptions, per seed; the mean over seeds is shown. Goodput = useful / billed.",
        "",
        "| nodes | restart | unannounced | step | notice save | ours | Young/Daly | bound | "
        "ours / bound | best interval (s, per seed) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        intervals = ", ".join(
            "notice-only" if i is None else f"{i:.0f}" for i in r["best_interval_s_per_seed"]
        )
        lines.append(
            f"| {r['nodes']} | {r['restart_s'] / 60:g} min | {r['unannounced']:.0%} | "
            f"{r['step_s']:g} s | "
            f"{r['notice_save']} | {r['ours']:.4f} | {r['young_daly']:.4f} | {r['bound']:.4f} "
            f"| {r['ours'] / r['bound']:.4f} | {intervals} |"
        )
    lines += ["", "## Goals", "", "| goal | measured | where | result |", "|---|---|---|---|"]
    for g in results["goals"]:
        state = "met" if g["met"] else "**NOT met**"
        lines.append(f"| {g['goal']} | {g['measured']:.4f} | {g['where']} | {state} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--seeds", type=int, default=3, help="preemption traces per cell")
    parser.add_argument("--first-seed", type=int, default=0, help="the first trace's seed")
    parser.add_argument("--work-hours", type=float, default=300.0, help="training per run, h")
    parser.add_argument("--name", default=NAME, help=f"results file name (default {NAME})")
    parser.add_argument(
        "--from-json", action="store_true", help="only re-render the goals and page from the JSON"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        results = json.loads((args.out / f"{args.name}.json").read_text())
        first = results.get("first_seed", 0)
        seeds = f"seeds {first} to {first + results['seeds'] - 1}"
        results["goals"] = goals(results["rows"], seeds)
        results_files.write(args.out, args.name, results, markdown(results))
        return 0
    started = time.perf_counter()
    rows = []
    for cell, scenario in scenarios():
        scenario = dataclasses.replace(scenario, work_s=args.work_hours * 3600.0)
        measured = measure_cell(scenario, args.seeds, args.first_seed)
        rows.append({**cell, "name": scenario.name, **measured})
        print(f"{scenario.name}: ours {rows[-1]['ours']:.4f}, bound {rows[-1]['bound']:.4f}")
    results = {
        "benchmark": NAME,
        "name": args.name,
        "machine": goodput_policy.machine(),
        "seeds": args.seeds,
        "first_seed": args.first_seed,
        "work_hours": args.work_hours,
        "run_seconds": time.perf_counter() - started,
        "rows": rows,
        "goals": goals(rows, f"seeds {args.first_seed} to {args.first_seed + args.seeds - 1}"),
    }
    results_files.write(args.out, args.name, results, markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
