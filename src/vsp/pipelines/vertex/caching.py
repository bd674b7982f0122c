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
from collections.abc import Iterator, Mapping
from typing import Any


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
