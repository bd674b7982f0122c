"""A Slurm job's state, normalised from every shape slurmrestd answers, and what it means for us.

``JobInfo.parse`` reads:

* the live v0.0.42 ``JobInfo`` (``GET /slurm/v0.0.42/job/{id}``): ``job_state`` is a list (base
  state plus flags), numbers are ``{"set", "infinite", "number"}`` structs, ``exit_code`` is
  ``{"status": [...], "return_code": {...}, "signal": {"id": {...}, "name": ...}}``;
* the accounting record (``GET /slurmdb/v0.0.42/job/{id}``): ``state.current`` (list or string),
  ``state.reason``, ``time.{submission,start,end}``, ``user``, ``comment.job``;
* tolerantly, older plain shapes (v0.0.38): ``job_state`` a string, plain integers, ``exit_code``
  an integer (a wait status when above 255) or ``{"status": "SUCCESS", "return_code": 0}``.

``JobInfo.outcome()`` classifies a job for the recovery loop (see ``Outcome``).
"""

from __future__ import annotations

import dataclasses
import signal as signal_module
from typing import Any

from vsp.components.runtime.core import gcp_labels
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.trainer import contract

BASE_STATES = (
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
)
TERMINAL_STATES = frozenset(BASE_STATES[3:])
NOT_FINAL_FLAGS = frozenset({"COMPLETING", "REQUEUED", "CONFIGURING"})
REQUEUE_FLAGS = frozenset({"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})
INFRASTRUCTURE_STATES = frozenset({"PREEMPTED", "NODE_FAIL", "BOOT_FAIL"})
INFRASTRUCTURE_REASONS = frozenset({"NodeDown", "JobLaunchFailure"})
USER_FAILURE_STATES = frozenset({"FAILED", "TIMEOUT", "DEADLINE", "OUT_OF_MEMORY"})


def number(value: Any) -> int | None:
    """An int from a plain value or a ``{"set", "infinite", "number"}`` struct (None: unset)."""
    if isinstance(value, dict):
        if value.get("infinite") or value.get("set") is False:
            return None
        return number(value.get("number"))
    if isinstance(value, bool) or value is None:
        return None if value is None else int(value)
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _timestamp(value: Any) -> int | None:
    found = number(value)
    return found if found else None


def _states(value: Any) -> tuple[str, ...]:
    """Normalises ``["PENDING", "REQUEUED"]``, ``"CANCELLED by 0"`` or ``"FAILED+"`` to a tuple."""
    if isinstance(value, dict):
        value = value.get("current", [])
    if isinstance(value, str):
        value = value.split()[:1]
    names = [str(v).strip().rstrip("+").upper() for v in value or [] if str(v).strip()]
    return tuple(dict.fromkeys(names))


def _signal_name(raw: Any) -> str | None:
    """``{"id": {...}, "name": "TERM"}``, a name or a number -> ``"SIGTERM"`` (None: none)."""
    sig_id, name = (
        (number(raw.get("id")), raw.get("name")) if isinstance(raw, dict) else (None, raw)
    )
    if isinstance(name, str) and name.strip():
        upper = name.strip().upper()
        upper = upper if upper.startswith("SIG") else "SIG" + upper
        if upper in signal_module.Signals.__members__:
            return upper
    sig_id = sig_id if sig_id is not None else number(name)
    if sig_id:
        try:
            return signal_module.Signals(sig_id).name
        except ValueError:
            return f"SIG{sig_id}"
    return None


def _exit(raw: Any) -> tuple[tuple[str, ...], int | None, str | None]:
    """(status list, return code, signal name) from any ``exit_code`` shape."""
    if isinstance(raw, dict):
        status = raw.get("status") or []
        status = (status,) if isinstance(status, str) else tuple(str(s) for s in status)
        return status, number(raw.get("return_code")), _signal_name(raw.get("signal"))
    code = number(raw)
    if code is None:
        return (), None, None
    if code > 255:  # a raw wait status: exit code in the high byte, signal in the low bits
        return (), code >> 8, _signal_name(code & 0x7F)
    return (), code, None


def _comment(raw: Any) -> str:
    if isinstance(raw, dict):
        return str(raw.get("job") or "")
    return str(raw or "")


@dataclasses.dataclass(frozen=True)
class JobInfo:
    """A Slurm job, normalised.

    Attributes:
        job_id: The job id.
        state: Base state then flags, e.g. ``("PENDING", "REQUEUED")``.
        name: Job name (this project puts the run key there).
        comment: The user comment (this project puts ``vsp-run-key=KEY`` there).
        state_reason: Why it is pending or failed (``None``, ``Priority``, ``BeginTime``...).
        exit_status: Slurm's exit status words, e.g. ``("SIGNALED",)`` (empty when unknown).
        return_code: The batch script's exit code, or None when not set.
        signal: The signal that killed the batch script (``"SIGKILL"``), or None.
        restart_cnt: How many times the job was requeued.
        priority: Scheduling priority, or None.
        partition: Partition name.
        account: Account name.
        user_name: The Linux user owning the job.
        nodes: Allocated node list expression.
        node_count: Number of nodes (``node_count`` live, ``allocation_nodes`` in slurmdb).
        submit_time: Submission time (Unix seconds), or None.
        start_time: Start time of the latest run, or None.
        end_time: End time, or None.
        source: ``"live"`` (slurmctld queue) or ``"slurmdb"`` (accounting).
        raw: The record as received.
    """

    job_id: int
    state: tuple[str, ...]
    name: str = ""
    comment: str = ""
    state_reason: str = ""
    exit_status: tuple[str, ...] = ()
    return_code: int | None = None
    signal: str | None = None
    restart_cnt: int = 0
    priority: int | None = None
    partition: str = ""
    account: str = ""
    user_name: str = ""
    nodes: str = ""
    node_count: int | None = None
    submit_time: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    source: str = "live"
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, record: dict[str, Any]) -> JobInfo:
        """Builds a ``JobInfo`` from a live or accounting job record (shape auto-detected)."""
        accounting = isinstance(record.get("state"), dict) or "time" in record
        state_obj = record.get("state") if isinstance(record.get("state"), dict) else {}
        times = record.get("time") if isinstance(record.get("time"), dict) else {}
        status, return_code, sig = _exit(record.get("exit_code"))
        return cls(
            job_id=number(record.get("job_id")) or 0,
            state=_states(state_obj if accounting else record.get("job_state")),
            name=str(record.get("name") or ""),
            comment=_comment(record.get("comment")),
            state_reason=str(state_obj.get("reason") or record.get("state_reason") or ""),
            exit_status=status,
            return_code=return_code,
            signal=sig,
            restart_cnt=number(record.get("restart_cnt")) or 0,
            priority=number(record.get("priority")),
            partition=str(record.get("partition") or ""),
            account=str(record.get("account") or ""),
            user_name=str(record.get("user_name") or record.get("user") or ""),
            nodes=str(record.get("nodes") or ""),
            node_count=number(record.get("node_count", record.get("allocation_nodes"))),
            submit_time=_timestamp(times.get("submission", record.get("submit_time"))),
            start_time=_timestamp(times.get("start", record.get("start_time"))),
            end_time=_timestamp(times.get("end", record.get("end_time"))),
            source="slurmdb" if accounting else "live",
            raw=dict(record),
        )

    @property
    def base_state(self) -> str:
        """The base state (first known base state in ``state``; ``UNKNOWN`` when none)."""
        return next((s for s in self.state if s in BASE_STATES), "UNKNOWN")

    @property
    def flags(self) -> tuple[str, ...]:
        """The state flags beside the base state (``REQUEUED``, ``COMPLETING``...)."""
        return tuple(s for s in self.state if s != self.base_state)

    @property
    def is_terminal(self) -> bool:
        """Finished for good: a terminal base state without COMPLETING/REQUEUED/CONFIGURING."""
        return self.base_state in TERMINAL_STATES and not NOT_FINAL_FLAGS & set(self.flags)

    @property
    def is_requeued(self) -> bool:
        """Requeued (REQUEUED/REQUEUE_HOLD/REQUEUE_FED flag), or pending again after a restart."""
        if REQUEUE_FLAGS & set(self.flags):
            return True
        return self.base_state == "PENDING" and self.restart_cnt > 0

    @property
    def is_held(self) -> bool:
        """Pending on a hold that needs a release (REQUEUE_HOLD, or a JobHeld* reason)."""
        held_reason = "held" in self.state_reason.lower()
        return self.base_state == "PENDING" and ("REQUEUE_HOLD" in self.flags or held_reason)

    def comment_value(self, key: str) -> str:
        """The value of a ``key=value`` word of the comment ('' when absent)."""
        for word in self.comment.split():
            if word.startswith(f"{key}="):
                return word[len(key) + 1 :]
        return ""

    @property
    def spec_digest(self) -> str:
        """The ``vsp-spec=`` digest in the comment ('' when the job has none)."""
        return self.comment_value("vsp-spec")

    @property
    def pipeline_run(self) -> str:
        """The ``vsp-pipeline-run=`` label value in the comment ('' when the job has none)."""
        return self.comment_value(gcp_labels.PIPELINE_RUN)

    @property
    def working_directory(self) -> str:
        """The job's working directory (live queue or accounting record)."""
        raw = self.raw
        return str(raw.get("current_working_directory") or raw.get("working_directory") or "")

    def carries_run_key(self, run_key: str) -> bool:
        """Whether this job belongs to ``run_key`` (job name, or ``vsp-run-key=`` in comment)."""
        return self.name == run_key or f"vsp-run-key={run_key}" in self.comment.split()

    def outcome(self) -> Outcome:
        """Classifies the job for the recovery loop.

        * ``SUCCEEDED``: COMPLETED (return code 0, or none reported).
        * ``PREEMPTED``: PREEMPTED, NODE_FAIL, BOOT_FAIL; FAILED with return code 143
          (``EXIT_PREEMPTED``: the trainer saved on a preemption or time-limit notice and
          stopped) or killed by SIGTERM (the same event seen without a shell); FAILED with
          reason NodeDown or JobLaunchFailure.
        * ``USER_FAILURE``: FAILED with any other exit, OUT_OF_MEMORY, TIMEOUT (the time limit
          is the user's choice; ask for a warning signal so the trainer saves and exits 143
          before the limit, which counts as PREEMPTED), DEADLINE (the user's ``--deadline``).
        * ``CANCELLED``: cancelled by anyone, even if the trainer saved and exited 143 on the
          way out.
        * ``PENDING``: pending (also requeued or held); ``RUNNING``: running, suspended, or in a
          terminal base state still flagged COMPLETING/REQUEUED/CONFIGURING.
        """
        if not self.is_terminal:
            return Outcome.PENDING if self.base_state == "PENDING" else Outcome.RUNNING
        base = self.base_state
        if base == "COMPLETED":
            if self.return_code in (None, 0):
                return Outcome.SUCCEEDED
            preempted = self.return_code == contract.EXIT_PREEMPTED
            return Outcome.PREEMPTED if preempted else Outcome.USER_FAILURE
        if base == "CANCELLED":
            return Outcome.CANCELLED
        if base in INFRASTRUCTURE_STATES:
            return Outcome.PREEMPTED
        if base == "FAILED":
            if self.return_code == contract.EXIT_PREEMPTED or self.signal == "SIGTERM":
                return Outcome.PREEMPTED
            if self.state_reason in INFRASTRUCTURE_REASONS:
                return Outcome.PREEMPTED
        return Outcome.USER_FAILURE

    def describe(self) -> str:
        """One line for logs: id, state+flags, reason, priority, restarts, exit."""
        parts = [f"job {self.job_id} {'+'.join(self.state) or 'UNKNOWN'}"]
        if self.state_reason and self.state_reason != "None":
            parts.append(f"reason={self.state_reason}")
        if self.priority is not None:
            parts.append(f"priority={self.priority}")
        parts.append(f"restarts={self.restart_cnt}")
        if self.is_terminal and self.return_code is not None:
            parts.append(f"exit={self.return_code}")
        if self.signal:
            parts.append(f"signal={self.signal}")
        if self.nodes:
            parts.append(f"nodes={self.nodes}")
        return " ".join(parts)
