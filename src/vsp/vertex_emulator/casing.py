"""snake_case / camelCase key conversion for proto-JSON bodies.

Google REST APIs accept either spelling of a field name and answer in camelCase. Keys of
user-keyed maps (``labels``, Slurm ``config`` maps, ...) are data, not field names, and are kept
verbatim: pass their field names in ``verbatim``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

DEFAULT_VERBATIM = frozenset({"labels", "config"})

_UPPER = re.compile(r"(?<!^)(?=[A-Z])")


class CaseConflictError(ValueError):
    """Two keys of one object name the same field (e.g. ``node_pools`` and ``nodePools``).

    Attributes:
        path: Dotted snake_case path of the object holding both keys.
        keys: The two conflicting keys as written.
    """

    def __init__(self, path: str, first: str, second: str):
        self.path = path
        self.keys = (first, second)
        where = f" at '{path}'" if path else ""
        super().__init__(f'Fields "{first}" and "{second}"{where} name the same field.')


def snake_to_camel(name: str) -> str:
    """``boot_disk_size_gb`` -> ``bootDiskSizeGb`` (camelCase input is returned unchanged)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_to_snake(name: str) -> str:
    """``bootDiskSizeGb`` -> ``boot_disk_size_gb`` (snake_case input is returned unchanged)."""
    return _UPPER.sub("_", name).lower()


def to_camel(value: Any, verbatim: Iterable[str] = DEFAULT_VERBATIM) -> Any:
    """Returns a copy of a JSON value with every field name in camelCase.

    Args:
        value: A decoded JSON value.
        verbatim: snake_case field names whose object values are user-keyed maps.

    Returns:
        The converted copy.

    Raises:
        CaseConflictError: One object holds two spellings of the same field.
    """
    return _convert(value, snake_to_camel, frozenset(verbatim), "")


def to_snake(value: Any, verbatim: Iterable[str] = DEFAULT_VERBATIM) -> Any:
    """Returns a copy of a JSON value with every field name in snake_case.

    Args:
        value: A decoded JSON value.
        verbatim: snake_case field names whose object values are user-keyed maps.

    Returns:
        The converted copy.

    Raises:
        CaseConflictError: One object holds two spellings of the same field.
    """
    return _convert(value, camel_to_snake, frozenset(verbatim), "")


def _convert(value: Any, rename: Callable[[str], str], verbatim: frozenset[str], path: str) -> Any:
    if isinstance(value, list):
        return [_convert(item, rename, verbatim, f"{path}[{i}]") for i, item in enumerate(value)]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    written: dict[str, str] = {}
    for key, item in value.items():
        new_key = key if key.startswith("@") else rename(key)
        if new_key in out:
            raise CaseConflictError(path, written[new_key], key)
        written[new_key] = key
        snake = camel_to_snake(key)
        child = f"{path}.{snake}" if path else snake
        if snake in verbatim and isinstance(item, dict):
            out[new_key] = _copy(item)
        else:
            out[new_key] = _convert(item, rename, verbatim, child)
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
