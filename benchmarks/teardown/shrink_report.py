"""Markdown report of the keep / shrink / delete benchmark (``teardown_shrink.md``)."""

from __future__ import annotations

# Each policy's short name, in the order of the benchmark's POLICIES (a test checks both agree).
SHORT = {
    "always-delete": "delete",
    "break-even-keep": "break-even keep",
    "ours-auto-2": "ours, no shrink",
    "ours-auto": "**ours auto**",
    "opt-2": "OPT without shrink",
}


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def markdown(results: dict) -> str:
    """The report: prices, goals, then cost / OPT and the choices made, per cell and trace."""
    config = results["config"]
    machine = results["machine"]
    out = [
        "# Keep, shrink or delete the cluster at realistic prices",
        "",
        f"`python -m benchmarks.teardown.shrink --seeds {config['seeds']}` (all numbers: "
        f"`teardown_shrink.json`), run on {machine['date']}: {results['run_seconds']:.1f} s "
        f"({results['cpu_seconds']:.1f} s of CPU) on {machine['platform']} ({machine['cpus']} "
        f"CPUs, Python {machine['python']}; the machine was shared).",
        "",
        "Each idle gap g costs r_k*min(g, T) + C_d*[g > T] when kept for T, "
        "r_s*min(g, T) + (C_s if g <= T else C_d) when shrunk for T, C_d when deleted; the "
        "offline optimum (OPT) pays min(r_k*g, r_s*g + C_s, C_d). Ratios are total cost / total "
        "OPT per trace, the mean over the seeds (the goal takes the worst seed). Prices come "
        "from the project's price table through `teardown_cost.cluster_cost`, as "
        "`decide_teardown` derives them.",
        "",
        "## Prices",
        "",
    ]
    rows = [
        [
            c["label"], f"{c['idle_price_per_hour']:.2f}", f"{c['shrunk_price_per_hour']:.2f}",
            f"{c['provisioning_minutes']:g}", f"{c['scale_up_minutes']:g}",
            f"{c['delay_penalty_per_hour']:g}", f"{c['recreation_cost']:.2f}",
            f"{c['scale_up_cost']:.2f}", f"{c['break_even_minutes']:.1f}",
        ]
        for c in config["cells"]
    ]  # fmt: skip
    out += _table(
        ["cluster", "r_k /h", "r_s /h", "create min", "scale-up min", "delay /h", "C_d", "C_s",
         "keep/delete break-even min"],
        rows,
    )  # fmt: skip
    out += ["", f"Price source: {config['cells'][0]['prices']}", "", "## Goals", ""]
    out += _table(
        ["#", "goal", "measured (worst cell)", "result"],
        [
            [g["id"], g["goal"], f"{g['measured']:.4f} ({g['where']})",
             "met" if g["met"] else "**NOT met**"]
            for g in results["goals"]
        ],
    )  # fmt: skip
    for cell in config["cells"]:
        label = cell["label"]
        cells = [r for r in results["results"] if r["cell"] == label]
        names = list(dict.fromkeys(r["trace"] for r in cells))
        by = {(r["trace"], r["policy"]): r for r in cells}
        out += ["", f"## {label}", "", "Cost / OPT (shares of keep / shrink / delete for ours):"]
        out.append("")
        header = ["trace", *SHORT.values(), "ours: keep/shrink/delete"]
        rows = []
        for name in names:
            mine = by[(name, "ours-auto")]
            shares = "/".join(f"{mine[f'share_{a}']:.2f}" for a in ("keep", "shrink", "delete"))
            rows.append([name, *(f"{by[(name, p)]['ratio']:.3f}" for p in SHORT), shares])
        out += _table(header, rows)
    return "\n".join(out) + "\n"
