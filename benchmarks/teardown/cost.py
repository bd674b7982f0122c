"""Benchmark: what keeping or deleting the cluster after each run costs, against the optimum.

Replays run traces (``teardown_traces``) through keep-or-delete policies (``teardown_policies``),
ours included (``teardown.decide`` at every run end, its expiry enforced as the reaper does),
and writes ``teardown_cost.json`` (all numbers) and ``teardown_cost.md`` (tables and the
benchmark's goals, from ``goals`` below, each met or not met with the measured number).

Usage::

    python -m benchmarks.teardown.cost [--out benchmarks/results] [--seeds N] [--first-seed S]
        [--ttl-draws N] [--name teardown_cost]

``--first-seed`` replays other traces than the committed results' (seeds ``S .. S + N - 1``),
to check that the goals hold off the seeds they were first measured on; ``--name`` names the
results files (``teardown_cost`` by default).
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import sys
import time
from collections.abc import Sequence

import numpy as np

from benchmarks import results_files
from benchmarks.teardown import goals as goals_module
from benchmarks.teardown import law, ours, policies, prewarm, report, traces
from vsp.components.runtime.teardown import cadence, inputs, run_history

DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "results"
DEFAULT_SEEDS = 10
DEFAULT_TTL_DRAWS = 1000
NAME = "teardown_cost"
BEST_FIXED = goals_module.BEST_FIXED
CRON_FAMILIES = goals_module.CRON_FAMILIES
goals = goals_module.goals
families = goals_module.families
# Ours priced with the scheduled reaper (the policy), a reaper deleting at the very second of
# the expiry, and the hourly reaper once suggested: what the reaper's cadence costs.
HOURLY_REAPER_CRON = "30 * * * *"
REAPERS = {
    "ours-auto": cadence.REAPER_CRON,
    "ours-auto-instant-reaper": None,
    "ours-auto-hourly-reaper": HOURLY_REAPER_CRON,
}


def run_cell(
    trace: traces.Trace, prices: policies.Prices, seed: int, ttl_draws: int
) -> dict[str, dict[str, float]]:
    """Metrics of every policy (and of OPT and the best fixed TTL) on one trace.

    Ours is decided once per run end and priced with each reaper cadence of ``REAPERS``. On the
    scheduled families the rule that knows the trace's law (``teardown_law``) is priced too,
    with the least expected cost / OPT of any online rule (``bound``).
    """
    gaps = trace.gaps
    metrics = {"opt": policies.evaluate_opt(gaps, prices)}
    for policy in policies.POLICIES:
        if policy == "ours-auto":
            _actions, expiries = ours.decisions(trace, prices.inputs(policy="auto"))
            for name, cron in REAPERS.items():
                metrics[name] = policies.evaluate(gaps, ours.ttls(trace, expiries, cron), prices)
            continue
        ttls = policies.policy_ttls(policy, trace, prices, draws=ttl_draws, seed=seed)
        metrics[policy] = policies.evaluate(gaps, ttls, prices)
    expected = policies.randomized_expected_costs(gaps, prices)
    opt = policies.opt_costs(gaps, prices)
    positive = opt > 0
    metrics[policies.RANDOMIZED]["expected_ratio"] = float(expected.sum() / opt.sum())
    metrics[policies.RANDOMIZED]["worst_gap_ratio"] = float(
        np.max(expected[positive] / opt[positive])
    )
    best = policies.best_fixed_ttl(gaps, prices)
    metrics[BEST_FIXED] = policies.evaluate(gaps, np.full(len(gaps), best), prices)
    metrics[BEST_FIXED]["ttl_minutes"] = best / 60.0
    if trace.family in law.FAMILIES:
        metrics[law.POLICY] = law.evaluate(trace, prices)
    if trace.family in prewarm.FAMILIES:
        warm = prewarm.evaluate(trace, prices)
        warm["over_ours"] = warm["cost"] / metrics["ours-auto"]["cost"]
        if not np.isnan(warm["bound"]):
            warm["over_bound"] = warm["ratio"] / warm["bound"]
        metrics[prewarm.POLICY] = warm
    return metrics


def _aggregate(per_seed: list[dict[str, float]]) -> dict[str, object]:
    """Mean over seeds (min/max of the ratio, max of the worst gap ratio)."""
    ratios = [m["ratio"] for m in per_seed]
    out: dict[str, object] = {
        "ratio": float(np.mean(ratios)),
        "ratio_min": float(np.min(ratios)),
        "ratio_max": float(np.max(ratios)),
        "ratio_per_seed": [round(r, 6) for r in ratios],
        "worst_gap_ratio": float(np.max([m["worst_gap_ratio"] for m in per_seed])),
    }
    for key in per_seed[0]:
        if key not in ("ratio", "worst_gap_ratio"):
            out[key] = float(np.mean([m[key] for m in per_seed]))
    for key in ("over_bound", "over_ours"):
        if key in per_seed[0]:
            out[f"{key}_max"] = float(np.max([m[key] for m in per_seed]))
    return out


def command(seeds: int, ttl_draws: int, first_seed: int = 0, name: str = NAME) -> str:
    """The command line that runs the benchmark with these settings."""
    first = f" --first-seed {first_seed}" if first_seed else ""
    named = f" --name {name}" if name != NAME else ""
    return (
        f"python -m benchmarks.teardown.cost --seeds {seeds}{first} --ttl-draws {ttl_draws}{named}"
    )


def run(
    seeds: int, ttl_draws: int, progress=None, first_seed: int = 0, name: str = NAME
) -> dict[str, object]:
    """Runs every (trace, break-even time, policy) over ``seeds`` trace seeds from ``first_seed``.

    Returns:
        The JSON-ready results: config, one row per (trace, beta, policy), goals.
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    rows = []
    for prices in policies.PRICES:
        collected: dict[tuple[str, str], list[dict[str, float]]] = {}
        info: dict[str, traces.Trace] = {}
        for seed in range(first_seed, first_seed + seeds):
            for trace in traces.all_traces(prices.beta_s, seed):
                info.setdefault(trace.name, trace)
                for policy, metrics in run_cell(trace, prices, seed, ttl_draws).items():
                    collected.setdefault((trace.name, policy), []).append(metrics)
            if progress:
                progress(f"beta {prices.label}: seed {seed - first_seed + 1}/{seeds}")
        for (trace_name, policy), per_seed in collected.items():
            trace = info[trace_name]
            rows.append(
                {
                    "trace": trace_name,
                    "family": trace.family,
                    "beta": prices.label,
                    "beta_hours": prices.beta_s / 3600.0,
                    "runs": len(trace.starts),
                    "policy": policy,
                    **_aggregate(per_seed),
                }
            )
    seconds = time.perf_counter() - started
    listed = goals(rows, ttl_draws)
    for goal in listed:  # every goal is measured by the one run
        goal["command"] = command(seeds, ttl_draws, first_seed, name)
        goal["seconds"] = round(seconds, 1)
    return {
        "benchmark": name,
        "run_seconds": seconds,
        "cpu_seconds": time.process_time() - cpu_started,
        "machine": machine(),
        "config": _config(seeds, ttl_draws, first_seed, name),
        "results": rows,
        "families": families(rows),
        "reaper_cost": goals_module.reaper_cost(rows, ["ours-auto", "ours-auto-hourly-reaper"]),
        "goals": listed,
    }


