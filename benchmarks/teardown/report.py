"""Markdown report of the keep-or-delete benchmark (``teardown_cost.md``)."""

from __future__ import annotations

import math

from benchmarks.teardown import law, policies, prewarm

REFERENCE = "best-fixed-ttl"
REAPER_VARIANTS = ("ours-auto-instant-reaper", "ours-auto-hourly-reaper")
SHORT = {
    "always-delete": "delete",
    "always-keep": "keep",
    "break-even-ttl": "break-even",
    "randomized-ttl": "randomized",
    "ours-auto": "**ours auto**",
    "ours-auto-instant-reaper": "ours auto, instant reaper",
    "ours-auto-hourly-reaper": "ours auto, hourly reaper",
    "ours-keep": "ours keep",
    REFERENCE: "best fixed TTL*",
}


def _fmt(value: float, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isinf(value)):
        return "inf"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _cells(results: dict) -> dict[tuple[str, str], dict[str, dict]]:
    cells: dict[tuple[str, str], dict[str, dict]] = {}
    for row in results["results"]:
        cells.setdefault((row["trace"], row["beta"]), {})[row["policy"]] = row
    return cells


def _goal_one_note(by_id: dict, cells: dict) -> list[str]:
    """Why goal 1 is not met: per cron cell over 1.02x, ours beside the online lower bound."""
    target = by_id["1"]["target"]
    over = [
        f"  - {trace}, beta {beta}: ours {row['ours-auto']['ratio']:.4f} (worst seed "
        f"{row['ours-auto']['ratio_max']:.4f}); online lower bound "
        f"{row[law.POLICY]['bound']:.4f}, the rule that knows the law "
        f"{row[law.POLICY]['ratio']:.4f} on these traces (worst seed "
        f"{row[law.POLICY]['ratio_max']:.4f}); best fixed TTL in hindsight "
        f"{row[REFERENCE]['ratio']:.4f}, always delete {row['always-delete']['ratio']:.4f}"
        for (trace, beta), row in cells.items()
        if law.POLICY in row
        and max(row["ours-auto"]["ratio_max"], row[law.POLICY]["bound"]) > target
    ]
    bound_over = by_id["1'"]["bound_over_1.02"]
    return [
        "**Why goal 1 is not met.** A missed run, or a start delayed beyond the slack, is "
        "independent of everything a decision at the run end can see, so each decision in "
        "effect picks a keep time for a gap it cannot foresee. The *online lower bound* "
        "(`teardown_law`) is the least expected cost / OPT of any such rule: the rule that "
        "knows the generator's law exactly (the miss rate, the delay distribution) and keeps "
        "each time for the least expected cost under it. Where the next tick is close to the "
        "break-even time (an hourly cron at beta 1 h: about 55 min idle against 60), keeping "
        "through the tick and deleting at once cost nearly the same on the runs that come, and "
        "a missed or late one costs the re-creation either way plus, when kept, the idle time "
        "until the expiry. The bound is above 1.02x in "
        f"{len(bound_over)} cells ({'; '.join(bound_over)}), so no online rule meets goal 1 "
        "there; goal 1' measures ours against the bound instead. Per cron cell where ours or "
        "the bound is over 1.02x:",
        "",
        *over,
        "",
    ]


def _goal_eight_note(cells: dict) -> list[str]:
    """Goals 8 and 9 per human-triggered cell: ours over always-delete and the best fixed TTL."""
    lines = [
        f"  - {trace}, beta {beta}: ours / always delete "
        f"{row['ours-auto']['cost'] / row['always-delete']['cost']:.4f}, ours / best fixed TTL "
        f"{row['ours-auto']['cost'] / row[REFERENCE]['cost']:.4f}"
        for (trace, beta), row in cells.items()
        if row["ours-auto"]["family"] in ("poisson", "bursty")
    ]
    return [
        "**Goals 8 and 9, per human-triggered cell.** Where the mean gap is the break-even time "
        "(poisson-1b) every keep time costs what deleting costs in expectation "
        "(r*mu + (C - r*mu)*e^(-T/mu) = C), so there ours and always-delete differ only by "
        "chance, by the keeps whose saving passed the noise test on that trace; above it "
        "(poisson-2b, 4b) deleting is cheaper in expectation and ours deletes.",
        "",
        *lines,
        "",
    ]


