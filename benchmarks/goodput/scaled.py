"""Goodput of the training step under time-scaled Spot preemption on the Vertex emulator.

``python -m benchmarks.goodput.scaled [--out benchmarks/results] [--seeds 3] [--work-steps 15000]``

The real-scale setting (M = 1 h, R = 2 min, 30 s notice) divided by 60: each run is the
training step (``train_runner.train_on_cluster``) on an emulated training cluster, running the
example trainer for ``--work-steps`` steps of ``--step-seconds`` (about 300 s of training, so
about 5 preemptions expected per run), while the emulator's Poisson preemption plan (mean 60 s
of running time, seeded: the same draws for every case) reclaims the Spot node; the notice is
the emulator's 0.5 s from SIGTERM to SIGKILL, the restart its 2 s requeue delay and node
recovery (the measured gap is reported). Cases: the trainer's saves asynchronous (0.03 s
blocking + 0.38 s simulated persist + the real write, about 0.4 s) with our notice-first policy
or Young/Daly, fully blocking 0.5 s saves (as long as the notice) with ours, and ours with the
async save while a quarter of the preemptions come unannounced (the plan's
``unannounced_share`` 0.25: SIGKILL at once, no notice save; the same preemption times).

Goodput per run = useful training time (the trainer's ``train_seconds`` in ``metrics.json``) /
billed node time (the emulator's run records); beside it the same useful time over the elapsed
time from the first start to the end (the restart gaps billed too) and the step's own goodput
metric. Runs go ``--parallel`` at a time, each in its own process with its own emulator (they
mostly sleep). Writes ``goodput_scaled.json`` (with ``goals`` for ``benchmarks.summary`` and a
Markdown table that ``benchmarks.goodput.policy`` quotes) and ``goodput_scaled.md``. See
``benchmarks.goodput.scaled_run`` for one run.

``ours-2-nodes`` (the torch extra; not run by default) runs the DDP example on 2 Spot nodes:
a job interrupted by the first of its nodes to go, so the plan's mean is 30 s, both nodes billed
through every restart.

Beside the 0.95 goal, ours (restart gaps billed) is set against the notice-aware bound on its
runs' own preemptions, or for older result files the bound of their setting at full scale
(``benchmarks.goodput.scaled_bounds``). Restart gaps of 2 s against M = 60 s bill 3.3% before
anything else, so those bounds are close to 0.95 themselves.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import multiprocessing
import pathlib
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.goodput import policy, scaled_bounds, scaled_report, scaled_run

GOAL = 0.95
OURS_ASYNC = "ours, async (0.03 s block + 0.4 s persist)"
YOUNG_DALY = "young-daly, async (same save)"
OURS_BLOCKING = "ours, blocking 0.5 s save"
OURS_UNANNOUNCED = "ours, async, a quarter of preemptions unannounced"
OURS_TWO_NODES = "ours, 2 nodes (the DDP example, its blocking collective save)"
_ASYNC_SAVE = ["--save-mode", "async", "--save-block-seconds", "0.03"]
_ASYNC_SAVE += ["--save-persist-seconds", "0.38"]
CASES = {
    OURS_ASYNC: _ASYNC_SAVE,
    YOUNG_DALY: [*_ASYNC_SAVE, "--checkpoint-strategy", "young-daly"],
    OURS_BLOCKING: ["--save-mode", "blocking", "--save-block-seconds", "0.5"],
    OURS_UNANNOUNCED: _ASYNC_SAVE,
    OURS_TWO_NODES: [],
}
# Nodes of a case's job (default 1). A 2-node job runs the DDP example (the torch extra).
NODES = {OURS_TWO_NODES: 2}
# Preemption plan fields of a case beside the seeded Poisson plan every case shares.
PLANS = {OURS_UNANNOUNCED: {"unannounced_share": 0.25}}
# Short names of the cases for ``--cases``.
CASE_KEYS = {
    "ours-async": OURS_ASYNC,
    "young-daly": YOUNG_DALY,
    "ours-blocking": OURS_BLOCKING,
    "ours-unannounced": OURS_UNANNOUNCED,
    "ours-2-nodes": OURS_TWO_NODES,
}
# The cases run without --cases: those of one node, which need no torch.
DEFAULT_CASES = sorted(key for key, name in CASE_KEYS.items() if NODES.get(name, 1) == 1)
# At least this many preemptions per seed before a case's mean is taken as meaningful.
MIN_PREEMPTIONS_PER_SEED = 2
NAME = "goodput_scaled"
MIN_SEEDS, MIN_PREEMPTIONS = scaled_bounds.MIN_SEEDS, scaled_bounds.MIN_PREEMPTIONS


def _evidence(seeds: int, preemptions: int) -> tuple[bool, str]:
    """Whether a case's runs are evidence enough for its goals (at least ``MIN_SEEDS`` seeds
    and ``MIN_PREEMPTIONS`` preemptions), and the words that say so."""
    enough = seeds >= MIN_SEEDS and preemptions >= MIN_PREEMPTIONS
    words = f"{seeds} seeds, {preemptions} preemptions"
    if not enough:
        words += (
            f"; not evidence enough for the goal, which needs at least {MIN_SEEDS} seeds and"
            f" {MIN_PREEMPTIONS} preemptions"
        )
    return enough, words


def _per_seed(values: Sequence[float], first_seed: int) -> str:
    return "".join(f"; seed {seed}: {g:.3f}" for seed, g in enumerate(values, start=first_seed))


def _ours_async_goals(
    ours: dict[str, Any], seeds: int, first_seed: int, setting: str, where: str
) -> list[dict[str, Any]]:
    """Ours with the async save: >= 0.95 on billed node time and with the restart gaps billed,
    and >= 0.98 of the notice-aware bound (``_bound_goals``)."""
    gap = ours["restart_gap_mean_s"]
    enough, evidence = _evidence(seeds, ours["preemptions"])
    found = [
        {
            "id": "goodput-scaled-ours-async",
            "goal": f"ours, async save (0.03 s block + 0.4 s persist): useful / billed node time"
            f" >= {GOAL} ({setting})",
            "measured": round(ours["goodput_mean"], 4),
            "where": where,
            "met": ours["goodput_mean"] >= GOAL,
        },
        {
            "id": "goodput-scaled-ours-async-elapsed",
            "goal": f"the same, billing the restart gaps too (useful / first start to end)"
            f" >= {GOAL} ({seeds} seeds, {ours['preemptions']} preemptions, restart gaps billed;"
            f" at least {MIN_SEEDS} seeds and {MIN_PREEMPTIONS} preemptions)",
            "measured": round(ours["goodput_elapsed_mean"], 4),
            "where": ("no restart" if gap is None else f"restart gap mean {gap:.2f} s")
            + _per_seed(ours.get("goodput_elapsed_per_seed", []), first_seed)
            + ("" if enough else f"; {evidence}"),
            "met": ours["goodput_elapsed_mean"] >= GOAL and enough,
        },
    ]
    label = "the same, restart gaps billed"
    found += scaled_bounds.bound_goals(
        ours, "goodput-scaled-ours-async-to-bound", label, enough, evidence
    )
    return found


def _two_node_goals(
    two: dict[str, Any], seeds: int, first_seed: int, where: str
) -> list[dict[str, Any]]:
    """Ours on 2 nodes: restart gaps billed (both nodes, through every restart), >= 0.98 of the
    notice-aware bound (``_bound_goals``); its goodput on billed node time and elapsed time
    reported beside it, with no target: a job interrupted twice as often, with a torch start-up
    at every restart, is held to its bound, not to the one-node 0.95."""
    enough, evidence = _evidence(seeds, two["preemptions"])
    setting = (
        f"2 nodes, emulator x1/60: M = {scaled_run.MTBF_S:g} s per node,"
        f" {scaled_run.MTBF_S / 2:g} s per job, R = {scaled_run.RESTART_S:g} s,"
        f" notice {scaled_run.NOTICE_S:g} s"
    )
    gap, startup = two["restart_gap_mean_s"], two["startup_mean_s"]
    restart = "no restart" if gap is None else f"restart gap mean {gap:.2f} s"
    if startup is not None:
        restart += f", start-up mean {startup:.2f} s"
    found = [
        {
            "id": "goodput-scaled-2-nodes",
            "goal": f"ours on 2 nodes (the DDP example), useful / billed node time (no target;"
            f" {setting})",
            "measured": round(two["goodput_mean"], 4),
            "where": where,
            "met": None,
        },
        {
            "id": "goodput-scaled-2-nodes-elapsed",
            "goal": f"the same, both nodes billed from the first start to the end, restart gaps"
            f" included (no target; {seeds} seeds, {two['preemptions']} preemptions, {setting})",
            "measured": round(two["goodput_elapsed_mean"], 4),
            "where": restart + _per_seed(two.get("goodput_elapsed_per_seed", []), first_seed),
            "met": None,
        },
    ]
    label = "ours on 2 nodes, both nodes billed through the restart gaps"
    found += scaled_bounds.bound_goals(
        two, "goodput-scaled-2-nodes-to-bound", label, enough, evidence
    )
    return found


def goals(cases: Sequence[dict[str, Any]], seeds: int, first_seed: int = 0) -> list[dict[str, Any]]:
    """The goals in the form ``benchmarks.summary`` reads (``id``, ``goal``, ``measured``,
    ``where``, ``met``): ours with the async save >= 0.95 (billed = the runs' node time, and
    with the restart gaps billed too); the blocking save, Young/Daly and the unannounced
    preemptions reported."""
    by_name = {case["name"]: case for case in cases}
    listed = f" {first_seed}-{first_seed + seeds - 1}" if first_seed else ""
    setting = f"mean of {seeds} seeds{listed}, emulator x1/60: M = 60 s, R = 2 s, notice 0.5 s"

    def where(case: dict[str, Any]) -> str:
        per_seed = "/".join(str(n) for n in case["preemptions_per_seed"])
        few = [
            str(seed)
            for seed, n in enumerate(case["preemptions_per_seed"], start=first_seed)
            if n < MIN_PREEMPTIONS_PER_SEED
        ]
        note = f"; seed {', '.join(few)}: too few to be meaningful" if few else ""
        return f"{case['preemptions']} preemptions ({per_seed} per seed){note}"

    found = []
    ours = by_name.get(OURS_ASYNC)
    if ours is not None:
        found += _ours_async_goals(ours, seeds, first_seed, setting, where(ours))
    two = by_name.get(OURS_TWO_NODES)
    if two is not None:
        found += _two_node_goals(two, seeds, first_seed, where(two))
    blocking = by_name.get(OURS_BLOCKING)
    if blocking is not None:
        found.append(
            {
                "id": "goodput-scaled-ours-blocking",
                "goal": f"ours, fully blocking 0.5 s save (as long as the notice), beside Daly's"
                f" analytic {scaled_bounds.daly_reference(0.5):.3f} (no target; {setting})",
                "measured": round(blocking["goodput_mean"], 4),
                "where": where(blocking),
                "met": None,
            }
        )
    daly = by_name.get(YOUNG_DALY)
    if daly is not None:
        found.append(
            {
                "id": "goodput-scaled-young-daly-async",
                "goal": f"Young/Daly periodic saves, async save (no target; {setting})",
                "measured": round(daly["goodput_mean"], 4),
                "where": where(daly),
                "met": None,
            }
        )
    unannounced = by_name.get(OURS_UNANNOUNCED)
    if unannounced is not None:
        found.append(
            {
                "id": "goodput-scaled-ours-async-unannounced",
                "goal": f"ours, async save, a quarter of preemptions unannounced (SIGKILL"
                f" at once, no notice save; no target; {setting})",
                "measured": round(unannounced["goodput_mean"], 4),
                "where": where(unannounced),
                "met": None,
            }
        )
    return found


def run_all(
    seeds: int,
    steps: int,
    step_s: float,
    parallel: int,
    names: Sequence[str] = tuple(CASES),
    first_seed: int = 0,
) -> list[dict[str, Any]]:
    """The cases ``names`` (default every case) for seeds ``first_seed`` on, ``parallel`` runs
    at once, each in a spawned process."""
    chosen = range(first_seed, first_seed + seeds)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(parallel, mp_context=context) as pool:
        jobs = {
            (name, seed): pool.submit(
                scaled_run.run_case, extra, seed, steps, step_s, PLANS.get(name), NODES.get(name, 1)
            )
            for seed in chosen
            for name, extra in CASES.items()
            if name in names
        }
        cases = []
        for name in (name for name in CASES if name in names):
            runs = [jobs[name, seed].result() for seed in chosen]
            nodes = NODES.get(name, 1)
            case = {"name": name, "nodes": nodes, "runs": runs, **scaled_run.summarize(runs)}
            if name == OURS_ASYNC:
                case["goal"] = f">= {GOAL}: " + (
                    "met" if case["goodput_mean"] >= GOAL else "NOT met"
                )
            cases.append(case)
            print(
                f"{name}: {case['goodput_mean']:.3f} (elapsed {case['goodput_elapsed_mean']:.3f},"
                f" step metric {case['step_metric_mean']:.3f}, {case['preemptions']} preemptions)",
                flush=True,
            )
    return cases


def _write(out: pathlib.Path, results: dict[str, Any], name: str = NAME) -> None:
    for case in results["cases"]:
        case["replay"] = scaled_bounds.replay_bound(case)
    results["markdown"] = scaled_report.markdown(results)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / f"{name}.md").write_text(results["markdown"])


def main(argv: Sequence[str] | None = None) -> int:
    """Runs every case for every seed and writes the results."""
    prog = "python -m benchmarks.goodput.scaled"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=policy.DEFAULT_OUT)
    parser.add_argument("--seeds", type=int, default=3, help="seeds S..S+N-1 (default 3)")
    parser.add_argument("--first-seed", type=int, default=0, help="S, the first seed (default 0)")
    parser.add_argument("--name", default=NAME, help="results file name, without extension")
    parser.add_argument("--work-steps", type=int, default=15000, help="steps per run")
    parser.add_argument("--step-seconds", type=float, default=0.02, help="seconds per step")
    parser.add_argument("--parallel", type=int, default=3, help="runs at once (they mostly wait)")
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=sorted(CASE_KEYS),
        default=DEFAULT_CASES,
        help="cases to run (default every one-node case; ours-2-nodes needs the torch extra): "
        + ", ".join(f"{k} = {v}" for k, v in CASE_KEYS.items()),
    )
    parser.add_argument(
        "--from-json", action="store_true", help="only re-render goodput_scaled.md from the JSON"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        results = json.loads((args.out / f"{args.name}.json").read_text())
        results["goals"] = goals(results["cases"], results["seeds"], results.get("first_seed", 0))
        _write(args.out, results, args.name)
        return 0
    if args.seeds < 1 or args.work_steps < 1 or args.step_seconds <= 0 or args.parallel < 1:
        parser.error("--seeds, --work-steps and --parallel must be >= 1, --step-seconds > 0")
    if args.first_seed < 0:
        parser.error("--first-seed must be >= 0")
    names = [CASE_KEYS[key] for key in args.cases]
    if any(NODES.get(name, 1) > 1 for name in names) and importlib.util.find_spec("torch") is None:
        parser.error(
            "ours-2-nodes runs the DDP example, which needs torch. Fix: pip install -e"
            ' ".[torch]" (torch==2.13.0), or leave ours-2-nodes out of --cases'
        )
    started = time.monotonic()
    cases = run_all(
        args.seeds, args.work_steps, args.step_seconds, args.parallel, names, args.first_seed
    )
    only = "" if sorted(args.cases) == DEFAULT_CASES else " --cases " + " ".join(args.cases)
    if args.first_seed:
        only += f" --first-seed {args.first_seed}"
    if args.name != NAME:
        only += f" --name {args.name}"
    results = {
        "machine": policy.machine(),
        "command": f"{prog} --seeds {args.seeds} --work-steps {args.work_steps}"
        f" --step-seconds {args.step_seconds:g} --parallel {args.parallel}{only}",
        "seeds": args.seeds,
        "first_seed": args.first_seed,
        "work_steps": args.work_steps,
        "step_seconds": args.step_seconds,
        "parallel": args.parallel,
        "setting": {
            "mtbf_s": scaled_run.MTBF_S,
            "notice_s": scaled_run.NOTICE_S,
            "requeue_delay_s": scaled_run.SETTINGS.slurm_requeue_delay_seconds,
            "node_recovery_s": scaled_run.SETTINGS.slurm_node_recovery_seconds,
            "plan_max_count": scaled_run.MAX_PREEMPTIONS,
            "min_preemptions_per_seed": MIN_PREEMPTIONS_PER_SEED,
        },
        "daly_blocking_0_5": scaled_bounds.daly_reference(0.5),
        "wall_seconds": round(time.monotonic() - started, 1),
        "cases": cases,
        "cases_not_run": [name for name in CASES if name not in names],
        "goals": goals(cases, args.seeds, args.first_seed),
    }
    _write(args.out, results, args.name)
    print(f"wrote {args.out / f'{args.name}.json'} and {args.out / f'{args.name}.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
