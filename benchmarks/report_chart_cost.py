"""Benchmark: what drawing the report's charts costs a step, matplotlib against our SVG code.

The report is drawn inside the training and teardown steps, whose stock image installs only
what their YAML lists. This measures, for matplotlib (installed into a fresh venv, as a step
would) and for the hand-written SVG (``core/svg_chart.py`` and the report chart modules, staged
alone as a component embeds them):

- what the step would install: packages added and megabytes on disk, and the pip install time
  (pip's cache as it is on this machine; the first install of a fresh machine is slower);
- the import time (median of fresh interpreters);
- the time to draw the loss chart of the sample report (700 steps, three preemption lines,
  labelled axes, to an SVG string; median of repeated draws, the first draw apart) and its size.

Writes ``report_chart_cost.json`` and ``report_chart_cost.md`` with the machine and the date.

Usage::

    nice -n 10 python -m benchmarks.report_chart_cost [--out benchmarks/results] [--repeat 5]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from vsp.components import packaging

DEFAULT_OUT = pathlib.Path(__file__).resolve().parent / "results"
MATPLOTLIB = "matplotlib"
OUR_MODULES = ("core.svg_chart", "core.readable_time", "training.report_charts")
_IMPORT = {
    "matplotlib": "import matplotlib; matplotlib.use('svg'); import matplotlib.pyplot",
    "svg": "from vsp.components.runtime.training import report_charts",
}
# Both draw the sample's loss curve: 700 points, three labelled dashed lines, titled axes.
_DRAW = {
    "matplotlib": """
import io, math, time, matplotlib
matplotlib.use("svg")
import matplotlib.pyplot as plt
losses = [0.12 + 2.2 * math.exp(-s / 160.0) for s in range(1, 701)]
def draw():
    fig, ax = plt.subplots(figsize=(8.6, 3.0))
    ax.plot(range(1, 701), losses, color="#4e79a7", label="loss")
    for n, step in enumerate((160, 310, 430), 1):
        ax.axvline(step, color="#e15759", linestyle="--")
        ax.text(step, 2.3, f"P{n}/R{n} step {step}", color="#e15759")
    ax.set_xlabel("training step (steps completed)")
    ax.set_ylabel("loss (no unit)")
    ax.legend()
    out = io.StringIO()
    fig.savefig(out, format="svg")
    plt.close(fig)
    return out.getvalue()
""",
    "svg": """
import time
from vsp.pipelines import report_sample
from vsp.components.runtime.training import report_charts
result, history, end = report_sample._training()
losses = report_sample.losses()
def draw():
    return report_charts.loss_svg(losses, result, end, history)
""",
}
_LIST_DISTRIBUTIONS = (
    "import importlib.metadata as m; print(*sorted(d.metadata['Name'] for d in m.distributions()))"
)
_TIMED = """
t = time.perf_counter(); svg = draw(); first = time.perf_counter() - t
runs = []
for _ in range({repeat}):
    t = time.perf_counter(); draw(); runs.append(time.perf_counter() - t)