def _goal_notes(results: dict, cells: dict) -> list[str]:
    notes = []
    by_id = {g["id"]: g for g in results["goals"]}
    if not by_id["5"]["met"]:
        lines = []
        for (trace, beta), row in cells.items():
            if row["ours-auto"]["family"] not in ("poisson", "bursty"):
                continue
            bound = ""
            if trace.startswith("poisson-"):
                k = float(trace.removeprefix("poisson-").removesuffix("b"))
                bound = (
                    f", online lower bound (in expectation) {policies.poisson_online_bound(k):.3f}"
                )
            lines.append(
                f"  - {trace}, beta {beta}: ours {row['ours-auto']['ratio']:.3f}, break-even "
                f"{row['break-even-ttl']['ratio']:.3f}, best fixed TTL in hindsight "
                f"{row[REFERENCE]['ratio']:.3f}{bound}"
            )
        notes += [
            "**Why goal 5 is not met.** Without a cron, `decide` keeps the cluster for the time "
            "that would have cost least over the idle gaps it observed (each earlier run's end "
            f"to the next start, over the last {results['config']['history_max_runs']} runs), "
            "when that saves more than the gaps' noise (a one-sided 95% t-test on the per-gap "
            "savings over deleting), and deletes it otherwise. On memoryless (Poisson) gaps no "
            "online rule can do much better: with exponential gaps of mean beta every TTL costs "
            "r*beta per gap in expectation against an OPT of r*beta*(1-1/e), i.e. e/(e-1) = 1.582 "
            "(derived; the bound per trace is listed below), so 1.3x is out of reach there. On "
            "heavy-tailed Pareto gaps a fixed keep time learned from a few hundred gaps is "
            "still noisy; ours "
            "stays within a few percent of the break-even TTL and of the best fixed TTL in "
            "hindsight.",
            "",
            *lines,
            "",
        ]
    notes += _goal_eight_note(cells)
    if not by_id["1"]["met"]:
        notes += _goal_one_note(by_id, cells)
    for ident in ("1'", "2", "2'", "3", "7"):
        goal = by_id[ident]
        if not goal["met"]:
            notes.append(
                f"**Goal {ident} is not met**: {goal['measured']:.4f} on {goal['where']}; see the "
                "tables below."
            )
    return notes


def _bound(value: float | None) -> str:
    """A bound, or '-' where none is claimed (NaN, written to JSON as null)."""
    return "-" if value is None or math.isnan(value) else f"{value:.3f}"


