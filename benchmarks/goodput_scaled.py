"""Goodput of the example trainer under time-scaled Spot preemption (real processes, signals).

``python -m benchmarks.goodput_scaled [--out benchmarks/results] [--seeds 3] [--work-steps 7500]``

The real-scale setting divided by 60: mean time between preemptions M = 60 s (exponential,
seeded, the same draws for every policy), restart R = 2 s, notice 0.5 s (SIGTERM), then the hard
stop (SIGKILL); 2% of preemptions come without notice. The trainer
(``python -m vsp.examples.trainer``) runs ``--work-steps`` steps of ``--step-seconds``; saves are
asynchronous (0.03 s blocking, 0.4 s persist: a 0.38 s simulated upload plus the real write) or
fully blocking (0.5 s, as long as the notice). Runs go three at a time (they mostly sleep).

Billed time is the wall time from the first start to the successful exit, restarts included
(each relaunch waits R minus the interpreter's measured start-up, so a restart costs about R).
Useful time is ``train_seconds`` of the finished model's ``metrics.json``: the time the trainer
spent in the steps the final model holds, carried in every checkpoint (steps redone after a lost
checkpoint count once). Writes ``goodput_scaled.json`` (with a
Markdown table that ``benchmarks.goodput_policy`` quotes) and ``goodput_scaled.md``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from benchmarks import goodput_policy

REPO = pathlib.Path(__file__).resolve().parents[1]
MTBF_S, RESTART_S, NOTICE_S, P_NO_NOTICE = 60.0, 2.0, 0.5, 0.02
GOAL = 0.95
CASES = {
    "ours, async (0.03 s block + 0.4 s persist)": ["--save-mode", "async"]
    + ["--save-block-seconds", "0.03", "--save-persist-seconds", "0.38"],
    "young-daly, async (same save)": ["--save-mode", "async", "--checkpoint-strategy"]
    + ["young-daly", "--save-block-seconds", "0.03", "--save-persist-seconds", "0.38"],
    "ours, blocking 0.5 s save": ["--save-mode", "blocking", "--save-block-seconds", "0.5"],
}


def _command(root: pathlib.Path, steps: int, step_s: float, extra: list[str]) -> list[str]:
    return [
        *(sys.executable, "-m", "vsp.examples.trainer", "--steps", str(steps)),
        *("--step-seconds", str(step_s), "--log-every", "1000000", "--keep", "2"),
        *("--model-dir", str(root / "model"), "--checkpoint-dir", str(root / "ckpt")),
        *("--mtbf-seconds", str(MTBF_S), "--notice-seconds", str(NOTICE_S), *extra),
    ]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def step_time(steps: int, step_s: float) -> tuple[float, float]:
    """(Mean seconds per step of an uninterrupted run without checkpoints, start-up seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            *(sys.executable, "-m", "vsp.examples.trainer", "--steps", str(steps)),
            *("--step-seconds", str(step_s), "--log-every", "1000000"),
            *("--model-dir", str(pathlib.Path(tmp) / "model")),
        ]
        started = time.monotonic()
        subprocess.run(command, env=_env(), check=True, capture_output=True)
        total = time.monotonic() - started
        started = time.monotonic()
        subprocess.run(
            command[:4] + ["1", *command[5:]], env=_env(), check=True, capture_output=True
        )
        startup = time.monotonic() - started
    return (total - startup) / (steps - 1), startup


