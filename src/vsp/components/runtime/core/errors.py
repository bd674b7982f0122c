"""One error taxonomy for the whole runtime.

Three kinds, each with its own handling and process exit code:

* ``UserError`` (exit 2): the input is wrong. Fail fast, say what is wrong and how to fix it.
* ``TransientError`` (exit 75, ``EX_TEMPFAIL``): the service or network hiccupped. Retry with
  backoff; if it still fails, the step may be retried by the pipeline.
* ``InternalError`` (exit 70, ``EX_SOFTWARE``): a bug or an impossible state on our side.

API failures are classified into these kinds by HTTP status (see ``api_error_from_response``):
an ``InvalidArgumentError`` is a ``UserError``, an ``UnavailableError`` is a ``TransientError``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

EXIT_USER_ERROR = 2
EXIT_INTERNAL_ERROR = 70
EXIT_TRANSIENT_ERROR = 75
EXIT_CANCELLED = 143  # 128 + SIGTERM: the step was cancelled (pipeline cancel)


class VspError(Exception):
    """Base class of every error the runtime raises on purpose.

    One not classified as user or transient (e.g. an operation that ended with code 1 CANCELLED
    or 2 UNKNOWN) exits as internal, so every exit code stays within the taxonomy.
    """

    exit_code = EXIT_INTERNAL_ERROR


class StepCancelled(BaseException):
    """Raised in the main thread when a step receives SIGTERM (pipeline cancel).

    A ``BaseException`` so that no ``except Exception`` swallows it on the way to the step's
    cleanup (which cancels the remote job); the step then exits with ``EXIT_CANCELLED``.
    """


class UserError(VspError):
    """The caller's input or configuration is wrong; retrying will not help."""

    exit_code = EXIT_USER_ERROR


class TransientError(VspError):
    """A failure that may go away on retry (throttling, outages, resets, timeouts)."""

    exit_code = EXIT_TRANSIENT_ERROR


class InternalError(VspError):
    """A bug or an unexpected state inside this project."""

    exit_code = EXIT_INTERNAL_ERROR


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages that quote what was given.

    A whole float shows as the integer it is (``2``, not ``2.0``): a pipeline's dict parameters
    reach a step as JSON numbers, which kfp turns into floats, so ``2.0`` is usually a ``2``
    as the user typed it.
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def is_invalid_argument(error: Exception) -> bool:
    """Whether ``error`` is the service refusing a request as invalid.

    Both shapes are read: a synchronous 400 (``INVALID_ARGUMENT``) and a long-running operation
    that ends with code 3.
    """
    if isinstance(error, ApiError):
        return error.status == "INVALID_ARGUMENT"
    return isinstance(error, OperationFailedError) and error.code == 3


@dataclasses.dataclass(frozen=True)
class SpecProblem:
    """One problem found while validating a request spec.

    Attributes:
        field: Dotted path of the offending field, e.g. ``node_pools[1].provisioning_model``.
        value: The value found there (``None`` when the field is missing).
        problem: What is wrong with it.
        fix: How to fix it.
    """

    field: str
    value: Any
    problem: str
    fix: str

    def __str__(self) -> str:
        given = "<missing>" if self.value is None else shown(self.value)
        return f"{self.field} = {given}: {self.problem} Fix: {self.fix}"


# What a SpecValidationError names in the plural ("the training parameters are invalid").
_PLURAL_ENDINGS = ("parameters", "options", "inputs", "tags")


class SpecValidationError(UserError):
    """A request spec failed validation before any API call was made."""

    def __init__(self, what: str, problems: list[SpecProblem], notes: Sequence[str] = ()):
        self.what = what
        self.problems = list(problems)
        self.notes = list(notes)  # problems found by checks that say them in a sentence
        lines = "\n".join([f"  - {p}" for p in self.problems] + [f"  - {n}" for n in notes])
        count = len(self.problems) + len(self.notes)
        noun = "problem" if count == 1 else "problems"
        verb = "are" if what.endswith(_PLURAL_ENDINGS) else "is"
        super().__init__(f"{what} {verb} invalid ({count} {noun}):\n{lines}")

    @property
    def fields(self) -> list[str]:
        """The dotted field paths named by the problems, in order."""
        return [p.field for p in self.problems]


