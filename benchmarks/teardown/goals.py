"""The goals of the keep-or-delete benchmark, each met or not met with its measured number."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchmarks.teardown import law, policies

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
    return out


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
