"""The goals of the keep-or-delete benchmark, each met or not met with its measured number."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from benchmarks.teardown import law, policies, prewarm

BEST_FIXED = "best-fixed-ttl"
CRON_FAMILIES = ("cron", "change", "cron-missed", "cron-shifted")
STOCHASTIC_FAMILIES = ("poisson", "bursty")


def families(rows: list[dict]) -> list[dict[str, object]]:
    """Per trace family: ours-auto's worst cost / OPT (worst seed) and its goal, met or not."""
    out = []
    for family in dict.fromkeys(r["family"] for r in rows):
        cells = [r for r in rows if r["family"] == family and r["policy"] == "ours-auto"]
        worst = max(cells, key=lambda r: r["ratio_max"])
        target = 1.02 if family in CRON_FAMILIES else 2.0
        best = next(
            r
            for r in rows
            if r["policy"] == BEST_FIXED
            and (r["trace"], r["beta"]) == (worst["trace"], worst["beta"])
        )
        out.append(
            {
                "family": family,
                "traces": sorted({r["trace"] for r in cells}),
                "mean_ratio": float(np.mean([r["ratio"] for r in cells])),
                "worst_ratio": float(worst["ratio_max"]),
                "where": f"{worst['trace']} at beta {worst['beta']}",
                "mean_ratio_there": float(worst["ratio"]),
                "best_fixed_ttl_there": float(best["ratio"]),
                "target": target,
                "met": bool(worst["ratio_max"] <= target + 1e-9),
            }
        )
    return out


def _worst(rows: list[dict], key: str) -> tuple[float, str]:
    """The largest ``key`` and where it is (with how many other cells tie within 1e-6)."""
    row = max(rows, key=lambda r: r[key])
    ties = sum(1 for r in rows if r is not row and abs(r[key] - row[key]) <= 1e-6)
    where = f"{row['trace']} at beta {row['beta']}"
    return float(row[key]), where + (f" and {ties} more cells" if ties else "")


def goals(rows: list[dict], ttl_draws: int) -> list[dict[str, object]]:
    """The section 5(b) goals that this benchmark measures, each with its measured number."""

    def pick(policy: str, families: Sequence[str] | None = None) -> list[dict]:
        return [
            r for r in rows if r["policy"] == policy and (not families or r["family"] in families)
        ]

    tol = 1e-9
    out = []
    value, where = _worst(pick("ours-auto", CRON_FAMILIES), "ratio_max")
    text = (
        "ours-auto <= 1.02x OPT on every cron trace, missed and shifted runs included (worst seed)"
    )
    out.append(_goal("1", text, 1.02, value, where, tol))
    out.append(_bound_goal(rows, tol))
    value, where = _worst(pick("ours-auto"), "ratio_max")
    out.append(
        _goal("7", "ours-auto <= 2x OPT on every trace (worst seed)", 2.0, value, where, tol)
    )
    value, where = _worst(pick("break-even-ttl"), "ratio_max")
    out.append(_goal("2", "break-even TTL <= 2.0x OPT on every trace", 2.0, value, where, tol))
    value, where = _worst(pick("break-even-ttl"), "worst_gap_ratio")
    out.append(_goal("2'", "break-even TTL <= 2.0x OPT on every gap", 2.0, value, where, tol))
    value, where = _worst(pick(policies.RANDOMIZED), "ratio")
    text = f"randomized TTL <= 1.60x OPT, mean over {ttl_draws} draws x seeds, every trace"
    out.append(_goal("3", text, 1.60, value, where, tol))
    stochastic = pick("ours-auto", STOCHASTIC_FAMILIES)
    value, where = _worst(stochastic, "ratio")
    text = "stretch: ours-auto <= 1.3x OPT mean on every Poisson and bursty trace"
    goal = _goal("5", text, 1.3, value, where, tol)
    goal["average"] = float(np.mean([r["ratio"] for r in stochastic]))
    out.append(goal)
    out.append(_against("8", rows, "always-delete", 1.0, tol))
    out.append(_against("9", rows, BEST_FIXED, 1.05, tol))
    out += _prewarm_goals(rows, tol)
    keep = _keep_policy(rows)
    return out if keep is None else [*out, keep]


def _prewarm_goals(rows: list[dict], tol: float) -> list[dict[str, object]]:
    """Goal 10: ours with pre-warm within its bound on every regular cron trace; its cost."""
    warm = [r for r in rows if r["policy"] == prewarm.POLICY]
    if not warm:
        return []
    bounded = [r for r in warm if r["family"] in prewarm.BOUND_FAMILIES]
    goals = []
    if bounded:
        value, where = _worst(bounded, "over_bound_max")
        text = (
            "ours with pre-warm (the runtime's rule, created at the reaper's ticks) <= its bound "
            "1 + sum(delta)/OPT_pw (offline optimum with pre-warm; delta r(lead + latency) per "
            "pre-warmed gap) on every regular cron trace (worst seed, cost/OPT_pw over the bound)"
        )
        goals.append(_goal("10", text, 1.0, value, where, tol))
    value, where = _worst(warm, "over_ours_max")
    cheaper = min(warm, key=lambda r: r["over_ours"])
    goal = _goal(
        "10'",
        "ours with pre-warm over ours without, every scheduled trace (no target; worst seed)",
        math.nan,
        value,
        where + f"; least {cheaper['over_ours']:.4f} ({cheaper['trace']} at beta "
        f"{cheaper['beta']})",
        tol,
    )
    goal["met"] = None
    goals.append(goal)
    return goals


