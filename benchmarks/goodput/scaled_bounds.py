"""The notice-aware bounds the scaled goodput runs are held to, and the goal against them.

Two bounds (see ``benchmarks.goodput.scaled``): on the runs' own preemptions
(``replay_bound``: each run replayed by ``benchmarks.goodput.replay`` with its measured costs),
and for result files written before runs recorded their tail, the bound of their setting at
full scale (``setting_bound``: the goodput grid's bound simulated from the runs' mean costs,
x60). ``daly_reference`` is Daly's analytic goodput of the scaled setting, a reference figure.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from benchmarks.goodput import grid, replay, scaled_run, sim

# The goal's evidence: at least this many seeds and preemptions in all.
MIN_SEEDS, MIN_PREEMPTIONS = 6, 30


def daly_reference(block_s: float) -> float:
    """Daly's analytic goodput of periodic saves blocking ``block_s`` in the scaled setting."""
    scenario = sim.Scenario(
        "scaled",
        mtbf_s=scaled_run.MTBF_S,
        restart_s=scaled_run.RESTART_S,
        notice_s=scaled_run.NOTICE_S,
        block_s=block_s,
        persist_s=0.0,
    )
    return sim.daly_goodput(scenario)


# What the notice-aware bound of a case's own setting is simulated over (see ``setting_bound``).
BOUND_SEEDS, BOUND_WORK_HOURS, TO_BOUND = 5, 300.0, grid.TO_BOUND
SCALE = 3600.0 / scaled_run.MTBF_S  # the emulator runs the real setting x1/60
_SAVE_TEXT = re.compile(r"a save takes ([0-9.]+) s \(([0-9.]+) s blocking\)")
_BLOCKING_SAVE_TEXT = re.compile(r"a save blocks training ([0-9.]+) s")


def measured_save(explanation: str) -> tuple[float, float] | None:
    """(whole save, blocking part) in s from a trainer's policy explanation, or None."""
    if found := _SAVE_TEXT.search(explanation):
        return float(found.group(1)), float(found.group(2))
    if found := _BLOCKING_SAVE_TEXT.search(explanation):
        return float(found.group(1)), float(found.group(1))
    return None


def setting_scenario(case: dict[str, Any]) -> sim.Scenario | None:
    """The full-scale setting a case's runs measured (x60): M = 1 h over the job's nodes, 30 s
    notice, every preemption announced, the restart = the mean restart gap plus the mean
    start-up, the mean step, and the save the trainer measured (its policy line); None without
    those numbers."""
    gap, startup = case.get("restart_gap_mean_s"), case.get("startup_mean_s")
    step = case.get("step_time_mean_s")
    saves = [
        save
        for run in case.get("runs", [])
        if (save := measured_save(str(run.get("checkpoint_policy", ""))))
    ]
    if gap is None or startup is None or not step or not saves:
        return None
    total = sum(t for t, _ in saves) / len(saves)
    block = sum(b for _, b in saves) / len(saves)
    return sim.Scenario(
        "scaled setting",
        mtbf_s=scaled_run.MTBF_S / case.get("nodes", 1) * SCALE,
        restart_s=(gap + startup) * SCALE,
        notice_s=scaled_run.NOTICE_S * SCALE,
        block_s=block * SCALE,
        persist_s=max(0.0, total - block) * SCALE,
        step_s=step * SCALE,
        p_no_notice=0.0,
        work_s=BOUND_WORK_HOURS * 3600.0,
    )


def setting_bound(case: dict[str, Any]) -> dict[str, float] | None:
    """The notice-aware bound of a case's own setting (``setting_scenario``) as the goodput
    grid computes it (the best fixed interval in hindsight, or notice saves alone, per seed),
    and ours simulated there; None when the case lacks the numbers."""
    scenario = setting_scenario(case)
    if scenario is None:
        return None
    cell = grid.measure_cell(scenario, BOUND_SEEDS)
    return {"bound": cell["bound"], "ours_simulated": cell["ours"], "restart_s": scenario.restart_s}


def replay_bound(case: dict[str, Any]) -> dict[str, Any] | None:
    """Each run of a case replayed on its own preemptions with its measured costs
    (``benchmarks.goodput.replay``): per seed the bound (the best fixed interval of the grid's
    sweep / 60, or notice saves alone), ours replayed, and ours measured (elapsed billing); None
    when a run's record lacks what the replay needs (result files written before it)."""
    per_seed = []
    for run in case.get("runs", []):
        save = measured_save(str(run.get("checkpoint_policy", "")))
        trace = None if save is None else scaled_run.trace_of_run(run, save[1], save[0] - save[1])
        if trace is None:
            return None
        best, interval = replay.bound(trace, [s / SCALE for s in grid.SWEEP], run["seed"])
        per_seed.append(
            {
                "seed": run["seed"],
                "bound": best,
                "best_interval_s": interval,
                "ours_replayed": replay.replay(trace, replay.ours(trace), run["seed"]).goodput,
                "ours_measured": run["train_seconds"] / run["elapsed_seconds"],
            }
        )
    if not per_seed:
        return None
    mean = {k: statistics.fmean(s[k] for s in per_seed) for k in ("bound", "ours_replayed")}
    return {"per_seed": per_seed, **mean}


def bound_goals(
    case: dict[str, Any], goal_id: str, label: str, enough: bool, evidence: str
) -> list[dict[str, Any]]:
    """The goal of ``case`` against the notice-aware bound: on its runs' own preemptions
    (``replay_bound``), or for older result files the bound of its setting at full scale
    (``setting_bound``); none without the numbers."""
    measured = case["goodput_elapsed_mean"]
    replayed = replay_bound(case)
    if replayed is not None:
        ratio = measured / replayed["bound"]
        notice_only = sum(s["best_interval_s"] is None for s in replayed["per_seed"])
        return [
            {
                "id": goal_id,
                "goal": f"{label}, >= {TO_BOUND} of the notice-aware bound on the runs' own"
                " preemptions (each run replayed with its measured start-up, restart gap, step,"
                " save and tail: the best fixed interval in hindsight or notice saves alone, per"
                f" seed; at least {MIN_SEEDS} seeds and {MIN_PREEMPTIONS} preemptions)",
                "measured": round(ratio, 4),
                "where": f"bound {replayed['bound']:.4f} (notice saves alone best on"
                f" {notice_only} of {len(replayed['per_seed'])} seeds); ours measured"
                f" {measured:.4f}, replayed {replayed['ours_replayed']:.4f}; {evidence}",
                "met": ratio >= TO_BOUND and enough,
            }
        ]
    bound = setting_bound(case)
    if bound is None:
        return []
    ratio = measured / bound["bound"]
    return [
        {
            "id": goal_id,
            "goal": f"{label}, >= {TO_BOUND} of the notice-aware bound of its own setting (the"
            " grid's bound, simulated at full scale from the runs' measured restart gap +"
            f" start-up, step and save x60; {BOUND_SEEDS} seeds)",
            "measured": round(ratio, 4),
            "where": f"bound {bound['bound']:.4f} (restart {bound['restart_s']:.0f} s); ours"
            f" measured {measured:.4f}, simulated {bound['ours_simulated']:.4f}"
            + ("" if enough else f"; {evidence}"),
            "met": ratio >= TO_BOUND and enough,
        }
    ]
