"""Benchmark: emulator request latency at 0/50/200 clusters and 0/100/1000 model versions.

The emulator's store once rewrote a whole collection file on every write, so a write cost
grew with the state (issue figures: a cluster create 5 ms at 0 clusters, 143 ms at 200; an
upload 151 ms at 1000 versions). It now writes one SQLite row per document. This benchmark
times create/get/list of clusters and upload/get/listVersions of model versions at each size
(``emulator_scale_measure``), for the current tree ("after") and a baseline ("before"):

* ``--baseline-python PY``: a Python whose ``vsp`` is an older tree (e.g. a venv with a
  worktree of an earlier commit installed), run on the same measurement file;
* ``--baseline-json FILE``: a measurement written earlier by ``emulator_scale_measure``;
* neither: the "before" of the previous results file, if any, else none (the issue's figures
  are quoted in the report).

Goals (per-write latency flat): the median create at 200 clusters / at 0, and the median upload
at 1000 versions / at 0, each at most 1.5.

Usage::

    nice -n 10 python -m benchmarks.emulator.scale [--out benchmarks/results] [--repeats 30]
        [--baseline-python /path/to/old/venv/bin/python | --baseline-json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
from typing import Any

from benchmarks.emulator import scale_measure

GOAL_RATIO = 1.5
ISSUE_FIGURES = "create 5 ms at 0 clusters, 143 ms at 200; upload 151 ms at 1000 versions"
WRITES = (("clusters", "create", "W1", "clusters"), ("models", "upload", "W2", "versions"))
OPERATIONS = {"clusters": ("create", "get", "list"), "models": ("upload", "get", "list")}


def machine() -> str:
    """The machine the numbers were measured on."""
    return (
        f"{platform.machine()} {os.cpu_count()} cpus, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def baseline_from_python(python: str, repeats: int, counts: str, versions: str) -> dict:
    """Runs the measurement file under another interpreter (its own ``vsp`` tree)."""
    script = pathlib.Path(scale_measure.__file__).resolve()
    with tempfile.TemporaryDirectory() as scratch:
        out = pathlib.Path(scratch) / "baseline.json"
        command = [python, str(script), "--out", str(out), "--repeats", str(repeats)]
        command += ["--clusters", counts, "--versions", versions]
        subprocess.run(command, check=True, cwd=scratch)
        return json.loads(out.read_text())


def tree_commit(emulator_file: str) -> str:
    """The git commit of the tree an ``emulator`` path belongs to ('' when not a checkout)."""
    folder = pathlib.Path(emulator_file).resolve().parent
    found = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() if found.returncode == 0 else ""


def ratio(series: list[dict[str, Any]], operation: str) -> float | None:
    """Median at the largest size / median at size 0 (None without both)."""
    by_size = {s["size"]: s[operation]["median_ms"] for s in series}
    if 0 not in by_size or len(by_size) < 2 or by_size[0] <= 0:
        return None
    return by_size[max(by_size)] / by_size[0]


def goals(after: dict[str, Any], before: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The write goals, each with its measured ratio and met / not met."""
    rows = []
    for kind, operation, goal_id, unit in WRITES:
        measured = ratio(after[kind], operation)
        sizes = [s["size"] for s in after[kind]]
        rows.append(
            {
                "id": goal_id,
                "goal": f"{operation} latency at {max(sizes)} {unit} / at 0 <= {GOAL_RATIO}",
                "measured": measured,
                "before": ratio(before[kind], operation) if before else None,
                "met": measured is not None and measured <= GOAL_RATIO,
            }
        )
    return rows


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(report: dict[str, Any]) -> str:
    """The results as Markdown: goals, then a table per resource."""
    before = report["before"]
    lines = [
        "# Emulator scale",
        "",
        f"{report['date']} on {report['machine']}; {report['repeats']} timed requests per "
        "cell (median, p95 in ms), each through `EmulatorApp.handle` without HTTP.",
        "",
        f"Before: {report['before_source']}. After: the current tree (SQLite store, one row per "
        "document; model versions as their own documents).",
        "",
        "| goal | target | before | after | status |",
        "|---|---|---|---|---|",
    ]
    for row in report["goals"]:
        status = "met" if row["met"] else "not met"
        lines.append(
            f"| {row['id']} | {row['goal']} | {_fmt(row['before'])}x | "
            f"{_fmt(row['measured'])}x | {status} |"
        )
    for kind, label in (("clusters", "clusters stored"), ("models", "versions stored")):
        lines += ["", f"## {kind.capitalize()}", ""]
        header = f"| {label} | " + " | ".join(
            f"{op} before | {op} after" for op in OPERATIONS[kind]
        )
        lines += [header + " |", "|---" * (1 + 2 * len(OPERATIONS[kind])) + "|"]
        old = {s["size"]: s for s in before[kind]} if before else {}
        for series in report["after"][kind]:
            cells = []
            for op in OPERATIONS[kind]:
                prior = old.get(series["size"], {}).get(op)
                cells.append(
                    "-" if prior is None else f"{prior['median_ms']:.2f} / {prior['p95_ms']:.2f}"
                )
                cells.append(f"{series[op]['median_ms']:.2f} / {series[op]['p95_ms']:.2f}")
            lines.append(f"| {series['size']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Figures quoted in the issue (before, its own harness): {ISSUE_FIGURES}.",
        "Reads (get, list) have no goal; a first-page list still sorts every name of its "
        "collection, so it grows with the state.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measures, compares with the baseline, writes ``emulator_scale.json`` and ``.md``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results", help="results directory")
    parser.add_argument("--repeats", type=int, default=30, help="timed requests per cell")
    parser.add_argument("--clusters", default="0,50,200", help="cluster counts")
    parser.add_argument("--versions", default="0,100,1000", help="version counts")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--baseline-python", help="interpreter whose vsp is the older tree")
    source.add_argument("--baseline-json", help="an earlier emulator_scale_measure output")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    previous_path = out / "emulator_scale.json"
    if args.baseline_python:
        before = baseline_from_python(
            args.baseline_python, args.repeats, args.clusters, args.versions
        )
        before_source = (
            f"measured in the same run with {args.baseline_python}: the tree at commit "
            f"{tree_commit(before['emulator']) or '?'} ({before['emulator']})"
        )
    elif args.baseline_json:
        before = json.loads(pathlib.Path(args.baseline_json).read_text())
        before_source = f"{args.baseline_json} ({before['emulator']})"
    elif previous_path.exists():
        previous = json.loads(previous_path.read_text())
        before, before_source = previous["before"], previous["before_source"]
    else:
        before, before_source = None, f"not measured (issue figures: {ISSUE_FIGURES})"
    counts = tuple(int(n) for n in args.clusters.split(","))
    versions = tuple(int(n) for n in args.versions.split(","))
    after = scale_measure.measure(counts, versions, args.repeats)
    report = {
        "benchmark": "emulator_scale",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "repeats": args.repeats,
        "goal_ratio": GOAL_RATIO,
        "before_source": before_source,
        "before": before,
        "after": after,
        "goals": goals(after, before),
    }
    previous_path.write_text(json.dumps(report, indent=1) + "\n")
    (out / "emulator_scale.md").write_text(markdown(report))
    for row in report["goals"]:
        status = "met" if row["met"] else "NOT MET"
        print(f"{row['id']} {row['goal']}: {_fmt(row['measured'])}x ({status})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
