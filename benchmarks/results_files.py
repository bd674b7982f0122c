"""Writing a benchmark's results: ``<name>.json`` and ``<name>.md`` in the results folder.

Each file is replaced atomically (a reader never sees half a file); JSON has no NaN or
infinity (they become ``null`` and ``"inf"``/``"-inf"``, which every JSON reader accepts); each
goal of ``results["goals"]`` is printed as met, NOT met or reported (no target), the form
``benchmarks.summary`` reads too.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from typing import Any


def replace_text(path: pathlib.Path, text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary file and a rename."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def finite(value: Any) -> Any:
    """``value`` with every non-finite float made JSON-safe, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def write(out: pathlib.Path, name: str, results: dict, markdown: str) -> None:
    """Writes ``out/name.json`` and ``out/name.md`` and prints each goal's state."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / f"{name}.json", out / f"{name}.md"
    replace_text(json_path, json.dumps(finite(results), indent=1) + "\n")
    replace_text(md_path, markdown)
    for goal in results.get("goals", []):
        state = {True: "met", False: "NOT met"}.get(goal["met"], "reported")
        where = f" ({goal['where']})" if goal.get("where") else ""
        value = goal["measured"]
        shown = f"{value:.4g}" if isinstance(value, (int, float)) else str(value)
        print(f"goal {goal['id']}: {state}: {shown}{where}")
    print(f"wrote {json_path} and {md_path}")
