"""The parameters of a compiled pipeline template: their declarations, values typed by them,
and the checks a run's values pass before anything is submitted.

Used by ``vsp submit``, ``vsp schedule`` and ``vsp run-local`` alike: an unknown, missing,
wrongly typed or null value is refused with the fix, naming the option group a parameter belongs
in when it is one of a group's.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from vsp.components.runtime.cluster.rules_base import Problems

PARAMETER_TYPES: dict[str, Callable[[Any], bool]] = {
    "STRING": lambda v: isinstance(v, str),
    "NUMBER_INTEGER": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "NUMBER_DOUBLE": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "BOOLEAN": lambda v: isinstance(v, bool),
    "LIST": lambda v: isinstance(v, list),
    "STRUCT": lambda v: isinstance(v, dict),
}
_EXAMPLES = {
    "STRING": "text",
    "NUMBER_INTEGER": "3",
    "NUMBER_DOUBLE": "0.5",
    "BOOLEAN": "true",
    "LIST": '\'["a", "b"]\'',
    "STRUCT": '\'{"key": "value"}\'',
}


def root_parameters(spec: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The pipeline's parameters: ``root.inputDefinitions.parameters`` (name -> definition)."""
    return dict(((spec.get("root") or {}).get("inputDefinitions") or {}).get("parameters") or {})


def option_groups(spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """The pipeline's option groups: parameter -> the names it may hold.

    Read from the ``option_names`` constant a pipeline with a short form passes to its first
    step (``slurm-spot-training``); empty for a pipeline without groups.
    """
    dags = [(spec.get("root") or {}).get("dag") or {}]
    dags += [c.get("dag") or {} for c in (spec.get("components") or {}).values()]
    for dag in dags:
        for task in (dag.get("tasks") or {}).values():
            inputs = (task.get("inputs") or {}).get("parameters") or {}
            constant = ((inputs.get("option_names") or {}).get("runtimeValue") or {}).get(
                "constant"
            )
            if isinstance(constant, dict):
                return {str(k): list(v) for k, v in constant.items()}
    return {}


def is_required(definition: Mapping[str, Any]) -> bool:
    """Whether a parameter must be given (no default value and not optional)."""
    return "defaultValue" not in definition and not definition.get("isOptional")


def typed_parameters(
    raw: Mapping[str, str], definitions: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, Any]:
    """Turns ``NAME=VALUE`` texts into parameter values by the template's declared types.

    STRING parameters keep the text as written (``001`` stays ``"001"``), except a text that is
    one double-quoted JSON string (``"/gcs/b/m"``, as for the untyped ones): its content, not the
    quotes. Other declared types, and every parameter when the types are unknown
    (``definitions`` None), are read as YAML.
    """
    values: dict[str, Any] = {}
    for name, text in raw.items():
        kind = ((definitions or {}).get(name) or {}).get("parameterType")
        if kind == "STRING" or text == "":
            values[name] = _unquoted(text)
            continue
        try:
            values[name] = yaml.safe_load(text)
        except yaml.YAMLError:
            values[name] = text
        if kind == "NUMBER_DOUBLE" and isinstance(values[name], str):
            try:  # YAML 1.1 reads 1e30 (no dot) as a string
                values[name] = float(text)
            except ValueError:
                pass
    return values


def _unquoted(text: str) -> str:
    """The content of a double-quoted JSON string, else ``text`` as it is."""
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            found = json.loads(text)
        except ValueError:
            return text
        if isinstance(found, str):
            return found
    return text


def check_parameters(
    problems: Problems,
    values: Mapping[str, Any],
    definitions: Mapping[str, Mapping[str, Any]],
    field: str = "parameter_values",
    groups: Mapping[str, list[str]] | None = None,
) -> None:
    """Records unknown, missing required and wrongly typed parameters.

    Args:
        problems: Where the problems go.
        values: The parameters given.
        definitions: The pipeline's parameters (``root_parameters``).
        field: How the values were given, for the messages.
        groups: The pipeline's option groups (``option_groups``): an unknown parameter that
            belongs in one is named with that group.
    """
    known = ", ".join(sorted(definitions)) or "(none)"
    for name, value in values.items():
        definition = definitions.get(name)
        group = next((g for g, names in (groups or {}).items() if name in names), None)
        if definition is None and group is not None:
            problems.add(
                _path(field, name), value, f"Is not a parameter of the pipeline but of {group}.",
                f"Put it in that group: --param '{group}={{\"{name}\": ...}}'.",
            )  # fmt: skip
            continue
        if definition is None:
            close = difflib.get_close_matches(name, list(definitions), n=1, cutoff=0.75)
            fix = f"Did you mean {close[0]}? " if close else ""
            problems.add(
                _path(field, name), value, "The pipeline has no such parameter.",
                f"{fix}Use one of the pipeline's parameters: {known}.",
            )  # fmt: skip
            continue
        kind = definition.get("parameterType", "")
        check = PARAMETER_TYPES.get(kind)
        if check is not None and not check(value):
            problems.add(
                _path(field, name), value, f"The pipeline declares it {kind}.",
                f"Give a {kind} value, e.g. --param {name}={_EXAMPLES.get(kind, 'VALUE')}.",
            )  # fmt: skip
            continue
        check_nulls(problems, {name: value}, field)
    for name, definition in sorted(definitions.items()):
        if is_required(definition) and name not in values:
            problems.missing(_path(field, name), f"Set it: --param {name}=VALUE.")


def _path(field: str, name: str) -> str:
    """A parameter as the user gave it: ``--param nodes``, ``parameter_values.nodes``."""
    return f"{field} {name}" if field.startswith("--") else f"{field}.{name}"


def check_nulls(problems: Problems, values: Mapping[str, Any], field: str) -> None:
    """Records each parameter that holds a null (JSON ``null``), itself or inside it."""
    for name, value in values.items():
        where = null_inside(value)
        if where is None:
            continue
        fix = (
            "Remove that item, or give it a value."
            if where.endswith("]")
            else "Leave it out to take its default, or give a value."
        )
        problems.add(
            _path(field, name) + where, value if where else "null",
            "Is null, which no parameter can carry.", fix,
        )  # fmt: skip


def null_inside(value: Any, where: str = "") -> str | None:
    """Where the first null sits in ``value`` (``""`` for the value itself, ``.key`` or
    ``[index]`` inside it), or None when there is none."""
    if value is None:
        return where
    if isinstance(value, Mapping):
        items = ((f"{where}.{key}", item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((f"{where}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for path, item in items:
        found = null_inside(item, path)
        if found is not None:
            return found
    return None
