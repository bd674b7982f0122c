"""JSON in and out as strictly as Google's API front end: request bodies and response bodies.

``parse`` accepts what a proto-JSON parser accepts and refuses the rest with ``BodyError``
(answered 400 INVALID_ARGUMENT "Invalid JSON payload received. ..."): bytes that are not UTF-8,
malformed JSON, the ``NaN``/``Infinity``/``-Infinity`` literals Python's parser would take, a
number beyond a double's range (``1e999``, a 400-digit integer), a lone surrogate escape
(``"\\ud800"``, no Unicode text) and more than ``MAX_DEPTH`` levels of nesting. Checking depth
after a successful parse walks the value without recursion; deeper nesting than Python's
parser handles is caught as the same error.

``encode`` serializes a response as standard JSON only: a non-finite number raises
``ValueError`` rather than being written as ``Infinity``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from typing import Any

MAX_DEPTH = 100
PREFIX = "Invalid JSON payload received."
_MAX_INT_DIGITS = len(str(int(sys.float_info.max)))


class BodyError(ValueError):
    """A request body the service refuses; ``str(exc)`` is the message to answer."""


def parse(raw: bytes) -> Any:
    """The JSON value of a request body, or None for an empty (or all-whitespace) body.

    Args:
        raw: The body bytes.

    Returns:
        The decoded value.

    Raises:
        BodyError: The body is not JSON the service accepts.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"{PREFIX} Invalid UTF-8 at byte {exc.start}.") from None
    if not text.strip():
        return None
    try:
        value = json.loads(
            text, parse_constant=_refuse_constant, parse_float=_float, parse_int=_int
        )
    except json.JSONDecodeError as exc:
        raise BodyError(f"{PREFIX} {exc.msg} at line {exc.lineno} col {exc.colno}.") from None
    except RecursionError:
        raise BodyError(_too_deep()) from None
    check_value(value)
    return value


def check_value(value: Any) -> None:
    """Checks a decoded value's nesting depth and strings, without recursion.

    Memory stays bounded by the depth: one iterator per open container.

    Raises:
        BodyError: More than ``MAX_DEPTH`` levels, or a string that is not Unicode text.
    """
    if isinstance(value, str):
        _check_text(value)
    if not isinstance(value, (dict, list)):
        return
    stack: list[Iterator[Any]] = [_children(value)]
    while stack:
        for child in stack[-1]:
            if isinstance(child, str):
                _check_text(child)
            elif isinstance(child, (dict, list)):
                if len(stack) >= MAX_DEPTH:
                    raise BodyError(_too_deep())
                stack.append(_children(child))
                break
        else:
            stack.pop()


def encode(body: Any) -> bytes:
    """A response body as standard JSON (UTF-8).

    Raises:
        ValueError: The body holds a non-finite number (or a circular reference).
        TypeError: The body holds a value JSON cannot represent.
    """
    return json.dumps(body, allow_nan=False).encode("utf-8")


def _children(container: dict[str, Any] | list[Any]) -> Iterator[Any]:
    if isinstance(container, list):
        return iter(container)
    for key in container:
        _check_text(key)
    return iter(container.values())


def _too_deep() -> str:
    return f"{PREFIX} Message too deep: more than {MAX_DEPTH} levels of nesting."


def _refuse_constant(name: str) -> Any:
    raise BodyError(f"{PREFIX} {name} is not a JSON value (no NaN or Infinity).")


def _float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise BodyError(f"{PREFIX} Number {_short(text)} is out of range.")
    return number


def _int(text: str) -> int:
    if len(text.lstrip("-")) <= _MAX_INT_DIGITS:
        number = int(text)
        if abs(number) <= sys.float_info.max:
            return number
    raise BodyError(f"{PREFIX} Number {_short(text)} is out of range.")


def _check_text(text: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BodyError(f"{PREFIX} Invalid string: a lone surrogate escape.") from None


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
