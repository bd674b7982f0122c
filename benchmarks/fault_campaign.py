"""The fault campaign outside pytest: thousands of generated fault plans and bad inputs.

``python -m benchmarks.fault_campaign --plans 2000 --inputs 1000 [--seed N] [--out DIR]``
runs the generators of ``tests/campaign`` (see ``campaign_drive``) and writes
``fault_campaign.json`` and ``fault_campaign.md`` to ``DIR`` (default ``benchmarks/results``):
machine, date, seed, counts per entry point and per fault kind (plans run, faults fired as
counted by the emulator's rules, invariants checked, violations) and every violation with the
plan that replays it (``Plan(**plan)`` in ``campaign_plans.run_plan``); wall time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import tempfile
import time

from tests.campaign import campaign_drive


def _markdown(report: dict) -> str:
    lines = [
        "# Fault campaign",
        "",
        f"{report['date']} on {report['machine']}; seed {report['seed']}; "
        f"wall time {report['wall_seconds']:.0f} s.",
        "",
        f"- fault plans: {report['fault_plans']}",
        f"- bad inputs: {report['bad_inputs']}",
        f"- faults fired: {report['faults_fired']}",
        f"- invariants checked: {report['invariants_checked']}",
        f"- violations: {report['violation_count']}",
        "",
    ]
    for title, key in (("Entry point", "per_entry_point"), ("Fault kind", "per_fault_kind")):
        lines += [f"| {title} | plans | fired | checked | violations |", "|---|---|---|---|---|"]
        for name, row in report[key].items():
            counts = [row.get(k, 0) for k in ("plans", "fired", "checked", "violations")]
            lines.append(f"| {name} | " + " | ".join(str(c) for c in counts) + " |")
        lines.append("")
    lines += ["| Bad inputs of | count |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in report["bad_inputs_per_entry_point"].items()]
    lines += ["", "Outcomes: " + ", ".join(f"{k} {v}" for k, v in report["outcomes"].items())]
    lines += ["", "## Violations", ""]
    lines += [f"- `{json.dumps(v)}`" for v in report["violations"]] or ["None."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    """Runs the campaign and writes the results; returns the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=2000)
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--batch", type=int, default=100, help="fault plans per emulator")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vsp-campaign-") as root:
        tally = campaign_drive.campaign(
            pathlib.Path(root), args.plans, args.inputs, args.seed, args.batch
        )
    report = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "seed": args.seed,
        "batch": args.batch,
        "wall_seconds": round(time.monotonic() - start, 1),
        **tally.as_dict(),
    }
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fault_campaign.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "fault_campaign.md").write_text(_markdown(report))
    print(_markdown(report))
    return report


if __name__ == "__main__":
    main()
