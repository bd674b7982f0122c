"""Overriding the execution caching of every task of a compiled pipeline.

Vertex AI Pipelines has no request field for caching: the Vertex AI SDK's ``enable_caching``
rewrites ``cachingOptions.enableCache`` of every task in the PipelineSpec before submitting, and
leaves the template's own per-task settings alone when it is not given. ``with_caching`` does
the same for ``vsp submit``, ``vsp schedule`` and local runs. The templates of this project turn
caching off for every task with a side effect; forcing it on brings back the problem that
setting prevents (a scheduled run skipping its teardown), so the command line says so.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from typing import Any

# The steps whose outcome depends only on their inputs: a cache hit is as good as a run.
PURE_STEPS = frozenset({"check_run_parameters"})
# How a compiled vsp component names the runtime step it runs (its program's import).
_STEP_IMPORT = re.compile(r"from vsp\.components\.runtime\.steps import (\w+)")


def _container_tasks(spec: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every task that runs a container, in the root DAG and every sub-DAG (exit handlers,
    conditions); the DAG groups themselves are not executions."""
    components = spec.get("components") or {}
    executors = {name for name, c in components.items() if "executorLabel" in c}
    for dag in [spec.get("root") or {}, *components.values()]:
        for task in ((dag.get("dag") or {}).get("tasks") or {}).values():
            if (task.get("componentRef") or {}).get("name") in executors:
                yield task


def with_caching(spec: Mapping[str, Any], enabled: bool) -> dict[str, Any]:
    """A copy of a PipelineSpec (dict form) with caching set to ``enabled`` on every
    container task."""
    rewritten = copy.deepcopy(dict(spec))
    for task in _container_tasks(rewritten):
        task["cachingOptions"] = {"enableCache": bool(enabled)}
    return rewritten


def caching_settings(spec: Mapping[str, Any]) -> dict[str, bool]:
    """Whether caching is on, by task name, for every container task of a PipelineSpec."""
    return {
        task["taskInfo"]["name"]: bool((task.get("cachingOptions") or {}).get("enableCache"))
        for task in _container_tasks(spec)
    }


def cached_side_effects(spec: Mapping[str, Any]) -> dict[str, str]:
    """The tasks of a PipelineSpec that run a vsp step with a side effect and have caching on.

    Such a task is skipped when its inputs match an earlier execution's, and the pipeline run
    placeholder does not make them differ (kfp.local keys its cache on the placeholder as
    written; Vertex AI on the inputs it resolves, which a scheduled run repeats): a run then
    creates, trains or deletes nothing and passes on the outputs of an earlier run.

    Returns:
        Task name -> the vsp step it runs, for each such task.
    """
    components = spec.get("components") or {}
    executors = ((spec.get("deploymentSpec") or {}).get("executors")) or {}
    found = {}
    for task in _container_tasks(spec):
        if not (task.get("cachingOptions") or {}).get("enableCache"):
            continue
        component = components.get((task.get("componentRef") or {}).get("name")) or {}
        container = (executors.get(component.get("executorLabel")) or {}).get("container") or {}
        program = " ".join(str(part) for part in [*(container.get("command") or []),
                                                  *(container.get("args") or [])])  # fmt: skip
        step = vsp_step(program)
        if step and step not in PURE_STEPS:
            found[task["taskInfo"]["name"]] = step
    return found


def vsp_step(program: str) -> str:
    """The vsp runtime step a compiled component's program runs ('' for another component)."""
    found = _STEP_IMPORT.search(program)
    return found[1] if found else ""


def side_effect_caching_warning(spec: Mapping[str, Any]) -> str:
    """A warning naming the cached tasks with side effects ('' when there are none)."""
    cached = cached_side_effects(spec)
    if not cached:
        return ""
    tasks = ", ".join(f"{task} ({step})" for task, step in sorted(cached.items()))
    return (
        f"warning: caching is on for tasks that act on the world: {tasks}. A run whose inputs "
        "match an earlier run's skips them and passes on that run's outputs (no cluster "
        "created or deleted, no training, an old model registered again). Fix: call "
        "task.set_caching_options(False) on each, or turn caching off for the run "
        "(--no-enable-caching; enable_caching=False)."
    )
