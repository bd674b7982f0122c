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


def _tasks(spec: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every task of the root DAG and of every sub-DAG (exit handlers, conditions)."""
    dags = [spec.get("root") or {}, *(spec.get("components") or {}).values()]
    for component in dags:
        yield from ((component.get("dag") or {}).get("tasks") or {}).values()


def with_caching(spec: Mapping[str, Any], enabled: bool) -> dict[str, Any]:
    """A copy of a PipelineSpec (dict form) with caching set to ``enabled`` on every
    container task (DAG groups such as exit handlers and conditions are not executions)."""
    rewritten = copy.deepcopy(dict(spec))
    executor_components = {
        name
        for name, component in (rewritten.get("components") or {}).items()
        if "executorLabel" in component
    }
    for task in _tasks(rewritten):
        if (task.get("componentRef") or {}).get("name") in executor_components:
            task["cachingOptions"] = {"enableCache": bool(enabled)}
    return rewritten


def caching_settings(spec: Mapping[str, Any]) -> dict[str, bool]:
    """Whether caching is on, by task name, for every container task of a PipelineSpec."""
    executor_components = {
        name
        for name, component in (spec.get("components") or {}).items()
        if "executorLabel" in component
    }
    return {
        task["taskInfo"]["name"]: bool((task.get("cachingOptions") or {}).get("enableCache"))
        for task in _tasks(spec)
        if (task.get("componentRef") or {}).get("name") in executor_components
    }