import json, statistics
print(json.dumps({{"first": first, "median": statistics.median(runs), "bytes": len(svg)}}))
"""


def _run(python: str, code: str, env: dict | None = None) -> str:
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


def _size_mb(folder: pathlib.Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def _import_seconds(python: str, what: str, repeat: int, env: dict | None = None) -> float:
    code = f"import time; t = time.perf_counter(); {_IMPORT[what]}; print(time.perf_counter() - t)"
    return statistics.median(float(_run(python, code, env)) for _ in range(repeat))


def measure_matplotlib(work: pathlib.Path, repeat: int) -> dict:
    """Installs matplotlib into a fresh venv under ``work`` and measures it."""
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = pathlib.Path(_run(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    before = set(_run(python, _LIST_DISTRIBUTIONS).split())
    size_before = _size_mb(site)
    started = time.perf_counter()
    subprocess.run([python, "-m", "pip", "install", "-q", MATPLOTLIB], check=True)
    install = time.perf_counter() - started
    after = set(_run(python, _LIST_DISTRIBUTIONS).split())
    version = _run(python, "import matplotlib; print(matplotlib.__version__)")
    drawn = json.loads(_run(python, _DRAW["matplotlib"] + _TIMED.format(repeat=repeat)))
    return {
        "version": version,
        "packages_added": sorted(after - before),
        "installed_mb": round(_size_mb(site) - size_before, 1),
        "pip_install_seconds": round(install, 1),
        "import_seconds": round(_import_seconds(python, "matplotlib", repeat), 3),
        "first_draw_seconds": round(drawn["first"], 4),
        "draw_seconds": round(drawn["median"], 4),
        "svg_bytes": drawn["bytes"],
    }


def measure_svg(repeat: int) -> dict:
    """Measures the hand-written SVG code, staged alone as a component embeds it."""
    modules = packaging.runtime_closure(frozenset(OUR_MODULES))
    folder = tempfile.mkdtemp(prefix="vsp-svg-")
    staged = str(packaging.write_files(packaging.runtime_files(modules), folder))
    files = [packaging.module_file(name) for name in sorted(modules)]
    chart_files = [packaging.module_file(name) for name in OUR_MODULES]
    env = {**os.environ, "PYTHONPATH": staged}
    # -S: no site packages, and run from the staged folder (not the repository, whose vsp/
    # would shadow it): the import reads only the staged copy and the standard library.
    python_s = [sys.executable, "-S"]
    code = f"import time; t = time.perf_counter(); {_IMPORT['svg']}; print(time.perf_counter() - t)"
    imports = [
        float(subprocess.run([*python_s, "-c", code], capture_output=True, text=True,
                             check=True, env=env, cwd=staged).stdout)
        for _ in range(repeat)
    ]  # fmt: skip
    drawn = json.loads(_run(sys.executable, _DRAW["svg"] + _TIMED.format(repeat=repeat)))
    return {
        "packages_added": [],
        "installed_mb": 0.0,
        "pip_install_seconds": 0.0,
        "chart_source_kb": round(sum(p.stat().st_size for p in chart_files) / 1024, 1),
        "staged_modules": len(files),
        "import_seconds": round(statistics.median(imports), 3),
        "first_draw_seconds": round(drawn["first"], 4),
        "draw_seconds": round(drawn["median"], 4),
        "svg_bytes": drawn["bytes"],
    }


def machine() -> dict:
    """Where and when it ran."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }


def markdown(results: dict) -> str:
    """The results as a Markdown table with the machine and the date."""
    m, s, where = results["matplotlib"], results["svg"], results["machine"]
    rows = [
        ("packages a step installs in addition", ", ".join(m["packages_added"]), "none"),
        ("installed size (MB)", m["installed_mb"], s["installed_mb"]),
        ("pip install (s)", m["pip_install_seconds"], s["pip_install_seconds"]),
        ("import (s, median)", m["import_seconds"], s["import_seconds"]),
        ("first draw of the loss chart (s)", m["first_draw_seconds"], s["first_draw_seconds"]),
        ("draw of the loss chart (s, median)", m["draw_seconds"], s["draw_seconds"]),
        ("SVG size (bytes)", m["svg_bytes"], s["svg_bytes"]),
    ]
    lines = [
        "# Report charts: matplotlib against hand-written SVG",
        "",
        f"Measured {where['date']} on {where['platform']}, Python {where['python']}, "
        f"{where['cpus']} CPUs ({where['processor']}), with `nice -n 10` beside other work.",
        "",
        f"| | matplotlib {m['version']} | hand-written SVG |",
        "|---|---|---|",
        *[f"| {what} | {a} | {b} |" for what, a, b in rows],
        "",
        f"The SVG code is {s['chart_source_kb']} KiB of source (`core/svg_chart.py`, "
        "`core/readable_time.py`, `training/report_charts.py`), embedded in the step's YAML; "
        f"imported from a staged copy of the {s['staged_modules']} runtime modules it needs, "
        "without site packages. pip's cache was as this machine had it (a fresh machine "
        "downloads the wheels too).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Runs both measurements and writes the JSON and Markdown results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vsp-chart-bench-") as work:
        results = {
            "machine": machine(),
            "matplotlib": measure_matplotlib(pathlib.Path(work), args.repeat),
            "svg": measure_svg(args.repeat),
        }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report_chart_cost.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "report_chart_cost.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
