"""How long the main job takes: `vsp run-local`, faithful and in-process.

The README's first command runs ``vsp run-local``: the compiled ``slurm-spot-training`` template
on an in-process emulator, each step in a fresh virtual environment holding exactly what its
YAML installs (the base environment of each install list is built once and never written after:
``vsp.pipelines.local.step_envs``), with three Spot preemptions. This benchmark runs it as a user
would, in a subprocess, each run with a fresh emulator state and outputs folder:

* ``faithful, cold``: the step environments' cache empty (a fresh machine with pip's cache
  warm): every base environment is built;
* ``faithful, warm``: the cache from the cold run (the second run on a machine);
* ``in-process``: ``--in-process``, the pipeline rebuilt from the sources in this environment.

Goals (issue: performance off the tuned setting): faithful, warm, at most 60 s and in-process at
most 30 s on an idle 2-core machine; the median of ``--repeats`` runs is what counts. The
machine's load when each run started is recorded, since a busy machine makes every figure an
upper bound.

Usage: ``python -m benchmarks.main_job.run [--repeats 3] [--out benchmarks/results]``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import results_files

NAME = "main_job"
DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "results"
GOALS = {"faithful-warm": 60.0, "in-process": 30.0}
LABELS = {"faithful-warm": "faithful, warm", "in-process": "in-process"}


def run_once(work: pathlib.Path, step_envs: pathlib.Path, in_process: bool) -> dict:
    """One ``vsp run-local`` in a subprocess; its wall time, exit code and the load before it."""
    state, outputs = work / "state", work / "outputs"
    for folder in (state, outputs):
        shutil.rmtree(folder, ignore_errors=True)
    # The `vsp` command of this environment, as a user runs it.
    command = [str(pathlib.Path(sys.executable).parent / "vsp"), "run-local"]
    command += ["--state-dir", str(state), "--outputs", str(outputs)]
    command += ["--in-process"] if in_process else []
    env = {**os.environ, "VSP_STEP_ENV_CACHE": str(step_envs)}
    env.pop("VERTEX_EMULATOR_HOST", None)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=work, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise SystemExit(f"vsp run-local failed ({done.returncode}):\n{tail}")
    return {"seconds": round(seconds, 2), "load_1min_before": round(load, 2)}


def measure(repeats: int) -> dict[str, list[dict]]:
    """Every mode's runs: cold once, then warm and in-process ``repeats`` times each."""
    with tempfile.TemporaryDirectory(prefix="vsp-main-job-") as tmp:
        work = pathlib.Path(tmp)
        step_envs = work / "step-envs"
        runs: dict[str, list[dict]] = {"faithful-cold": [run_once(work, step_envs, False)]}
        runs["faithful-warm"] = [run_once(work, step_envs, False) for _ in range(repeats)]
        runs["in-process"] = [run_once(work, step_envs, True) for _ in range(repeats)]
    return runs


def goals(runs: dict[str, list[dict]]) -> list[dict]:
    """Each goal with the median of its runs."""
    out = []
    for mode, target in GOALS.items():
        median = statistics.median(r["seconds"] for r in runs[mode])
        out.append(
            {
                "id": mode,
                "goal": f"the main job, {LABELS[mode]}, <= {target:g} s "
                "(median, idle 2-core machine)",
                "measured": median,
                "met": median <= target,
            }
        )
    return out


def markdown(results: dict) -> str:
    """The results page."""
    lines = [
        "# The main job's wall time",
        "",
        f"`python -m benchmarks.main_job.run --repeats {results['repeats']}` "
        f"(all numbers: `{NAME}.json`), run on {results['date']}, {results['machine']}.",
        "",
        "Each run is `vsp run-local` in a subprocess with a fresh emulator state: the compiled "
        "`slurm-spot-training` template, three Spot preemptions, each step in a fresh virtual "
        "environment holding exactly what its YAML installs (*faithful*), or the pipeline "
        "rebuilt from the sources in this environment (*in-process*). *Cold*: no step "
        "environment built yet (pip's cache warm); *warm*: the base environments from the "
        "cold run. The 1-minute load average before each run says how busy the machine was.",
        "",
        "| mode | runs (s) | median s | load before |",
        "|---|---|---|---|",
    ]
    for mode, runs in results["runs"].items():
        seconds = ", ".join(f"{r['seconds']:.1f}" for r in runs)
        loads = ", ".join(f"{r['load_1min_before']:.2f}" for r in runs)
        median = statistics.median(r["seconds"] for r in runs)
        lines.append(f"| {mode} | {seconds} | {median:.1f} | {loads} |")
    lines += ["", "## Goals", "", "| goal | measured | result |", "|---|---|---|"]
    for goal in results["goals"]:
        state = "met" if goal["met"] else "**NOT met**"
        lines.append(f"| {goal['goal']} | {goal['measured']:.1f} s | {state} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="warm and in-process runs each")
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="results folder")
    args = parser.parse_args(argv)
    runs = measure(args.repeats)
    results = {
        "benchmark": NAME,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        "repeats": args.repeats,
        "runs": runs,
        "goals": goals(runs),
    }
    results_files.write(args.out, NAME, results, markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
