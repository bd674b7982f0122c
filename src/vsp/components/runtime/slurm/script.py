"""The typed Slurm job description and the exact submit request it becomes.

``JobDescription`` validates everything before any request (``SpecValidationError`` naming field,
value and fix) and ``to_request`` returns the slurmrestd submit body:

* v0.0.39 and later (default v0.0.42): ``{"job": {..., "script": TEXT}}``; ``environment`` is a
  list of ``"K=V"``; ``time_limit`` and ``kill_warning_delay`` are
  ``{"set": true, "infinite": false, "number": N}``; the warning signal is
  ``kill_warning_signal`` + ``kill_warning_delay`` + ``kill_warning_flags: ["BATCH_JOB"]`` (the
  REST form of ``--signal=B:SIG@N``: the batch shell gets it and forwards it to the payload).
* v0.0.38 and older (measured with slurmrestd 22.05, best effort):
  ``{"script": TEXT, "job": {...}}`` with an ``environment`` object, plain integers and
  ``"signal": "USR1@30"`` (that version rejects the ``B:`` prefix, so the warning reaches only
  ``srun`` steps there).

The run key goes in ``name`` and in ``comment`` (``vsp-run-key=KEY``) so a retried step can find
its job (``SlurmClient.find_jobs``), and in the environment as ``VSP_RUN_KEY``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from vsp.components.runtime.core import errors, gcs_paths
from vsp.components.runtime.slurm import batch, code_stage, container_run, job_checks
from vsp.components.runtime.trainer import contract

DEFAULT_VERSION = "v0.0.42"
MAX_REQUEST_BYTES = 1_000_000
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
COMMENT_PREFIX = "vsp-run-key="
SPEC_PREFIX = "vsp-spec="
PIPELINE_RUN_PREFIX = "vsp-pipeline-run="
VERSION_RE = re.compile(r"^v0\.0\.(\d+)\Z")


def no_val(value: int) -> dict[str, Any]:
    """A slurmrestd ``*_NO_VAL`` number: ``{"set": True, "infinite": False, "number": value}``."""
    return {"set": True, "infinite": False, "number": int(value)}


def is_legacy(version: str) -> bool:
    """Whether ``version`` (``v0.0.N``) predates the v0.0.39 data_parser shapes."""
    match = VERSION_RE.match(version or "")
    if not match:
        raise errors.UserError(
            f"slurmrestd version {version!r} is not of the form v0.0.N. Fix: use e.g. v0.0.42."
        )
    return int(match.group(1)) < 39


def _parse_warning(spec: str) -> tuple[str, int | None]:
    """``"USR1"``, ``"SIGUSR1"``, ``"10"``, ``"USR1@30"`` or ``"B:USR1@30"`` -> (word, seconds)."""
    text = spec.strip().upper().removeprefix("B:")
    name, _, seconds = text.partition("@")
    if name.isdigit():
        try:
            name = signal.Signals(int(name)).name
        except ValueError:
            return name, None
    if "@" not in text:
        return name.removeprefix("SIG"), None
    return name.removeprefix("SIG"), int(seconds) if seconds.isdigit() else -1  # -1: invalid


@dataclasses.dataclass(frozen=True, kw_only=True)
class JobDescription:
    """One batch job to submit; validated on construction.

    Attributes:
        run_key: Idempotency key of the run (job name and comment): 1-128 of
            ``A-Za-z0-9._:+@=-``, starting with a letter or digit.
        partition: Slurm partition id.
        working_directory: Absolute directory the job runs in (shared storage).
        command: The payload argv. Exactly one of ``command`` and ``script``.
        script: Bash script text run as the payload (``/bin/bash -c``).
        environment: Extra environment variables (``PATH`` and ``VSP_RUN_KEY`` are added when
            missing; Slurm's own ``SLURM_*`` variables are set by Slurm).
        nodes: Node count (min = max).
        tasks_per_node: Tasks per node.
        gpus_per_node: GPUs per node (``tres_per_node: gres/gpu:N``; 0 = none).
        cpus_per_task: CPUs per task (None = Slurm's default).
        time_limit_minutes: Time limit (None = the partition's default).
        standard_output: stdout path (Slurm patterns like ``%j`` allowed; None = Slurm default).
        standard_error: stderr path (None = with stdout).
        account: Slurm account (None = the user's default account).
        qos: Slurm QOS (None = default).
        requeue: Let Slurm requeue the job after preemption or node failure.
        warning_signal: Signal sent ``warning_seconds`` before the time limit (``USR1``,
            ``SIGUSR1``, or ``USR1@30`` which also sets the seconds). None = no warning.
        warning_seconds: Seconds before the end to send ``warning_signal`` (1-65535).
        extra_fields: Further ``job_desc_msg`` fields passed as given (not the managed ones).
        spec_digest: A digest of what the run trains (``vsp-spec=`` in the comment), so a step
            that finds a job by its run key can tell whether it is its own ('' = none).
        pipeline_run: The pipeline run submitting the job, as a label value
            (``vsp-pipeline-run=`` in the comment), so a teardown can tell its own jobs from
            another run's ('' = none).
        code: Staged code the payload runs from (``slurm.code_stage``; None = the working
            directory as it is on the cluster).
        container_image: Run the payload as ``srun --container-image=IMAGE ...`` (pyxis,
            ``slurm.container_run``); '' = on the node itself.
        launcher: How the payload starts: ``none`` (once, on the batch host), ``srun``
            (``tasks_per_node`` tasks on every node, with rank variables) or ``torchrun`` (one
            torchrun per node); see ``slurm.launcher``.
        nccl_env_file: Absolute path of a NCCL settings file every task sources when it exists
            on its node ('' = none); used with ``srun`` and ``torchrun`` only.
    """

    run_key: str
    partition: str
    working_directory: str
    command: Sequence[str] | None = None
    script: str | None = None
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)
    nodes: int = 1
    tasks_per_node: int = 1
    gpus_per_node: int = 0
    cpus_per_task: int | None = None
    time_limit_minutes: int | None = None
    standard_output: str | None = None
    standard_error: str | None = None
    account: str | None = None
    qos: str | None = None
    requeue: bool = True
    warning_signal: str | None = None
    warning_seconds: int = 60
    extra_fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    spec_digest: str = ""
    pipeline_run: str = ""
    code: code_stage.CodeStage | None = None
    container_image: str = ""
    launcher: str = "none"
    nccl_env_file: str = ""

    def __post_init__(self) -> None:
        if self.command is not None and not isinstance(self.command, str | bytes):
            object.__setattr__(self, "command", tuple(self.command))
        if isinstance(self.environment, Mapping):
            object.__setattr__(self, "environment", dict(self.environment))
        if isinstance(self.warning_signal, str):
            word, seconds = _parse_warning(self.warning_signal)
            object.__setattr__(self, "warning_signal", word)
            if seconds is not None:
                object.__setattr__(self, "warning_seconds", seconds)
        problems = job_checks.problems(self)
        if problems:
            raise errors.SpecValidationError("Slurm job description", problems)
        self.to_request()  # size check

    @property
    def comment(self) -> str:
        """The job comment that carries the run key."""
        words = [f"{COMMENT_PREFIX}{self.run_key}"]
        if self.spec_digest:
            words.append(f"{SPEC_PREFIX}{self.spec_digest}")
        if self.pipeline_run:
            words.append(f"{PIPELINE_RUN_PREFIX}{self.pipeline_run}")
        return " ".join(words)

    def environment_list(self) -> list[str]:
        """The environment as ``"K=V"`` strings (adds ``PATH`` and ``VSP_RUN_KEY`` if missing)."""
        env = dict(self.environment)
        env.setdefault("PATH", DEFAULT_PATH)
        env.setdefault(contract.RUN_KEY_ENV, self.run_key)
        return [f"{name}={value}" for name, value in env.items()]

    @property
    def srun_step(self) -> bool:
        """Whether the payload runs as an ``srun`` step (a launcher, or a container run)."""
        return self.launcher != "none" or bool(self.container_image)

    def batch_script(self, warning_reaches_batch: bool = True) -> str:
        """The generated bash batch script (see ``slurm_batch``); ``warning_reaches_batch``:
        the warning signal is sent to the batch shell (v0.0.39 on: ``kill_warning_flags``)."""
        forward = list(batch.FORWARDED_SIGNALS)
        if self.warning_signal and self.warning_signal not in forward:
            forward.append(self.warning_signal)
        prelude = self.code.shell() if self.code else ""
        command = self.command
        if self.container_image:
            prelude = container_run.guard() + prelude
            fuse = self.environment.get(gcs_paths.GCS_FUSE_ROOT_ENV, gcs_paths.DEFAULT_FUSE_ROOT)
            prefix = container_run.srun_prefix(self.container_image, self.working_directory, [fuse])
            inner = ["/bin/bash", "-c", self.script, batch.SCRIPT_ARGV0]
            if command is not None:
                inner = list(command)
            command = [*prefix, *inner]
        return batch.render(
            command,
            script=self.script if command is None else None,
            forward=forward,
            run_key=self.run_key,
            working_directory=self.working_directory,
            prelude=prelude,
            launcher=self.launcher,
            tasks_per_node=self.tasks_per_node,
            nccl_env_file=self.nccl_env_file,
            srun_step=self.srun_step,
            exit_143_needs_notice=warning_reaches_batch,
        )

    def to_request(self, version: str = DEFAULT_VERSION) -> dict[str, Any]:
        """The exact submit body for ``POST /slurm/{version}/job/submit``.

        Raises:
            errors.SpecValidationError: The request (inside the proxy wrapper) is 1 MB or more.
        """
        legacy = is_legacy(version)
        job: dict[str, Any] = {"name": self.run_key, "comment": self.comment}
        optional = {
            "partition": self.partition,
            "account": self.account,
            "qos": self.qos,
            "current_working_directory": self.working_directory,
            "standard_output": self.standard_output,
            "standard_error": self.standard_error,
        }
        job.update({k: v for k, v in optional.items() if v is not None})
        env = self.environment_list()
        job["environment"] = dict(e.split("=", 1) for e in env) if legacy else env
        job.update(
            minimum_nodes=self.nodes,
            maximum_nodes=self.nodes,
            tasks_per_node=self.tasks_per_node,
            tasks=self.nodes * self.tasks_per_node,
        )
        if self.cpus_per_task is not None:
            job["cpus_per_task"] = self.cpus_per_task
        if self.gpus_per_node:
            job["tres_per_node"] = f"gres/gpu:{self.gpus_per_node}"
        if self.time_limit_minutes is not None:
            minutes = self.time_limit_minutes
            job["time_limit"] = minutes if legacy else no_val(minutes)
        job["requeue"] = self.requeue
        # Real Slurm truncates the output files at every restart of a requeued job unless told
        # to append; appending keeps every attempt's log.
        job["open_mode"] = "append" if legacy else ["APPEND"]
        if self.warning_signal and legacy:
            job["signal"] = f"{self.warning_signal}@{self.warning_seconds}"
        elif self.warning_signal:
            job["kill_warning_signal"] = self.warning_signal
            job["kill_warning_delay"] = no_val(self.warning_seconds)
            job["kill_warning_flags"] = ["BATCH_JOB"]
        job.update(self.extra_fields)
        if legacy:
            request = {"script": self.batch_script(warning_reaches_batch=False), "job": job}
        else:
            request = {"job": {**job, "script": self.batch_script()}}
        self._check_size(request, version)
        return request

    def _check_size(self, request: dict[str, Any], version: str) -> None:
        wrapped = {
            "method": "HTTP_METHOD_POST",
            "path": f"/slurm/{version}/job/submit",
            "body": request,
        }
        size = len(json.dumps(wrapped).encode("utf-8"))
        if size >= MAX_REQUEST_BYTES:
            problem = errors.SpecProblem(
                "script",
                f"<{size} bytes>",
                f"the submit request is {size} bytes; callSlurmRestApi takes under 1 MB "
                f"({MAX_REQUEST_BYTES} bytes).",
                "keep big scripts and data on shared storage (e.g. the cluster's home "
                "Filestore) and pass their path in command; keep environment values small.",
            )
            raise errors.SpecValidationError("Slurm job description", [problem])