class ApiError(VspError):
    """An error answered by a Vertex AI (or emulator) REST endpoint.

    Attributes:
        http_status: HTTP status code of the response (0 when no response arrived).
        status: Google canonical status name, e.g. ``NOT_FOUND``.
        method: HTTP method of the failed request.
        url: URL of the failed request (never includes credentials).
        details: The ``error.details`` list of the Google error body, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        http_status: int = 0,
        status: str = "",
        method: str = "",
        url: str = "",
        details: list[Any] | None = None,
    ):
        self.http_status = http_status
        self.status = status
        self.method = method
        self.url = url
        self.details = details or []
        prefix = f"{method} {url} -> {http_status} {status}".strip()
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.message = message


class InvalidArgumentError(ApiError, UserError):
    """400 INVALID_ARGUMENT / FAILED_PRECONDITION: the request itself is wrong."""


class PermissionDeniedError(ApiError, UserError):
    """401/403: credentials are missing or lack a permission."""


class NotFoundError(ApiError):
    """404 NOT_FOUND."""


class AlreadyExistsError(ApiError):
    """409 ALREADY_EXISTS (a 409 ABORTED is a conflict to retry: ``UnavailableError``)."""


class UnavailableError(ApiError, TransientError):
    """429, 500, 502, 503, 504, a reset connection or a timeout: retry with backoff."""


class DeadlinePassedError(UnavailableError):
    """Not sent: the caller's deadline (``VertexRestClient.deadline_at``) has passed.

    Transient for whoever set the deadline (it may retry with a new one), but final for a wait
    in progress: no request of that client will be sent again, so ``polling.poll_until`` stops
    at once instead of polling until its own timeout.
    """


class OperationFailedError(VspError):
    """A long-running operation finished with an ``error`` status.

    Attributes:
        operation: Full operation name.
        code: google.rpc.Code number from the operation's ``error``.
        details: The ``error.details`` list, if any.
    """

    def __init__(self, operation: str, code: int, message: str, details: list[Any] | None = None):
        self.operation = operation
        self.code = code
        self.details = details or []
        super().__init__(f"operation {operation} failed (code {code}): {message}")


class TransientOperationError(OperationFailedError, TransientError):
    """An operation failed for capacity or availability (stockout, quota, unavailable)."""


class RejectedOperationError(OperationFailedError, UserError):
    """An operation failed because the request was wrong or not permitted."""


# google.rpc.Code numbers: deadline, exhausted, aborted, internal, unavailable are transient.
_TRANSIENT_RPC_CODES = frozenset({4, 8, 10, 13, 14})
_USER_RPC_CODES = frozenset({3, 5, 6, 7, 9, 11, 12, 16})


def operation_error(operation: str, error: dict[str, Any]) -> OperationFailedError:
    """Classifies an LRO's ``error`` (a google.rpc.Status) into the taxonomy.

    Args:
        operation: Full operation name.
        error: The operation's ``error`` object: ``{"code": int, "message": str, "details": []}``.
    """
    code = int(error.get("code") or 2)
    message = str(error.get("message") or "no message")
    details = error.get("details") or []
    if code in _TRANSIENT_RPC_CODES:
        return TransientOperationError(operation, code, message, details)
    if code in _USER_RPC_CODES:
        return RejectedOperationError(operation, code, message, details)
    return OperationFailedError(operation, code, message, details)


class TimeoutExceededError(TransientError):
    """A wait ran past its deadline."""


TRANSIENT_HTTP_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

_STATUS_BY_HTTP = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def api_error_from_response(
    http_status: int, body: Any, *, method: str = "", url: str = ""
) -> ApiError:
    """Builds the right ``ApiError`` subclass from an HTTP status and a Google error body.

    Args:
        http_status: The HTTP status code.
        body: The decoded JSON body (``{"error": {"code", "message", "status", "details"}}``) or
            any other value when the body was not Google error JSON.
        method: The request's HTTP method, for the message.
        url: The request's URL, for the message.

    Returns:
        An instance of the ``ApiError`` subclass matching the status.
    """
    error = body.get("error", {}) if isinstance(body, dict) else {}
    if not isinstance(error, dict):
        error = {"message": str(error)}
    status = str(error.get("status") or _STATUS_BY_HTTP.get(http_status, "UNKNOWN"))
    message = str(error.get("message") or (body if isinstance(body, str) else "") or "no message")
    details = error.get("details") or []
    kwargs = dict(http_status=http_status, status=status, method=method, url=url, details=details)
    transient_statuses = ("UNAVAILABLE", "RESOURCE_EXHAUSTED", "ABORTED")
    if http_status in TRANSIENT_HTTP_STATUSES or status in transient_statuses:
        return UnavailableError(message, **kwargs)
    if http_status == 404:
        return NotFoundError(message, **kwargs)
    if http_status == 409:
        return AlreadyExistsError(message, **kwargs)
    if http_status in (401, 403):
        return PermissionDeniedError(message, **kwargs)
    if 400 <= http_status < 500:
        return InvalidArgumentError(message, **kwargs)
    return ApiError(message, **kwargs)


def exit_code_for(error: BaseException) -> int:
    """The process exit code for an exception, by taxonomy (internal for unknown errors)."""
    if isinstance(error, VspError):
        return error.exit_code
    return EXIT_INTERNAL_ERROR
