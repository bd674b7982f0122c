"""What a local run left behind: a label per journaled request and kfp.local's task outputs."""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
from typing import Any

log = logging.getLogger(__name__)


@dataclasses.dataclass
class LocalRunResult:
    """What a local run did.

    Attributes:
        pipeline: Pipeline name.
        succeeded: Whether every task succeeded.
        seconds: Wall time of the run.
        calls: Count of journal entries by ``METHOD kind`` (e.g. ``POST create-cluster``).
        journal: The journal entries written during the run.
        state_dir: The emulator's state directory (None when an external emulator was used).
        error: The failure message when the run failed.
        outputs: Task output files of the run by ``task/output``, e.g. ``train-on-cluster/report``.
        parameters: Output parameters of each task that ran, by task name.
        run_dir: kfp.local's folder of the run ('' when none was found).
        mode: ``faithful`` (compiled template, a venv per step) or ``in-process``.
        interrupted: 128 + the signal that cancelled the run (143 SIGTERM, 130 SIGINT), or 0.
    """

    pipeline: str
    succeeded: bool
    seconds: float
    calls: dict[str, int]
    journal: list[dict[str, Any]]
    state_dir: str | None
    error: str = ""
    outputs: dict[str, str] = dataclasses.field(default_factory=dict)
    parameters: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    run_dir: str = ""
    mode: str = "faithful"
    interrupted: int = 0


def classify_call(entry: dict[str, Any]) -> str:
    """A short label of a journaled request, e.g. ``create cluster`` or ``get operation``."""
    method, path = entry.get("method", ""), entry.get("path", "")
    tail = path.rsplit("/", 2)
    if "/operations/" in path:
        return "wait operation" if path.endswith(":wait") else f"{method} operation"
    if path.endswith("/customJobs"):
        return "create custom job" if method == "POST" else "list custom jobs"
    if "/customJobs/" in path:
        return "cancel custom job" if path.endswith(":cancel") else f"{method} custom job"
    if ":upload" in path or ":listVersions" in path or ":mergeVersionAliases" in path:
        return {"upload": "upload model", "listVersions": "list model versions"}.get(
            path.rsplit(":", 1)[-1], "merge version aliases"
        )
    if path.endswith("/pipelineJobs"):
        return "create pipeline job" if method == "POST" else "list pipeline jobs"
    if path.endswith("/modelDevelopmentClusters"):
        return "create cluster" if method == "POST" else "list clusters"
    if "/modelDevelopmentClusters/" in path:
        verb = {"GET": "get", "DELETE": "delete", "PATCH": "update"}.get(method, method)
        return f"{verb} cluster" if ":" not in tail[-1] else f"{method} {tail[-1].split(':')[-1]}"
    return f"{method} {path}"


def run_dirs(root: pathlib.Path, pipeline: str) -> set[pathlib.Path]:
    """kfp.local's folders of the runs of ``pipeline`` under the pipeline root."""
    return set(root.glob(f"{pipeline}-*"))


def newest_run(
    root: pathlib.Path, pipeline: str, earlier: set[pathlib.Path] = frozenset()
) -> pathlib.Path | None:
    """kfp.local's folder of the newest run of ``pipeline`` under the pipeline root, leaving
    out the ``earlier`` runs' folders (None: this run left none, e.g. it failed before any
    step wrote an output; an earlier run's outputs are never shown as this run's)."""
    runs = sorted(run_dirs(root, pipeline) - set(earlier), key=lambda p: p.stat().st_mtime)
    return runs[-1] if runs else None


def task_outputs(run_dir: pathlib.Path | None) -> dict[str, str]:
    """Output files of a run by ``task/output``."""
    if run_dir is None:
        return {}
    return {
        str(path.relative_to(run_dir)): str(path)
        for path in sorted(run_dir.glob("*/*"))
        if path.is_file() and path.name != "executor_output.json"
    }


def task_parameters(run_dir: pathlib.Path | None) -> dict[str, dict[str, Any]]:
    """Output parameters of each task of a run, from kfp.local's executor output files."""
    if run_dir is None:
        return {}
    found = {}
    for path in sorted(run_dir.glob("*/executor_output.json")):
        try:
            found[path.parent.name] = json.loads(path.read_text()).get("parameterValues") or {}
        except (OSError, ValueError):
            log.warning("unreadable task output %s", path)
    return found
