"""One table of every benchmark goal: what was measured, and whether the goal is met.

Reads the JSON results each benchmark wrote in ``benchmarks/results/`` (it runs nothing) and
writes ``summary.md`` and ``summary.json`` there; the documentation's benchmarks page
(``docs/benchmarks.md``) quotes ``summary.md``'s table between the ``bench-summary`` markers,
and a test fails when the quote differs from what the results say. Benchmarks that write a
``goals`` list (``id``, ``goal`` or ``what``, ``measured``, ``met``) need nothing here; the
others get a small reader below that states their goal.

Usage: ``python -m benchmarks.summary [--results benchmarks/results] [--doc docs/benchmarks.md]``;
``--doc`` rewrites the quoted table in place.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from collections.abc import Callable, Iterator

RESULTS = pathlib.Path(__file__).parent / "results"
BEGIN = "<!-- bench-summary: begin (python -m benchmarks.summary --doc docs/benchmarks.md) -->"
END = "<!-- bench-summary: end -->"

Row = dict[str, object]


def _measured(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _listed_goals(name: str, data: dict) -> Iterator[Row]:
    for goal in data.get("goals") or []:
        where = f" ({goal['where']})" if goal.get("where") else ""
        if goal.get("command"):  # the run that measured it, and its wall time
            where += f"; `{goal['command']}`, {goal['seconds']:.0f} s"
        yield {
            "benchmark": name,
            "goal": str(goal.get("goal") or goal.get("what")),
            "measured": _measured(goal.get("measured")) + where,
            "met": None if goal.get("met") is None else bool(goal["met"]),
        }


def _fault_campaign(name: str, data: dict) -> Iterator[Row]:
    yield {
        "benchmark": name,
        "goal": "no invariant violated (nothing duplicated, leaked or lost) under generated faults",
        "measured": (
            f"{data['violation_count']} violations in {data['fault_plans']} fault plans and "
            f"{data['bad_inputs']} bad inputs"
        ),
        "met": data["violation_count"] == 0,
    }


def _step_start(name: str, data: dict) -> Iterator[Row]:
    steps = data["steps"]
    stock = sum(s["stock"]["start_s"] for s in steps) / len(steps)
    prebuilt = sum(s["prebuilt"]["start_s"] for s in steps) / len(steps)
    yield {
        "benchmark": name,
        "goal": "measure per-step start on a stock image and on the prebuilt image (no target)",
        "measured": f"mean {stock:.1f} s stock, {prebuilt:.2f} s prebuilt ({len(steps)} steps)",
        "met": None,
    }


def _report_chart_cost(name: str, data: dict) -> Iterator[Row]:
    mpl, svg = data["matplotlib"], data["svg"]
    yield {
        "benchmark": name,
        "goal": "choose the report's chart library by measured cost (no target)",
        "measured": (
            f"matplotlib {mpl['installed_mb']} MB, {mpl['pip_install_seconds']} s install; "
            f"hand-written SVG {svg['installed_mb']} MB"
        ),
        "met": None,
    }


READERS: dict[str, Callable[[str, dict], Iterator[Row]]] = {
    "fault_campaign": _fault_campaign,
    "step_start": _step_start,
    "report_chart_cost": _report_chart_cost,
}


def rows(results: pathlib.Path = RESULTS) -> list[Row]:
    """Every goal of every results file, in file-name order."""
    found: list[Row] = []
    for path in sorted(results.glob("*.json")):
        if path.stem == "summary":
            continue
        data = json.loads(path.read_text())
        reader = READERS.get(path.stem, _listed_goals)
        found += list(reader(path.stem, data))
    return found


def table(found: list[Row]) -> str:
    """The Markdown table the benchmarks page quotes."""
    marks = {True: "met", False: "**not met**", None: "measured"}
    lines = ["| benchmark | goal | measured | status |", "|---|---|---|---|"]
    for row in found:
        cells = [f"`{row['benchmark']}`", row["goal"], row["measured"], marks[row["met"]]]
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def quoted(doc_text: str) -> str:
    """The table between the page's markers ('' when the markers are missing)."""
    if BEGIN not in doc_text or END not in doc_text:
        return ""
    return doc_text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=pathlib.Path, default=RESULTS)
    parser.add_argument("--doc", type=pathlib.Path, help="rewrite the table this page quotes")
    args = parser.parse_args(argv)
    found = rows(args.results)
    text = table(found)
    (args.results / "summary.md").write_text(
        "# Benchmark goals\n\nEvery goal of `benchmarks/results/*.json` "
        "(`python -m benchmarks.summary`); each benchmark's own file has the details, the "
        "machine and the date.\n\n" + text
    )
    (args.results / "summary.json").write_text(json.dumps(found, indent=2) + "\n")
    if args.doc:
        doc = args.doc.read_text()
        if not quoted(doc):
            raise SystemExit(f"{args.doc} has no {BEGIN!r} ... {END!r} block to rewrite")
        head, rest = doc.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        args.doc.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