def _keep_policy(rows: list[dict]) -> dict[str, object] | None:
    """``teardown_policy=keep`` (no cadence: kept for the break-even time) against OPT, measured.

    On the regular cron traces where keeping is not free (its cost / OPT above 1.01), per
    break-even time: the range of its cost / OPT (mean of seeds), beside ours-auto's there.
    """
    ours = {(r["trace"], r["beta"]): r["ratio"] for r in rows if r["policy"] == "ours-auto"}
    keep = [
        r
        for r in rows
        if r["policy"] == "ours-keep" and r["family"] == "cron" and r["ratio"] > 1.01
    ]
    if not keep:
        return None
    parts = []
    for beta in dict.fromkeys(r["beta"] for r in keep):
        ratios = [r["ratio"] for r in keep if r["beta"] == beta]
        parts.append(f"beta {beta}: {min(ratios):.2f}-{max(ratios):.2f}x")
    auto = [ours[(r["trace"], r["beta"])] for r in keep]
    high = max(keep, key=lambda r: r["ratio"])
    return {
        "id": "K",
        "goal": (
            "teardown_policy=keep (no target): cost / OPT on the regular cron traces where "
            f"keeping is not free ({len(keep)} cells), beside ours-auto there"
        ),
        "target": None,
        "measured": float(high["ratio"]),
        "where": (
            f"{high['trace']} at beta {high['beta']}; {'; '.join(parts)}; ours-auto "
            f"{min(auto):.2f}-{max(auto):.2f}x"
        ),
        "met": None,
    }


def _against(ident: str, rows: list[dict], other: str, target: float, tol: float) -> dict:
    """Ours-auto's cost over ``other``'s on the human-triggered (Poisson, bursty) traces.

    Both costs are the means over the seeds of a cell (same traces, same prices), so the ratio is
    what ours pays over what ``other`` pays for the very same runs.
    """
    cost = {(r["trace"], r["beta"], r["policy"]): r["cost"] for r in rows}
    cells = [
        {**r, "over": r["cost"] / cost[(r["trace"], r["beta"], other)]}
        for r in rows
        if r["policy"] == "ours-auto"
        and r["family"] in STOCHASTIC_FAMILIES
        and cost[(r["trace"], r["beta"], other)] > 0
    ]
    value, where = _worst(cells, "over")
    name = "always-delete's cost" if other == "always-delete" else "the best fixed keep time's"
    text = (
        f"ours-auto <= {target:g}x {name} (chosen in hindsight)"
        if other == BEST_FIXED
        else f"ours-auto <= {name}"
    )
    text += " on every human-triggered (Poisson, bursty) trace, reaper every 10 minutes"
    return _goal(ident, text, target, value, where, tol)


def _bound_goal(rows: list[dict], tol: float) -> dict[str, object]:
    """Goal 1': ours-auto (mean of seeds) within 1.02x of the online lower bound, every cron cell.

    The bound (``teardown_law``) is what no online rule beats in expectation; goal 1 measures
    against the offline optimum, which no rule that cannot see the future can match where the
    bound itself is above 1.02.
    """
    bound = {(r["trace"], r["beta"]): r["bound"] for r in rows if r["policy"] == law.POLICY}
    cells = [
        {**r, "over_bound": r["ratio"] / bound[(r["trace"], r["beta"])]}
        for r in rows
        if r["policy"] == "ours-auto" and (r["trace"], r["beta"]) in bound
    ]
    value, where = _worst(cells, "over_bound")
    text = (
        "ours-auto <= 1.02x the online lower bound (least expected cost / OPT of any rule that "
        "cannot see the future) on every cron trace, missed and shifted runs included (mean of "
        "seeds)"
    )
    goal = _goal("1'", text, 1.02, value, where, tol)
    goal["bound_over_1.02"] = sorted(
        f"{t} at beta {b} ({v:.4f})" for (t, b), v in bound.items() if v > 1.02 + tol
    )
    return goal


def _goal(ident: str, text: str, target: float, value: float, where: str, tol: float) -> dict:
    return {
        "id": ident,
        "goal": text,
        "target": target,
        "measured": value,
        "where": where,
        "met": bool(value <= target + tol),
    }


def reaper_cost(rows: list[dict], reapers: Sequence[str]) -> list[dict[str, object]]:
    """Per reaper variant of ours: its cost over the instant reaper's, worst and mean cell."""
    cost = {(r["trace"], r["beta"], r["policy"]): r["cost"] for r in rows}
    cells = sorted({(r["trace"], r["beta"]) for r in rows})
    out = []
    for policy in reapers:
        extra = {
            c: cost[(*c, policy)] / cost[(*c, "ours-auto-instant-reaper")]
            for c in cells
            if cost[(*c, "ours-auto-instant-reaper")] > 0
        }
        worst = max(extra, key=extra.get)
        out.append(
            {
                "policy": policy,
                "worst": extra[worst],
                "where": f"{worst[0]} at beta {worst[1]}",
                "mean": float(np.mean(list(extra.values()))),
            }
        )
    return out
