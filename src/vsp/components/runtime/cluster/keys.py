"""Key handling shared by the cluster models, rules, builder and diff.

* ``field_name`` maps a snake_case or camelCase key to the snake_case field it stands for.
* ``snake_keys`` rewrites every known field key of a nested dict to snake_case, keeping the keys
  of maps (``labels``, ``config``) verbatim.
* ``problems_from_validation_error`` turns a pydantic ``ValidationError`` into ``SpecProblem``s with
  a path like ``node_pools[1].machine_spec.accelerator_count``, the value, the problem and a fix
  (unknown keys get the closest known field name as a suggestion).

Nothing here knows the cluster models: the root model is always passed in.
"""

from __future__ import annotations

import difflib
import functools
import types
import typing
from typing import Any, Union

import pydantic

from vsp.components.runtime.core import errors


@functools.cache
def _key_index(model: type[pydantic.BaseModel]) -> dict[str, str]:
    index: dict[str, str] = {}
    for name, info in model.model_fields.items():
        index[name] = name
        if info.alias:
            index[info.alias] = name
    return index


def field_name(model: type[pydantic.BaseModel], key: str) -> str | None:
    """The snake_case field name a key (snake_case or camelCase) stands for, or None."""
    return _key_index(model).get(key)


def nested_model(model: type[pydantic.BaseModel], name: str) -> type[pydantic.BaseModel] | None:
    """The model class inside field ``name`` (unwrapping Optional and list), or None."""
    pending = [model.model_fields[name].annotation]
    while pending:
        annotation = pending.pop()
        if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
            return annotation
        origin = typing.get_origin(annotation)
        if origin in (Union, types.UnionType, list):
            pending.extend(typing.get_args(annotation))
    return None


def model_at(loc: tuple[Any, ...], root: type[pydantic.BaseModel]) -> type[pydantic.BaseModel]:
    """The model class that holds the last element of a pydantic error ``loc``."""
    model = root
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        name = field_name(model, str(part))
        inner = nested_model(model, name) if name else None
        if inner is None:
            break
        model = inner
    return model


def snake_keys(data: Any, model: type[pydantic.BaseModel]) -> Any:
    """Copies ``data`` with every known field key in snake_case; map keys stay verbatim."""
    if isinstance(data, list):
        return [snake_keys(item, model) for item in data]
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = field_name(model, key)
        if name is None:
            out[key] = value
            continue
        inner = nested_model(model, name)
        out[name] = snake_keys(value, inner) if inner else value
    return out


# ---- pydantic errors -> SpecProblems ----

_TYPE_FIXES = {
    "string_type": "Give a string; quote it in YAML/JSON (YAML reads yes/no/on/off and numbers "
    'as non-strings), e.g. "10".',
    "int_type": "Give a whole number, e.g. 8.",
    "int_parsing": "Give a whole number, e.g. 8.",
    "int_from_float": "Give a whole number, e.g. 8.",
    "bool_type": "Give true or false.",
    "bool_parsing": "Give true or false.",
    "list_type": "Give a list, e.g. [a, b].",
    "dict_type": "Give a mapping of string keys to string values.",
    "model_type": "Give a mapping (JSON object) with the documented fields.",
    "model_attributes_type": "Give a mapping (JSON object) with the documented fields.",
    "value_error": "Give a whole number, e.g. 8.",
}


def format_loc(loc: tuple[Any, ...]) -> str:
    """Formats a pydantic loc as ``node_pools[1].machine_spec.accelerator_count``."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "cluster"


def _extra_problem(loc: tuple[Any, ...], root: type[pydantic.BaseModel]) -> tuple[str, str]:
    model = model_at(loc, root)
    key = str(loc[-1])
    name = field_name(model, key)
    if name is not None:
        alias = model.model_fields[name].alias or name
        return (
            f"Field given twice, as '{name}' and '{alias}'.",
            f"Keep one spelling of '{name}' and delete the other.",
        )
    names = list(model.model_fields)
    choices = names + [info.alias for info in model.model_fields.values() if info.alias]
    close = difflib.get_close_matches(key, choices, n=1, cutoff=0.6)
    if close:
        suggestion = field_name(model, close[0])
        return (
            f"Unknown field '{key}' (did you mean '{suggestion}'?).",
            f"Rename it to '{suggestion}'.",
        )
    return (f"Unknown field '{key}'.", f"Remove it; known fields here: {', '.join(names)}.")


def problems_from_validation_error(
    error: pydantic.ValidationError, root: type[pydantic.BaseModel]
) -> list[errors.SpecProblem]:
    """Converts a pydantic ``ValidationError`` into SpecProblems that name field, value and fix.

    Args:
        error: The error raised by ``root.model_validate``.
        root: The model that was validated.

    Returns:
        One problem per pydantic error, in pydantic's order.
    """
    problems = []
    for item in error.errors():
        loc = tuple(item.get("loc", ()))
        kind = item.get("type", "")
        value = item.get("input")
        if kind == "extra_forbidden" and loc:
            problem, fix = _extra_problem(loc, root)
        elif kind == "missing":
            value = None
            problem, fix = "Required field is missing.", "Set it."
        else:
            message = str(item.get("msg", "invalid value")).removeprefix("Value error, ")
            problem = message.rstrip(".") + "."
            fix = _TYPE_FIXES.get(kind, "Correct the value.")
        problems.append(errors.SpecProblem(format_loc(loc), value, problem, fix))
    return problems
