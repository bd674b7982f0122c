"""Google API errors as the emulator renders them.

Handlers raise ``ApiException``; the app turns it into Google error JSON::

    {"error": {"code": 404, "message": "...", "status": "NOT_FOUND", "details": [...]}}

``rpc_status`` builds the ``google.rpc.Status`` used as the ``error`` of a failed operation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# google.rpc.Code numbers by canonical name.
RPC_CODES = {
    "OK": 0,
    "CANCELLED": 1,
    "UNKNOWN": 2,
    "INVALID_ARGUMENT": 3,
    "DEADLINE_EXCEEDED": 4,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9,
    "ABORTED": 10,
    "OUT_OF_RANGE": 11,
    "UNIMPLEMENTED": 12,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
    "DATA_LOSS": 15,
    "UNAUTHENTICATED": 16,
}
RPC_NAMES = {code: name for name, code in RPC_CODES.items()}

# HTTP status Google answers for each canonical status.
HTTP_BY_STATUS = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "ABORTED": 409,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INTERNAL": 500,
    "DATA_LOSS": 500,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}

# Canonical status assumed for a bare HTTP status (used by injected faults).
STATUS_BY_HTTP = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"


@dataclasses.dataclass(frozen=True)
class FieldViolation:
    """One entry of a ``google.rpc.BadRequest`` detail.

    Attributes:
        field: Dotted snake_case path of the offending field, e.g. ``node_pools[0].id``.
        description: What is wrong with it.
    """

    field: str
    description: str

    def to_dict(self) -> dict[str, str]:
        """The proto-JSON form (an empty field is omitted, as proto3 JSON does)."""
        out = {"field": self.field} if self.field else {}
        out["description"] = self.description
        return out


class ApiException(Exception):
    """A Google API error to send back to the caller.

    Attributes:
        status: Canonical status name, e.g. ``NOT_FOUND``.
        message: Human-readable message.
        http_status: HTTP status code sent.
        details: ``error.details`` entries (each with an ``@type``).
    """

    def __init__(
        self,
        status: str,
        message: str,
        *,
        http_status: int | None = None,
        details: list[dict[str, Any]] | None = None,
    ):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.http_status = http_status or HTTP_BY_STATUS.get(status, 500)
        self.details = list(details or [])

    def to_body(self) -> dict[str, Any]:
        """The Google error JSON body."""
        return error_body(self.http_status, self.status, self.message, self.details)


def error_body(
    http_status: int, status: str, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Builds ``{"error": {"code", "message", "status", "details"?}}``.

    Args:
        http_status: The HTTP status code (Google puts it in ``error.code``).
        status: Canonical status name.
        message: Human-readable message.
        details: Optional detail messages; omitted from the body when empty.

    Returns:
        The error body.
    """
    error: dict[str, Any] = {"code": http_status, "message": message, "status": status}
    if details:
        error["details"] = list(details)
    return {"error": error}


def bad_request_detail(violations: list[FieldViolation]) -> dict[str, Any]:
    """A ``google.rpc.BadRequest`` detail listing field violations."""
    return {"@type": BAD_REQUEST_TYPE, "fieldViolations": [v.to_dict() for v in violations]}


def invalid_argument(message: str, violations: list[FieldViolation] | None = None) -> ApiException:
    """400 INVALID_ARGUMENT, with a BadRequest detail when there are violations."""
    details = [bad_request_detail(violations)] if violations else []
    return ApiException("INVALID_ARGUMENT", message, details=details)


def invalid_fields(what: str, violations: list[FieldViolation]) -> ApiException:
    """400 INVALID_ARGUMENT whose message lists every violation."""
    listed = "; ".join(
        f"{v.field}: {v.description}" if v.field else v.description for v in violations
    )
    return invalid_argument(f"{what}: {listed}", violations)


def not_found(message: str) -> ApiException:
    """404 NOT_FOUND."""
    return ApiException("NOT_FOUND", message)


def already_exists(message: str) -> ApiException:
    """409 ALREADY_EXISTS."""
    return ApiException("ALREADY_EXISTS", message)


def failed_precondition(message: str) -> ApiException:
    """400 FAILED_PRECONDITION (the resource is in the wrong state for the call)."""
    return ApiException("FAILED_PRECONDITION", message)


def rpc_status(code: int | str, message: str, details: list[Any] | None = None) -> dict[str, Any]:
    """A ``google.rpc.Status`` (``{"code", "message", "details"?}``) for an operation error.

    Args:
        code: A google.rpc.Code number or canonical name.
        message: Human-readable message.
        details: Optional detail messages.

    Returns:
        The status dict.
    """
    number = RPC_CODES[code] if isinstance(code, str) else int(code)
    status: dict[str, Any] = {"code": number, "message": message}
    if details:
        status["details"] = list(details)
    return status
