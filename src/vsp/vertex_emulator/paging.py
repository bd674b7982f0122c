"""List calls a page at a time, the same way for every resource.

``pageSize`` (or ``page_size``) is validated and capped by the settings; ``nextPageToken`` is
the resource name of the page's last item (base64), opaque to clients; the next page starts
after that item in the list's order. A token that names nothing under the list's parent is
INVALID_ARGUMENT on ``page_token``, as the real service answers.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from vsp.vertex_emulator import errors, field_rules

T = TypeVar("T")


def _invalid(field: str, description: str) -> errors.ApiException:
    violation = errors.FieldViolation(field, description)
    return errors.invalid_argument(description, [violation])


def page_size(request: Any) -> int:
    """The request's page size: the default when 0 or absent, at most the settings' maximum."""
    settings = request.app.settings
    raw = request.query_value("pageSize", "page_size") or "0"
    size = field_rules.integer(raw, maximum=field_rules.INT32_MAX) if isinstance(raw, str) else None
    if size is None:
        raise _invalid("page_size", f"Invalid page size {field_rules.shown(raw)}.")
    return min(size or settings.default_page_size, settings.max_page_size)


def page(
    request: Any, items: Sequence[T], name_of: Callable[[T], str], prefix: str
) -> tuple[list[T], dict[str, str]]:
    """The page of ``items`` (already in list order) the request asks for.

    Args:
        request: The list request (``pageSize``, ``pageToken``).
        items: Every matching item, in the order the list returns them.
        name_of: An item's resource name.
        prefix: The resource names' common prefix under the parent (checks the token).

    Returns:
        The page, and ``{"nextPageToken": ...}`` when more follow (else ``{}``).
    """
    size = page_size(request)
    start = 0
    token = request.query_value("pageToken", "page_token")
    if token:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            after = ""
        names = [name_of(item) for item in items]
        if not after.startswith(prefix):
            raise _invalid("page_token", "Invalid page token.")
        # After the named item; if it is gone since, after where it would sort.
        start = names.index(after) + 1 if after in names else sum(n <= after for n in names)
    chosen = list(items[start : start + size])
    more = start + size < len(items)
    token_out = base64.urlsafe_b64encode(name_of(chosen[-1]).encode()).decode() if more else ""
    return chosen, ({"nextPageToken": token_out} if more else {})
