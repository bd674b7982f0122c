"""Waiting on Vertex long-running operations (google.longrunning.Operation).

One function, ``wait_for_operation``, polls ``GET {version}/{operation name}`` through the shared
poller until ``done`` and returns the ``response`` or raises the classified ``error``.
"""

from __future__ import annotations

import logging
from typing import Any

from vsp.components.runtime.core import errors, polling, rest

log = logging.getLogger(__name__)

DEFAULT_BACKOFF = polling.Backoff(initial=2.0, maximum=30.0, multiplier=1.5)


def describe_operation(operation: dict[str, Any]) -> str:
    """A one-line state of an operation for progress logs."""
    if operation.get("done"):
        return "failed" if operation.get("error") else "done"
    metadata = operation.get("metadata") or {}
    return str(metadata.get("progressMessage") or "running")


def wait_for_operation(
    client: rest.VertexRestClient,
    operation_name: str,
    *,
    api_version: str = "v1beta1",
    timeout: float | None = 7200.0,
    backoff: polling.Backoff = DEFAULT_BACKOFF,
    clock: polling.Clock | None = None,
    what: str = "",
) -> dict[str, Any]:
    """Polls an operation until it is done.

    Args:
        client: The REST client.
        operation_name: Full name, ``projects/P/locations/L/operations/ID``.
        api_version: API version prefix to poll under.
        timeout: Seconds before giving up (None: wait forever).
        backoff: Delay schedule between polls.
        clock: Time source (tests inject ``FakeClock``).
        what: Name of the work, for progress logs.

    Returns:
        The operation's ``response`` (``{}`` for an Empty response).

    Raises:
        errors.OperationFailedError: The operation ended with an error (classified as transient
            or user error by its code).
        errors.TimeoutExceededError: The deadline passed.
    """
    result = polling.poll_until(
        lambda: client.get(f"{api_version}/{operation_name}"),
        lambda op: bool(op.get("done")),
        what=what or f"operation {operation_name}",
        timeout=timeout,
        backoff=backoff,
        clock=clock,
        describe=describe_operation,
    )
    operation = result.value
    if operation.get("error"):
        raise errors.operation_error(operation_name, operation["error"])
    return operation.get("response") or {}
