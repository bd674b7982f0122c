"""Slurm's answers through the Vertex ``:callSlurmRestApi`` proxy, classified into the taxonomy.

The proxy wraps slurmrestd's reply as ``{"status": HTTP_STATUS, "body": "<JSON string>"}`` (English
docs) or ``{"status": ..., "structuredBody": {...}}`` (ko/ja/zh docs); ``SlurmResponse`` reads
both. Slurm reports problems in its own ``errors`` list (``{"error_number", "error",
"description", "source"}``) and ``warnings`` list, whatever the wrapper ``status`` says, so both
are always inspected.

Classification (``SlurmResponse.error``), first match wins:

* a known *transient* Slurm error number (controller or database unreachable, standby, queue
  full...) -> ``SlurmUnavailableError`` (a ``TransientError``);
* any other Slurm error number, or a 4xx wrapper status -> ``SlurmRejectedError`` (a
  ``UserError``) carrying Slurm's message and the fix (specific for the numbers in
  ``REJECTIONS``: invalid account/partition/QOS/time limit/GRES...). slurmrestd answers 500 for
  many rejected submissions, so the number decides, not the status;
* a 5xx wrapper status with no error number -> ``SlurmUnavailableError``;
* anything else -> ``SlurmError`` (exit code 1).

Numbers are from ``slurm/slurm_errno.h`` (stable across 23.x-25.x).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from vsp.components.runtime.core import errors

log = logging.getLogger(__name__)
# What Slurm 24.11 warns on GET /jobs when the queue is empty (a warning, not an error).
_EMPTY_QUEUE = "Zero jobs to dump"

ESLURM_INVALID_PARTITION_NAME = 2000
ESLURM_ACCESS_DENIED = 2002
ESLURM_INVALID_JOB_ID = 2017
ESLURM_ALREADY_DONE = 2021
ESLURM_JOB_HELD = 2042
ESLURM_INVALID_ACCOUNT = 2045
ESLURM_INVALID_TIME_LIMIT = 2051
ESLURM_INVALID_QOS = 2066
ESLURM_JOB_FINISHED = 2084

_FIX_ACCOUNT = (
    "add the association for the caller's Linux user (an admin runs `sudo sacctmgr add User "
    "Accounts=ACCOUNT Partition=PARTITION USER` on the login node, or call "
    "SlurmClient.ensure_association), or pass an account the user already belongs to."
)
_FIX_PARTITION = (
    "use a partition id listed in the cluster's orchestrator_spec.slurm_spec.partitions."
)

# Slurm error number -> (name, fix) for rejections that retrying cannot cure.
REJECTIONS: dict[int, tuple[str, str]] = {
    ESLURM_INVALID_PARTITION_NAME: ("ESLURM_INVALID_PARTITION_NAME", _FIX_PARTITION),
    2001: ("ESLURM_DEFAULT_PARTITION_NOT_SET", "set partition explicitly."),
    ESLURM_ACCESS_DENIED: (
        "ESLURM_ACCESS_DENIED",
        "grant the caller's Linux user the Slurm permission (for accounting changes: "
        "AdminLevel=Operator via sacctmgr), or ask a cluster admin to make the change.",
    ),
    2004: ("ESLURM_REQUESTED_NODES_NOT_IN_PARTITION", _FIX_PARTITION),
    2005: ("ESLURM_TOO_MANY_REQUESTED_CPUS", "request fewer CPUs per task or tasks per node."),
    2006: ("ESLURM_INVALID_NODE_COUNT", "request at most the partition's node count."),
    2014: (
        "ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE",
        "request resources (GPUs, CPUs, memory) the partition's machine type has.",
    ),
    2015: (
        "ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE",
        "fit nodes, time limit and resources to the partition's limits.",
    ),
    ESLURM_INVALID_ACCOUNT: ("ESLURM_INVALID_ACCOUNT", _FIX_ACCOUNT),
    2044: ("ESLURM_INVALID_TASK_MEMORY", "request memory the nodes have."),
    2050: ("ESLURM_ACCOUNTING_POLICY", "stay within the association's or QOS's limits."),
    ESLURM_INVALID_TIME_LIMIT: (
        "ESLURM_INVALID_TIME_LIMIT",
        "lower time_limit_minutes to at most the partition's MaxTime.",
    ),
    2057: ("ESLURM_INVALID_WCKEY", "use a valid wckey or none."),
    2063: (
        "ESLURM_MISSING_WORK_DIR",
        "pass an existing absolute working_directory on shared storage.",
    ),
    ESLURM_INVALID_QOS: ("ESLURM_INVALID_QOS", "use a QOS the association may use, or none."),
    2070: ("ESLURM_PARTITION_NOT_AVAIL", _FIX_PARTITION),
    2072: ("ESLURM_INVALID_GRES", "request at most the GPUs per node the machine type has."),
    2115: ("ESLURM_INVALID_TRES", "request at most the GPUs per node the machine type has."),
    2127: ("ESLURM_ENVIRONMENT_MISSING", "send a non-empty environment list."),
    2130: ("ESLURM_PARTITION_ASSOC", _FIX_ACCOUNT),
}

_TRANSIENT_NUMBERS = frozenset(
    {
        2007,  # ESLURM_ERROR_ON_DESC_TO_RECORD_COPY: slurmctld could not record the job
        2016,  # ESLURM_NODES_BUSY
        2027,  # ESLURM_IN_STANDBY_MODE
        2041,  # ESLURM_TAKEOVER_NO_HEARTBEAT
        2090,  # ESLURM_INTERNAL
        2105,  # ESLURM_SUBMISSIONS_DISABLED
        2131,  # ESLURM_IN_STANDBY_USE_BACKUP
        5003,  # ESLURM_PROTOCOL_INCOMPLETE_PACKET
        5004,  # SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT
        5005,  # SLURM_PROTOCOL_SOCKET_ZERO_BYTES_SENT
        7000,  # ESLURM_DB_CONNECTION
        7008,  # ESLURM_DB_CONNECTION_INVALID
    }
)
_TRANSIENT_TEXT = (
    "unable to contact slurm controller",
    "socket timed out",
    "connection refused",
    "unable to connect to database",
    "temporarily unavailable",
)
_NOT_FOUND_NUMBERS = frozenset({ESLURM_INVALID_JOB_ID})
_NOT_FOUND_TEXT = ("invalid job id", "not found", "unknown job", "no jobs")
_FINISHED_NUMBERS = frozenset({ESLURM_ALREADY_DONE, ESLURM_JOB_FINISHED})


def _is_transient_number(number: int | None) -> bool:
    return number is not None and (number in _TRANSIENT_NUMBERS or 1000 <= number < 1900)


class SlurmError(errors.VspError):
    """Slurm (through the proxy) answered with an error.

    Attributes:
        what: What was attempted, e.g. ``submission of job run-1``.
        status: The wrapper's HTTP status (0 when unknown).
        slurm_errors: Slurm's ``errors`` list, as received.
        number: The first Slurm error number, or None.
    """

    def __init__(self, message: str, *, what: str = "", status: int = 0, slurm_errors=None):
        self.what = what
        self.status = status
        self.slurm_errors = list(slurm_errors or [])
        self.number = next((_error_number(e) for e in self.slurm_errors if _error_number(e)), None)
        super().__init__(message)


class SlurmRejectedError(SlurmError, errors.UserError):
    """Slurm refused the request as invalid (bad account, partition, limits...): fix the input."""


class SlurmUnavailableError(SlurmError, errors.TransientError):
    """Slurm (controller, database, proxy) is temporarily unavailable: retry with backoff."""


class SlurmSubmitUnknownError(SlurmUnavailableError):
    """A submission failed in a way that may or may not have created the job.

    Never resubmit blindly: look the job up by its run key (``SlurmClient.find_jobs``) first.
    """


class SlurmJobNotFoundError(SlurmError):
    """A job id is in neither the live queue nor the accounting database."""


def _error_number(entry: Any) -> int | None:
    if not isinstance(entry, dict):
        return None
    value = entry.get("error_number", entry.get("error_code"))
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number or None


def _error_text(entry: Any) -> str:
    if not isinstance(entry, dict):
        return str(entry)
    parts = [str(entry.get(k)) for k in ("description", "error") if entry.get(k)]
    unique = list(dict.fromkeys(parts))
    return ": ".join(unique) or json.dumps(entry, sort_keys=True)


def _status(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


@dataclasses.dataclass
class SlurmResponse:
    """One unwrapped ``:callSlurmRestApi`` answer.

    Attributes:
        method: ``GET``, ``POST`` or ``DELETE``.
        path: The slurmrestd path called.
        status: Wrapper HTTP status (200 when the wrapper carries none; 0 when unreadable).
        payload: Slurm's JSON object (``{}`` when the body was empty or not JSON).
        text: The raw body text when it was not a JSON object, else "".
    """

    method: str
    path: str
    status: int
    payload: dict[str, Any]
    text: str = ""

    @classmethod
    def from_proxy(cls, response: dict[str, Any], method: str, path: str) -> SlurmResponse:
        """Reads the wrapper: ``structuredBody`` (object) when present, else ``body`` (string)."""
        status = _status(response.get("status", 200))
        structured = response.get("structuredBody", response.get("structured_body"))
        text = ""
        if structured is not None:
            payload = structured
        else:
            body = response.get("body")
            payload = body if isinstance(body, dict) else {}
            if isinstance(body, str) and body.strip():
                try:
                    payload = json.loads(body)
                except ValueError:
                    payload, text = {}, body
        if not isinstance(payload, dict):
            payload, text = {}, json.dumps(payload)[:2000]
        return cls(method=method, path=path, status=status, payload=payload, text=text)

    @property
    def errors(self) -> list[Any]:
        """Slurm's ``errors``, plus the failures a kill answer lists in ``status``.

        A DELETE of ``/job/{id}`` answers per job in ``status`` (``{"error": {"code",
        "string", "message"}, "job_id", ...}``); a finished job is error 2021 there while
        ``errors`` stays empty, so those entries count as errors too (as ``error_number``,
        ``error`` and ``description``).
        """
        found = list(self.payload.get("errors") or [])
        status = self.payload.get("status")
        for entry in status if isinstance(status, list) else []:
            error = entry.get("error") if isinstance(entry, dict) else None
            if isinstance(error, dict) and error.get("code"):
                found.append(
                    {
                        "error_number": error.get("code"),
                        "error": error.get("string") or "",
                        "description": error.get("message") or "",
                    }
                )
        return found

    @property
    def warnings(self) -> list[Any]:
        """Slurm's ``warnings`` list (empty when absent)."""
        return list(self.payload.get("warnings") or [])

    @property
    def ok(self) -> bool:
        """True when the wrapper status is below 400 and Slurm reported no errors."""
        return self.status < 400 and not self.errors and not self.text

    @property
    def not_found(self) -> bool:
        """True when the answer means "no such job" (404, ESLURM_INVALID_JOB_ID or its text)."""
        if self.status == 404 or any(_error_number(e) in _NOT_FOUND_NUMBERS for e in self.errors):
            return True
        texts = [_error_text(e).lower() for e in self.errors] + [self.text.lower()]
        return any(marker in t for t in texts for marker in _NOT_FOUND_TEXT)

    @property
    def already_finished(self) -> bool:
        """True when Slurm says the job already completed (ESLURM_ALREADY_DONE/JOB_FINISHED)."""
        return any(_error_number(e) in _FINISHED_NUMBERS for e in self.errors)

    def log_warnings(self) -> None:
        """Logs Slurm's warnings (they never fail a call), but the empty queue's own note."""
        for warning in self.warnings:
            text = _error_text(warning)
            if _EMPTY_QUEUE in text:  # GET /jobs on a queue with no job: nothing is wrong
                continue
            log.warning("slurm %s %s: warning: %s", self.method, self.path, text)

    def describe_errors(self) -> str:
        """Slurm's errors as one line (or the raw text), for messages."""
        described = []
        for entry in self.errors:
            number = _error_number(entry)
            name = REJECTIONS.get(number, ("",))[0] if number else ""
            suffix = f" (error {number}{' ' + name if name else ''})" if number else ""
            described.append(_error_text(entry) + suffix)
        if self.text:
            described.append(self.text[:500])
        return "; ".join(described) or "no error details"

    def error(self, what: str) -> SlurmError:
        """The taxonomy error for this (failed) answer; see the module docstring."""
        numbers = [_error_number(e) for e in self.errors]
        texts = " ".join(_error_text(e) for e in self.errors).lower() + self.text.lower()
        prefix = (
            f"{what}: slurm {self.method} {self.path} -> {self.status}: {self.describe_errors()}"
        )
        kwargs = dict(what=what, status=self.status, slurm_errors=self.errors)
        if any(_is_transient_number(n) for n in numbers) or any(
            t in texts for t in _TRANSIENT_TEXT
        ):
            return SlurmUnavailableError(f"{prefix}. Retry later.", **kwargs)
        fixes = [REJECTIONS[n][1] for n in numbers if n in REJECTIONS]
        if fixes:
            return SlurmRejectedError(f"{prefix}. Fix: {' '.join(dict.fromkeys(fixes))}", **kwargs)
        if any(numbers) or 400 <= self.status < 500:
            return SlurmRejectedError(
                f"{prefix}. Fix: correct what Slurm's message names (and check that the "
                "slurmrestd version in the path is one the cluster's Slurm serves).",
                **kwargs,
            )
        if self.status >= 500:
            return SlurmUnavailableError(f"{prefix}. Retry later.", **kwargs)
        return SlurmError(prefix, **kwargs)