def machine() -> dict[str, object]:
    """Where and when the benchmark ran (its run time depends on it)."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def _config(seeds: int, ttl_draws: int, first_seed: int = 0, name: str = NAME) -> dict:
    return {
        "seeds": seeds,
        "first_seed": first_seed,
        "command": command(seeds, ttl_draws, first_seed, name),
        "ttl_draws": ttl_draws,
        "trace_start": "2027-01-04T00:00:00Z",
        "prices": [
            {
                "beta": p.label,
                "idle_price_per_hour": p.idle_price_per_hour,
                "provisioning_minutes": p.provisioning_minutes,
                "provisioning_price_per_hour": p.provisioning_price_per_hour,
                "delay_penalty_per_hour": p.delay_penalty_per_hour,
                "recreation_cost": p.recreation_cost,
                "beta_seconds": p.beta_s,
            }
            for p in policies.PRICES
        ],
        "cron_traces": [{"name": n, "cron": c, "runs": k} for n, c, k in traces.CRON_TRACES],
        "schedule_change": [{"cron": c, "runs": k} for c, k in traces.CHANGE_CRONS],
        "missed_traces": [
            {"name": n, "cron": c, "ticks": k, "missed": m} for n, c, k, m in traces.MISSED_TRACES
        ],
        "shifted_traces": [{"name": n, "cron": c, "runs": k} for n, c, k in traces.SHIFTED_TRACES],
        "shift_jitter_s": traces.SHIFT_JITTER_S,
        "shift_delayed_share": traces.SHIFT_DELAYED_SHARE,
        "shift_delay_s": list(traces.SHIFT_DELAY_S),
        "reapers": REAPERS,
        "prewarm_margin_s": prewarm.MARGIN_S,
        "poisson_mean_gaps_beta": list(traces.POISSON_MEAN_GAPS),
        "pareto_alpha": traces.PARETO_ALPHA,
        "duration_median_s": traces.DURATION_MEDIAN_S,
        "duration_sigma": traces.DURATION_SIGMA,
        "start_jitter_s": traces.START_JITTER_S,
        "history_max_runs": run_history.HISTORY_MAX_JOBS,
        "slack_fraction": inputs.DEFAULT_SLACK_FRACTION,
        "min_slack_seconds": inputs.DEFAULT_MIN_SLACK_SECONDS,
        "randomized_expected_ratio": policies.RANDOMIZED_EXPECTED_RATIO,
        "poisson_online_lower_bound": {
            f"poisson-{k:g}b": policies.poisson_online_bound(k) for k in traces.POISSON_MEAN_GAPS
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point: runs the benchmark and writes the JSON and Markdown results."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.teardown.cost", description=__doc__)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="trace seeds per cell")
    parser.add_argument(
        "--first-seed", type=int, default=0, help="the first trace seed (default 0)"
    )
    parser.add_argument("--name", default=NAME, help="results file name, without extension")
    parser.add_argument(
        "--ttl-draws", type=int, default=DEFAULT_TTL_DRAWS, help="randomized TTL draws per trace"
    )
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.ttl_draws < 1 or args.first_seed < 0:
        parser.error("--seeds and --ttl-draws must be >= 1, --first-seed >= 0")
    results = run(
        args.seeds,
        args.ttl_draws,
        progress=lambda m: print(m, file=sys.stderr),
        first_seed=args.first_seed,
        name=args.name,
    )
    print(
        f"ran in {results['run_seconds']:.1f} s ({results['cpu_seconds']:.1f} s of CPU)",
        file=sys.stderr,
    )
    results_files.write(args.out, args.name, results, report.markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