def run_case(extra: list[str], seed: int, steps: int, step_s: float, startup_s: float) -> dict:
    """One run to completion under seeded preemptions; billed seconds and counts."""
    rng = random.Random(seed)
    preemptions = unannounced = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        started = time.monotonic()
        while True:
            hard_stop = rng.expovariate(1.0 / MTBF_S)
            announced = rng.random() >= P_NO_NOTICE
            proc = subprocess.Popen(
                _command(root, steps, step_s, extra),
                env=_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            t0 = time.monotonic()
            try:
                proc.wait(max(0.0, hard_stop - NOTICE_S) if announced else hard_stop)
                if proc.returncode == 0:
                    break
                raise AssertionError(f"trainer exited {proc.returncode} before any preemption")
            except subprocess.TimeoutExpired:
                pass
            preemptions += 1
            unannounced += int(not announced)
            if announced:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(max(0.0, t0 + hard_stop - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            time.sleep(max(0.0, t0 + hard_stop - time.monotonic()))  # billed until the stop
            time.sleep(max(0.0, RESTART_S - startup_s))  # the relaunch's start-up is the rest
        billed = time.monotonic() - started
        metrics = json.loads((root / "model" / "metrics.json").read_text())
    return {
        "seed": seed,
        "billed_s": billed,
        "steps": metrics["steps"],
        "train_seconds": metrics["train_seconds"],
        "preemptions": preemptions,
        "unannounced": unannounced,
        "checkpoint_policy": metrics.get("checkpoint_policy", ""),
    }


def goals(cases: list[dict], seeds: int) -> list[dict]:
    """The scaled goal: ours (async save) >= 0.95, mean of the seeds."""
    ours = next(case for case in cases if case["name"].startswith("ours, async"))
    return [
        {
            "goal": f"ours >= {GOAL} (async save, mean of {seeds} seeds, scaled trainer runs)",
            "measured": ours["goodput_mean"],
            "met": ours["goodput_mean"] >= GOAL,
        }
    ]


def markdown(results: dict) -> str:
    """The Markdown table of the scaled runs."""
    runs = [run for case in results["cases"] for run in case["runs"]]
    preempted = sum(run["preemptions"] for run in runs)
    expected = sum(run["train_seconds"] for run in results["cases"][0]["runs"]) / MTBF_S
    lines = [
        "## Scaled runs of the example trainer (x1/60: M = 60 s, R = 2 s, notice 0.5 s)",
        "",
        f"`python -m benchmarks.goodput_scaled --seeds {results['seeds']} --work-steps"
        f" {results['work_steps']}`, {results['machine']['date']}; step time"
        f" {results['step_time_s']:.4f} s, start-up {results['startup_s']:.2f} s. Ours:"
        f" {results['cases'][0]['runs'][0]['checkpoint_policy']}.",
        "",
        f"Machine: {results['machine']['platform']} ({results['machine']['cpus']} CPUs). With"
        f" {preempted} preemptions over {len(results['cases'])} cases ({expected:.1f} expected per"
        " case at M = 60 s), these figures are noisy; the full-scale simulation carries the goal.",
        "",
        "| case | goodput (mean) | per seed | preemptions | goal |",
        "|---|---|---|---|---|",
    ]
    for case in results["cases"]:
        per_seed = ", ".join(f"{g:.3f}" for g in case["goodput_per_seed"])
        goal = case.get("goal", "")
        lines.append(
            f"| {case['name']} | {case['goodput_mean']:.3f} | {per_seed} |"
            f" {sum(r['preemptions'] for r in case['runs'])} | {goal} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Runs every case for every seed and writes the results."""
    prog = "python -m benchmarks.goodput_scaled"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--out", type=pathlib.Path, default=goodput_policy.DEFAULT_OUT)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--work-steps", type=int, default=7500)
    parser.add_argument("--step-seconds", type=float, default=0.02)
    parser.add_argument("--parallel", type=int, default=3, help="runs at once (they mostly wait)")
    parser.add_argument(
        "--from-json", action="store_true", help="only re-render goodput_scaled.md from the JSON"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        results = json.loads((args.out / "goodput_scaled.json").read_text())
        results["goals"] = goals(results["cases"], results["seeds"])
        results["markdown"] = markdown(results)
        (args.out / "goodput_scaled.json").write_text(json.dumps(results, indent=1) + "\n")
        (args.out / "goodput_scaled.md").write_text(results["markdown"])
        return 0
    step_s, startup_s = step_time(200, args.step_seconds)
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.parallel) as pool:
        for name, extra in CASES.items():
            for seed in range(args.seeds):
                run = (extra, seed, args.work_steps, args.step_seconds, startup_s)
                jobs[name, seed] = pool.submit(run_case, *run)
    cases = []
    for name in CASES:
        runs = [jobs[name, seed].result() for seed in range(args.seeds)]
        goodputs = [r["train_seconds"] / r["billed_s"] for r in runs]
        case = {"name": name, "runs": runs, "goodput_per_seed": goodputs}
        case["goodput_mean"] = statistics.fmean(goodputs)
        if name.startswith("ours, async"):
            case["goal"] = f">= {GOAL}: " + ("met" if case["goodput_mean"] >= GOAL else "NOT met")
        cases.append(case)
        print(f"{name}: {case['goodput_mean']:.3f} ({', '.join(f'{g:.3f}' for g in goodputs)})")
    results = {
        "machine": goodput_policy.machine(),
        "seeds": args.seeds,
        "work_steps": args.work_steps,
        "step_time_s": step_s,
        "startup_s": startup_s,
        "cases": cases,
        "goals": goals(cases, args.seeds),
    }
    results["markdown"] = markdown(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "goodput_scaled.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "goodput_scaled.md").write_text(results["markdown"])
    print(f"wrote {args.out / 'goodput_scaled.json'} and {args.out / 'goodput_scaled.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
