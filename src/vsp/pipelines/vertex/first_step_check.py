"""The pipeline's first step, ``check-run-parameters``, run on the command line before sending.

``vsp submit`` and ``vsp schedule`` (dry run or not) read from the compiled template what that
task receives, each input either a pipeline parameter (the value given, else the template's
default), a constant, or, when the task does not set it, the component's own default; then
they run the same check the step runs (``steps.check_run_parameters.check_component_params``).
A run the step would refuse is refused here, before anything is sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from vsp.components.runtime.core import errors
from vsp.components.runtime.steps import check_run_parameters
from vsp.pipelines.vertex import template_parameters

CHECK_COMPONENT = "comp-check-run-parameters"
_CHANNEL = "pipelinechannel--"


def _tasks(spec: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every task of the pipeline, nested groups (exit handler, conditions) included."""
    dags = [(spec.get("root") or {}).get("dag") or {}]
    dags += [c.get("dag") or {} for c in (spec.get("components") or {}).values()]
    for dag in dags:
        yield from (dag.get("tasks") or {}).values()


def _typed(value: Any, kind: str | None) -> Any:
    """A template default as the step receives it: the YAML stores integers as floats."""
    if kind == "NUMBER_INTEGER" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def check_task_inputs(spec: Mapping[str, Any], values: Mapping[str, Any]) -> dict | None:
    """The check task's inputs as the template would pass them; None without such a task."""
    task = next(
        (t for t in _tasks(spec) if (t.get("componentRef") or {}).get("name") == CHECK_COMPONENT),
        None,
    )
    if task is None:
        return None
    defaults = {
        name: _typed(definition["defaultValue"], definition.get("parameterType"))
        for name, definition in template_parameters.root_parameters(spec).items()
        if "defaultValue" in definition
    }
    given = {**defaults, **values}
    component = (spec.get("components") or {}).get(CHECK_COMPONENT) or {}
    own = ((component.get("inputDefinitions") or {}).get("parameters")) or {}
    params: dict[str, Any] = {
        name: _typed(definition["defaultValue"], definition.get("parameterType"))
        for name, definition in own.items()
        if "defaultValue" in definition
    }
    for name, source in ((task.get("inputs") or {}).get("parameters") or {}).items():
        if "componentInputParameter" in source:
            root_name = source["componentInputParameter"].removeprefix(_CHANNEL)
            if root_name in given:
                params[name] = given[root_name]
        elif "runtimeValue" in source:
            params[name] = source["runtimeValue"].get("constant")
    return params


def check(spec: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """Runs the first step's check on ``values``; False when the pipeline has no such step.

    Raises:
        errors.SpecValidationError: The step would refuse the run (every problem listed).
    """
    params = check_task_inputs(spec, values)
    if params is None:
        return False
    return check_run_parameters.check_component_params(params)


def _top(field: str) -> str:
    """The parameter a problem's field belongs to: ``cluster_options`` of
    ``cluster_options.zone``, ``node_pools`` of ``node_pools[0].id``."""
    return re.split(r"[.\[]", field, maxsplit=1)[0]


def with_its_problems(
    refused: errors.SpecValidationError,
    spec: Mapping[str, Any] | None,
    values: Mapping[str, Any],
) -> errors.SpecValidationError:
    """The request's problems with the first step's on the values given, in one list.

    A request refused (a required parameter missing, a bad pipeline root) would otherwise show
    the first step's problems (a bad cluster id, a misspelt key) only on the next try. A
    parameter the request reports is not reported again; a required one it reports missing is
    given a stand-in of its type, so that the checks reading it (registration, which reads the
    schedule's cron too) still look at the rest. A check that cannot run on the incomplete
    values adds nothing, as does a template not read here (``spec`` None: one from a registry).
    """
    if spec is None:
        return refused
    said = {p.field.removeprefix("parameter_values.") for p in refused.problems}
    if "cron" in said:  # the schedule's --cron, which fills schedule_cron
        said.add("schedule_cron")
    try:
        check(spec, {**values, **_stand_ins(spec, values, said)})
    except errors.SpecValidationError as found:
        extra = [p for p in found.problems if _top(p.field) not in said]
        return errors.SpecValidationError(
            refused.what, refused.problems + extra, [*refused.notes, *found.notes]
        )
    except Exception:  # noqa: BLE001 - best effort on incomplete values; the request's problems stand
        return refused
    return refused


# A value of each type that the check takes, for a required parameter the user did not give
# (reported as missing already): the check can then look at everything else.
_STAND_IN = {
    "STRING": "x",
    "LIST": ["x"],
    "STRUCT": {},
    "NUMBER_INTEGER": 1,
    "NUMBER_DOUBLE": 1.0,
    "BOOLEAN": False,
}


def _stand_ins(spec: Mapping[str, Any], values: Mapping[str, Any], said: set[str]) -> dict:
    """Stand-ins for the required parameters missing from ``values`` that the request reported."""
    definitions = template_parameters.root_parameters(spec)
    return {
        name: _STAND_IN[definition.get("parameterType", "STRING")]
        for name, definition in definitions.items()
        if name in said
        and name not in values
        and "defaultValue" not in definition
        and not definition.get("isOptional")
        and definition.get("parameterType", "STRING") in _STAND_IN
    }
