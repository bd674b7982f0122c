"""The Markdown of ``benchmarks.goodput.scaled``: the scaled emulator runs, case by case."""

from __future__ import annotations

from typing import Any


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def markdown(results: dict[str, Any]) -> str:
    """The results as Markdown (also quoted by ``benchmarks.goodput.policy``)."""
    setting, machine = results["setting"], results["machine"]
    cases = results["cases"]
    expected = [
        sum(r["billed_node_seconds"] for r in case["runs"]) / len(case["runs"]) / setting["mtbf_s"]
        for case in cases
    ]
    lines = [
        "## Scaled emulator runs of the training step (x1/60: M = 60 s, R = 2 s, notice 0.5 s)",
        "",
        f"`{results['command']}`, {machine['date']} on {machine['platform']}"
        f" ({machine['cpus']} CPUs, Python {machine['python']}); wall time"
        f" {results['wall_seconds']:.0f} s.",
        "",
        f"Each run: `train_on_cluster` on an emulated cluster, the example trainer for"
        f" {results['work_steps']} steps of {results['step_seconds']:g} s; the emulator's"
        f" Poisson preemption plan (mean {setting['mtbf_s']:g} s of running time, seed = the"
        f" seed, at most {setting['plan_max_count']}), notice {setting['notice_s']:g} s"
        f" (SIGTERM, then SIGKILL), requeue delay {setting['requeue_delay_s']:g} s and node"
        f" recovery {setting['node_recovery_s']:g} s. Expected preemptions per run (billed"
        f" running time / M): {', '.join(f'{e:.1f}' for e in expected)} by case.",
        *_multinode_lines(cases, setting["mtbf_s"]),
        "",
        "Goodput = the trainer's `train_seconds` (time in the steps the model holds) / billed"
        " node time from the emulator's run records (a preempted run from its start to its"
        " SIGKILL, the last to its end). *Elapsed*: the same useful time over first start to"
        " end, which also bills the restart gaps (node down, requeue delay). *Step metric*: the"
        " goodput the training step itself reports. Restart gap: SIGKILL to the next run's"
        " start, from the run records; start-up: a run's start to its first training step"
        " (interpreter, prolog, checkpoint reload), from the trainer's step log. Step s: the"
        " trainer's time per step (its sleep plus compute; above the sleep when the machine is"
        " busy).",
        "",
        "| case | goodput (mean) | per seed | elapsed (mean) | step metric (mean) |"
        " preemptions per seed | restart gap s (mean / max) | start-up s (mean) | step s (mean)"
        " | goal |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in cases:
        per_seed = ", ".join(f"{g:.3f}" for g in case["goodput_per_seed"])
        counts = ", ".join(str(n) for n in case["preemptions_per_seed"])
        gap = f"{_seconds(case['restart_gap_mean_s'])} / {_seconds(case['restart_gap_max_s'])}"
        lines.append(
            f"| {case['name']} | {case['goodput_mean']:.3f} | {per_seed} |"
            f" {case['goodput_elapsed_mean']:.3f} | {case['step_metric_mean']:.3f} | {counts} |"
            f" {gap} | {_seconds(case['startup_mean_s'])} | {case['step_time_mean_s']:.4f} |"
            f" {case.get('goal', '')} |"
        )
    not_run = results.get("cases_not_run") or []
    if not_run and results.get("first_seed"):
        lines += ["", f"Not run here (`--cases`): {'; '.join(not_run)}."]
    elif not_run:
        lines += [
            "",
            f"Not run here (`--cases`): {'; '.join(not_run)}. Their last results, with the date"
            " and command of their run, are kept in `benchmarks/results/previous/`.",
        ]
    for case in cases:
        unannounced = case.get("unannounced_per_seed") or []
        if any(unannounced):
            lines += [
                "",
                f"{case['name']}: unannounced preemptions per seed (SIGKILL at once, no notice"
                f" save): {', '.join(str(n) for n in unannounced)} of"
                f" {', '.join(str(n) for n in case['preemptions_per_seed'])}.",
            ]
    lines += ["", "Goals:", ""]
    marks = {True: "met", False: "NOT met", None: "reported"}
    for goal in results["goals"]:
        lines.append(
            f"- {goal['goal']}: **{goal['measured']:.4f}** ({goal['where']}): {marks[goal['met']]}"
        )
    few = [g for g in results["goals"] if "too few" in str(g.get("where", ""))]
    if few:
        lines += [
            "",
            f"Some seeds saw fewer than {setting['min_preemptions_per_seed']} preemptions: their"
            " goodput says little about the policy; the full-scale simulation"
            " (`goodput_policy`) has thousands.",
        ]
    for case in cases:
        lines += _replay_lines(case)
    ours = cases[0]["runs"][0]["checkpoint_policy"] if cases and cases[0]["runs"] else ""
    if ours:
        seed = cases[0]["runs"][0].get("seed", results.get("first_seed", 0))
        lines += [
            "",
            f"{cases[0]['name']}, seed {seed}, as the trainer explained its interval: {ours}",
        ]
    return "\n".join(lines) + "\n"


def _replay_lines(case: dict[str, Any]) -> list[str]:
    """The per-seed replay of a case on its runs' own preemptions, when it was made."""
    replayed = case.get("replay")
    if not replayed:
        return []
    lines = [
        "",
        f"{case['name']}, each run replayed on its own preemptions (`benchmarks.goodput.replay`:"
        " the plan's draws, the run's measured start-up, restart gap, step, save and tail;"
        " elapsed billing):",
        "",
        "| seed | ours measured | ours replayed | bound | the bound's interval |",
        "|---|---|---|---|---|",
    ]
    for row in replayed["per_seed"]:
        interval = row["best_interval_s"]
        best = "notice saves alone" if interval is None else f"every {interval:.3g} s"
        lines.append(
            f"| {row['seed']} | {row['ours_measured']:.4f} | {row['ours_replayed']:.4f} |"
            f" {row['bound']:.4f} | {best} |"
        )
    measured = sum(r["ours_measured"] for r in replayed["per_seed"]) / len(replayed["per_seed"])
    lines.append(
        f"| mean | {measured:.4f} | {replayed['ours_replayed']:.4f} | {replayed['bound']:.4f} | |"
    )
    return lines


def _multinode_lines(cases: list[dict[str, Any]], mtbf_s: float) -> list[str]:
    """What differs for the cases on several nodes: the trainer, the plan's mean, the billing."""
    lines = []
    for case in cases:
        nodes = case.get("nodes", 1)
        if nodes > 1:
            lines += [
                "",
                f"{case['name']}: the DDP example on {nodes} nodes instead, and the plan's mean is"
                f" the job's, {mtbf_s / nodes:g} s (a node's {mtbf_s:g} s over {nodes}: the first"
                " node to go ends a run). Useful time is rank 0's step log times the nodes; billed"
                " time counts every node, through the restart gaps in *elapsed*.",
            ]
    return lines