def _prewarm_section(results: dict, cells: dict) -> list[str]:
    """Ours with pre-warm before a known cron tick: its model, optimum, bound and costs."""
    rows = [
        [
            t,
            b,
            f"{cell['ours-auto']['ratio']:.3f}",
            f"{cell[prewarm.POLICY]['ratio_plain']:.3f}",
            f"{cell[prewarm.POLICY]['opt_ratio']:.3f}",
            f"{cell[prewarm.POLICY]['ratio']:.3f}",
            _bound(cell[prewarm.POLICY].get("bound")),
            f"{cell[prewarm.POLICY]['over_ours']:.3f}",
            f"{cell[prewarm.POLICY]['prewarmed_pct']:.0f}%",
        ]
        for (t, b), cell in cells.items()
        if prewarm.POLICY in cell
    ]  # fmt: skip
    margin = results["config"]["prewarm_margin_s"]
    out = [
        "## Pre-warm before a known cron tick (`ours-prewarm`)",
        "",
        "On a schedule the next tick t is known, so a rule can delete now and have the cluster "
        "created again before the tick: it pays P = p x the provisioning price (p the "
        "provisioning time; no run waits) plus the idle time from ready to the run's start. "
        "*ours, pre-warm* is the runtime's rule (`teardown.prewarm`, weighed by `decide` with "
        f"`prewarm_margin_minutes` = a / 60, a = {margin:.0f} s): the reaper (every 10 min) "
        "creates the cluster at its last tick c at or before t - a - p, so it is ready at "
        "c + p, a lead L of a to a + 10 min before t; the pre-warm is offered when c is after "
        "the run's end, estimated P + r*L (plus q(r(L + slack) + C) with the run history's "
        "share q of missed or late runs), and chosen when cheaper than keeping and deleting. A "
        "pre-warmed cluster expires at t + slack and the reaper deletes it at its next tick; a "
        "run that comes later re-creates it.",
        "",
        "*Offline optimum with pre-warm*: OPT_pw = min(r*g, C, P) per gap g >= p (ready exactly "
        "at the start), min(r*g, C) for a shorter gap. *Bound* (regular cron: every run on the "
        "tick the decision predicts, latency lambda = s - t within the slack): where a pre-warm "
        "is offered the rule picks e = min(r(t - now), C, P + r*L) and pays at most e + "
        "r*lambda, while OPT_pw >= min(r(t - now), C, P) >= e - r*L, so the gap costs at most "
        "OPT_pw + r(L + lambda); where none is offered it pays at most min(r(t - now), C) + "
        "r*lambda, which is min(r(t - now), C) - min(r(t - now), C, P) + r*lambda above "
        "OPT_pw at most. So cost / OPT_pw <= 1 + sum(delta) / sum(OPT_pw), delta the per-gap "
        "excess, computed per trace from its own latencies and leads (goal 10). On missed, "
        "shifted and changed schedules no bound is claimed: a missed tick wastes a pre-warm, "
        "a delayed start idles it.",
        "",
        "The model: the creation takes p exactly (a covers what it varies by, and the reaper "
        "run's own start latency).",
        "",
    ]
    out += _table(
        ["trace", "beta", "ours auto / OPT", "ours pre-warm / OPT", "OPT_pw / OPT",
         "ours pre-warm / OPT_pw", "bound", "pre-warm / ours auto (cost)", "gaps pre-warmed"],
        rows,
    )  # fmt: skip
    return [*out, ""]


