"""Checks on proto-JSON field values shared by the resources: integers and label maps.

Integers follow the proto3 JSON mapping: an int32 or int64 field takes a JSON number or a
decimal string (``"2"``); a number with a zero fraction (``2.0``) is the same integer, as
protobuf's JSON parsers read it. A boolean, a fraction, any other string or a value outside
the field's range is refused.

Labels follow Google Cloud's rules (https://cloud.google.com/resource-manager/docs/labels-overview,
linked from the Vertex AI ``labels`` fields): at most 64 labels; a key has 1-63 characters,
starting with a lowercase letter, then lowercase letters, digits, ``_`` or ``-``; a value has
0-63 of the same characters. Vertex AI allows international characters, so a "lowercase
letter" is any Unicode lowercase or caseless letter and a digit any Unicode number, as in the
documented expressions ``[\\p{Ll}\\p{Lo}][\\p{Ll}\\p{Lo}\\p{N}_-]{0,62}``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from vsp.vertex_emulator import errors

INT32_MAX = 2**31 - 1
# Display names: "can be up to 128 characters long and can consist of any UTF-8 characters"
# (Vertex AI REST reference, Model.displayName and the other resources' displayName fields;
# a cluster's is inferred to follow the same rule).
MAX_DISPLAY_NAME = 128
# A container image reference has no whitespace or control characters (the reference
# grammar, https://github.com/distribution/reference/blob/main/reference.go); its length is
# inferred from Docker's 255-character repository name limit plus tag or digest.
MAX_IMAGE_URI = 1024
INT64_MAX = 2**63 - 1
TYPE_NAMES = {INT32_MAX: "TYPE_INT32", INT64_MAX: "TYPE_INT64"}
MAX_LABELS = 64
MAX_LABEL_LENGTH = 63

_DECIMAL = re.compile(r"[-+]?[0-9]{1,40}")


def integer(value: Any, *, minimum: int = 0, maximum: int = INT64_MAX) -> int | None:
    """The integer a proto-JSON integer field holds, or None when it holds no valid one.

    Args:
        value: The JSON value (not None).
        minimum: Smallest value the field accepts.
        maximum: Largest value (``INT32_MAX`` or ``INT64_MAX`` for the field's type).

    Returns:
        The integer, or None for a boolean, a fraction, a non-decimal string, a non-finite
        number or a value out of ``[minimum, maximum]``.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():  # also NaN and the infinities
            return None
        value = int(value)
    elif isinstance(value, str):
        if not _DECIMAL.fullmatch(value):
            return None
        value = int(value)
    if not isinstance(value, int) or not minimum <= value <= maximum:
        return None
    return value


def integer_violation(
    value: Any, field: str, *, minimum: int = 0, maximum: int = INT64_MAX
) -> errors.FieldViolation | None:
    """A violation naming ``field`` when ``value`` (if set) is not a valid integer, else None."""
    if value is None or integer(value, minimum=minimum, maximum=maximum) is not None:
        return None
    kind = TYPE_NAMES.get(maximum, "TYPE_INT32" if maximum <= INT32_MAX else "TYPE_INT64")
    return errors.FieldViolation(
        field,
        f"Invalid value ({kind}), {shown(value)}: expected a whole number from {minimum} "
        f"to {maximum}, as a JSON number or a decimal string.",
    )


def integer_violations(
    fields: list[tuple[Any, str]], *, minimum: int = 0, maximum: int = INT64_MAX
) -> list[errors.FieldViolation]:
    """``integer_violation`` for each ``(value, field)`` pair, the problems only."""
    found = (integer_violation(v, f, minimum=minimum, maximum=maximum) for v, f in fields)
    return [violation for violation in found if violation is not None]


def display_name_violation(value: Any, field: str) -> errors.FieldViolation | None:
    """A violation when a set display name is not a string of at most 128 characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        return errors.FieldViolation(
            field, f"Invalid value {shown(value)}: display_name must be a string."
        )
    if len(value) > MAX_DISPLAY_NAME:
        return errors.FieldViolation(
            field,
            f"display_name has {len(value)} characters; at most {MAX_DISPLAY_NAME} are allowed.",
        )
    return None


def image_uri_violation(value: Any, field: str) -> errors.FieldViolation | None:
    """A violation when a set image URI holds whitespace or control characters, or is long."""
    if value is None:
        return None
    bad = not isinstance(value, str) or len(value) > MAX_IMAGE_URI
    if bad or any(c.isspace() or unicodedata.category(c) == "Cc" for c in value):
        return errors.FieldViolation(
            field,
            f"Invalid image URI {shown(value)}: use a container image reference without "
            f"whitespace or control characters, at most {MAX_IMAGE_URI} characters.",
        )
    return None


def valid_label_key(key: Any) -> bool:
    """Whether ``key`` is a valid label key (1-63 characters, a lowercase letter first)."""
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_LABEL_LENGTH:
        return False
    return _letter(key[0]) and all(_label_character(c) for c in key[1:])


def valid_label_value(value: Any) -> bool:
    """Whether ``value`` is a valid label value (a string of 0-63 label characters)."""
    if not isinstance(value, str) or len(value) > MAX_LABEL_LENGTH:
        return False
    return all(_label_character(c) for c in value)


def label_violations(labels: Any, field: str) -> list[errors.FieldViolation]:
    """The violations of a label map (None or empty is fine), each naming ``field[key]``.

    Args:
        labels: The ``labels`` value as sent.
        field: The map's field path, e.g. ``labels`` or ``node_pools[0].labels``.
    """
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [errors.FieldViolation(field, "Labels must be a map of strings to strings.")]
    if len(labels) > MAX_LABELS:
        return [
            errors.FieldViolation(
                field, f"At most {MAX_LABELS} labels are allowed, got {len(labels)}."
            )
        ]
    out = []
    for key, value in labels.items():
        where = f"{field}[{key}]"
        if not valid_label_key(key):
            out.append(
                errors.FieldViolation(
                    where,
                    f"Invalid label key {shown(key)}: use 1-{MAX_LABEL_LENGTH} lowercase "
                    "letters, digits, '_' or '-', starting with a lowercase letter.",
                )
            )
        if not valid_label_value(value):
            out.append(
                errors.FieldViolation(
                    where,
                    f"Invalid label value {shown(value)}: use a string of 0-{MAX_LABEL_LENGTH} "
                    "lowercase letters, digits, '_' or '-'.",
                )
            )
    return out


def _letter(character: str) -> bool:
    return unicodedata.category(character) in ("Ll", "Lo")


def _label_character(character: str) -> bool:
    return character in "_-" or _letter(character) or unicodedata.category(character)[0] == "N"


def shown(value: Any, limit: int = 80) -> str:
    """A short ``repr`` of a request value for a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