def markdown(results: dict) -> str:
    """The report: settings, goals (met or not, with numbers), cost ratio tables."""
    config = results["config"]
    machine = results["machine"]
    cells = _cells(results)
    shown = [*policies.POLICIES, *REAPER_VARIANTS, REFERENCE]
    out = [
        "# Keep or delete the cluster: cost against the offline optimum",
        "",
        f"`{config['command']}` (all numbers: `{results['benchmark']}.json`), run on "
        f"{machine['date']}: {results['run_seconds']:.1f} s ({results['cpu_seconds']:.1f} s "
        f"of CPU) on {machine['platform']} "
        f"({machine['cpus']} CPUs, Python {machine['python']}, numpy {machine['numpy']}; the "
        "machine was shared, so the time is an upper bound).",
        "",
        "Each idle gap g (run end to next start) costs r*min(g, T) + C*[g > T] for a policy that "
        "keeps the cluster for T after the run; OPT pays min(r*g, C). Ratios are total cost / "
        "total OPT per trace, the mean over the trace seeds (the randomized TTL: also over its "
        "draws). *ours auto*: `teardown.decide(policy='auto')` at every run end with the run's "
        "cron, if any, and the start and end times `run_history` would list (the newest "
        f"{config['history_max_runs']}, the running one included); kept clusters are "
        "reused by a run that starts before the reaper deletes them, at its first tick "
        f"(`{config['reapers']['ours-auto']}`) after the `vsp-expires-at` label; *instant "
        "reaper*: deleted at the very second of the label; *hourly reaper*: "
        f"`{config['reapers']['ours-auto-hourly-reaper']}`. "
        "*ours keep*: `policy='keep'` with no cadence (break-even expiry). *best fixed TTL*: the "
        "one TTL that would have cost least on the trace, chosen in hindsight (a reference, not "
        "a policy).",
        "",
        "## Prices",
        "",
    ]
    out += _table(
        ["beta", "r /h", "provisioning min", "provisioning /h", "delay penalty /h", "C"],
        [
            [
                p["beta"],
                _fmt(p["idle_price_per_hour"], 2),
                _fmt(p["provisioning_minutes"], 0),
                _fmt(p["provisioning_price_per_hour"], 2),
                _fmt(p["delay_penalty_per_hour"], 2),
                _fmt(p["recreation_cost"], 2),
            ]
            for p in config["prices"]
        ],
    )
    out += ["", "## Ours against the offline optimum, per trace family", ""]
    out += _table(
        ["family", "traces", "mean", "worst (trace, beta, worst seed)", "best fixed TTL there",
         "goal", "result"],
        [
            [
                f["family"],
                ", ".join(f["traces"]),
                f"{f['mean_ratio']:.4f}",
                f"{f['worst_ratio']:.4f} ({f['where']})",
                f"{f['best_fixed_ttl_there']:.4f}",
                f"<= {f['target']:g}x",
                "met" if f["met"] else "**NOT met**",
            ]
            for f in results["families"]
        ],
    )  # fmt: skip
    out += [
        "",
        "What the reaper's cadence costs: ours' cost with the reaper at "
        f"`{config['reapers']['ours-auto']}` (the policy) and hourly, over its cost with a "
        "reaper deleting at the very second of the expiry:",
        "",
    ]
    out += _table(
        ["reaper", "worst cell", "mean over cells"],
        [
            [
                SHORT[r["policy"]].replace("**", ""),
                f"{r['worst']:.4f} ({r['where']})",
                f"{r['mean']:.4f}",
            ]
            for r in results["reaper_cost"]
        ],
    )
    out += ["", "## Goals", ""]
    goal_rows = []
    for g in results["goals"]:
        measured = f"{g['measured']:.4f} ({g['where']})"
        if "average" in g:
            measured += f"; average {g['average']:.4f}"
        status = "measured" if g["met"] is None else "met" if g["met"] else "**NOT met**"
        goal_rows.append([g["id"], g["goal"], measured, status])
    out += _table(["#", "goal", "measured (worst cell)", "result"], goal_rows)
    out += [
        "",
        f"Every goal is measured by the one run: `{config['command']}`, "
        f"{results['run_seconds']:.0f} s of wall time.",
    ]
    out += [
        "",
        "Not measured here: goal 4 (a trust parameter lambda; `decide` has none) and goal 6 (in "
        "this model every delayed run waits exactly the provisioning time, below beta in every "
        "cell).",
        "",
        *_goal_notes(results, cells),
    ]
    out += _prewarm_section(results, cells)
    out += ["## Cost / OPT", ""]
    header = ["trace", "beta", *[SHORT[p] for p in shown]]
    out += _table(
        header,
        [[t, b, *[_fmt(cell[p]["ratio"]) for p in shown]] for (t, b), cell in cells.items()],
    )
    out += [
        "",
        "## Worst single-gap cost / OPT (randomized: expected cost per gap)",
        "",
    ]
    out += _table(
        header[:-1],
        [
            [t, b, *[_fmt(cell[p]["worst_gap_ratio"], 2) for p in shown[:-1]]]
            for (t, b), cell in cells.items()
        ],
    )
    out += [
        "",
        "## Re-creations (mean per trace) / p95 delay added to runs (min)",
        "",
    ]
    ops = ["opt", *shown[:-1]]
    out += _table(
        ["trace", "beta", "runs", "OPT", *[SHORT[p] for p in ops[1:]]],
        [
            [t, b, str(cell["opt"]["runs"])]
            + [f"{cell[p]['creates']:.0f} / {_fmt(cell[p]['p95_delay_min'], 0)}" for p in ops]
            for (t, b), cell in cells.items()
        ],
    )
    out += [
        "",
        "Not modelled: the provisioning wait moving a run's end, failed or cancelled runs, "
        "the TTL of `failure_keep_minutes`, and the reaper's own run time (it lists and "
        "deletes within its tick).",
        "",
    ]
    return "\n".join(out)
