"""Validation of a ``slurm_script.JobDescription``: every problem, with field, value and fix.

Kept apart from the description itself so the request builder stays short. ``problems`` reads the
description's attributes only (duck-typed) and never raises.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from vsp.components.runtime.core import env_names, errors
from vsp.components.runtime.slurm import job_fields, launcher

RUN_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+@=-]{0,127}\Z")
SLURM_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")
WARNING_SIGNALS = ("USR1", "USR2", "TERM", "INT", "HUP")
MANAGED_KEYS = frozenset(
    "name comment partition account qos current_working_directory standard_output "
    "standard_error environment minimum_nodes maximum_nodes nodes tasks_per_node tasks "
    "cpus_per_task tres_per_node time_limit requeue kill_warning_signal kill_warning_delay "
    "kill_warning_flags signal script open_mode".split()
)
# (field, minimum, may be None)
_INTEGERS = (
    ("nodes", 1, False),
    ("tasks_per_node", 1, False),
    ("gpus_per_node", 0, False),
    ("cpus_per_task", 1, True),
    ("time_limit_minutes", 1, True),
    ("warning_seconds", 1, False),
)


def is_int(value: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_clean_text(value: Any) -> bool:
    """A non-empty string without NUL, CR or LF."""
    return isinstance(value, str) and bool(value) and not any(c in value for c in "\0\n\r")


def is_slurm_name(value: Any) -> bool:
    """A Slurm partition/account/QOS/user name: letters, digits, ``_.-``, up to 128."""
    return isinstance(value, str) and bool(SLURM_NAME_RE.match(value))


def problems(desc: Any) -> list[errors.SpecProblem]:
    """Every problem of a job description (empty when valid)."""
    found: list[errors.SpecProblem] = []

    def bad(field: str, value: Any, problem: str, fix: str) -> None:
        found.append(errors.SpecProblem(field, value, problem, fix))

    if not (isinstance(desc.run_key, str) and RUN_KEY_RE.match(desc.run_key)):
        bad(
            "run_key",
            desc.run_key,
            "is not a valid run key.",
            "use 1-128 characters from A-Za-z0-9._:+@=- starting with a letter or digit.",
        )
    if not is_slurm_name(desc.partition):
        bad(
            "partition",
            desc.partition,
            "is not a Slurm partition name.",
            "use a partition id from the cluster's slurm_spec.partitions.",
        )
    for field in ("account", "qos"):
        value = getattr(desc, field)
        if value is not None and not is_slurm_name(value):
            bad(field, value, "is not a Slurm name.", f"pass a valid {field} or None.")
    cwd = desc.working_directory
    if not (is_clean_text(cwd) and cwd.startswith("/")):
        bad(
            "working_directory",
            cwd,
            "must be an absolute path without newlines.",
            "pass a directory on shared storage, e.g. /home/USER/runs.",
        )
    for field in ("standard_output", "standard_error"):
        value = getattr(desc, field)
        if value is not None and not is_clean_text(value):
            bad(
                field,
                value,
                "must be a non-empty path without newlines.",
                "pass a path such as /home/USER/runs/%j.out, or None.",
            )
    _payload(desc, bad)
    _container(desc, bad)
    _numbers(desc, bad)
    launch_problems(desc.launcher, desc.nccl_env_file, bad)
    env_names.check_environment(desc.environment, bad)
    clash = sorted(set(desc.extra_fields) & MANAGED_KEYS)
    if clash:
        bad(
            "extra_fields",
            clash,
            "sets fields the description manages.",
            "use the JobDescription attributes for those.",
        )
    _extra_field_names(desc.extra_fields, bad)
    return found


def _extra_field_names(extra_fields: Any, bad) -> None:
    """Refuses ``extra_fields`` keys that are not ``job_desc_msg`` fields (Slurm would only warn
    and ignore them)."""
    for key in extra_fields:
        if key in MANAGED_KEYS or key in job_fields.JOB_DESC_FIELDS:
            continue
        close = difflib.get_close_matches(str(key), sorted(job_fields.JOB_DESC_FIELDS))
        if close:
            fix = f"use the field meant (closest: {', '.join(map(repr, close))}) or drop the key."
        else:
            fix = (
                "use a job_desc_msg field (listed in vsp.components.runtime.slurm.job_fields) "
                "or drop the key."
            )
        bad(
            f"extra_fields[{key!r}]",
            key,
            "is not a field of Slurm's v0.0.42 job description (slurmrestd would ignore it).",
            fix,
        )


def _payload(desc: Any, bad) -> None:
    argv, script = desc.command, desc.script
    if (argv is None) == (script is None):
        bad(
            "command",
            argv,
            "exactly one of command and script is needed.",
            "pass the payload argv as command, or bash text as script.",
        )
    elif argv is not None:
        listed = not isinstance(argv, str | bytes) and all(isinstance(a, str) for a in argv)
        if not (listed and argv):
            bad(
                "command",
                argv,
                "must be a non-empty list of strings.",
                'pass an argv list, e.g. ["python", "-m", "vsp.examples.trainer"].',
            )
        elif not argv[0] or any("\0" in a for a in argv):
            bad(
                "command",
                argv,
                "has an empty program name or a NUL character.",
                "name the program first; remove NUL characters (argv cannot carry them).",
            )
    elif not (isinstance(script, str) and script.strip() and "\0" not in script):
        bad(
            "script",
            script,
            "must be non-empty bash text without NUL.",
            "pass the script text, or use command.",
        )


def _container(desc: Any, bad) -> None:
    image = desc.container_image
    if not isinstance(image, str) or (image and not is_clean_text(image)):
        bad(
            "container_image",
            image,
            "must be an image reference without newlines.",
            "pass e.g. nvcr.io#nvidia/pytorch:24.08-py3, or '' to run on the node itself.",
        )
    elif image and any(c in desc.working_directory for c in ",:"):
        bad(
            "working_directory",
            desc.working_directory,
            "contains , or : and cannot be mounted into the container (pyxis' separators).",
            "use a working directory without , and :.",
        )
    if image and desc.code is not None:
        bad(
            "container_image",
            image,
            "is given with staged code: the code's venv is built on the node, outside the image.",
            "put the code and its packages in the image, or drop container_image to run the "
            "staged code in its own venv.",
        )


def _numbers(desc: Any, bad) -> None:
    for field, low, optional in _INTEGERS:
        value = getattr(desc, field)
        if (value is not None or not optional) and not (is_int(value) and value >= low):
            bad(field, value, f"must be an integer >= {low}.", f"pass an integer >= {low}.")
    if is_int(desc.warning_seconds) and desc.warning_seconds > 65535:
        bad(
            "warning_seconds",
            desc.warning_seconds,
            "exceeds 65535 (a uint16 in Slurm).",
            "use at most 65535 seconds.",
        )
    if not isinstance(desc.requeue, bool):
        bad("requeue", desc.requeue, "must be a boolean.", "pass True or False.")
    if desc.warning_signal is not None and desc.warning_signal not in WARNING_SIGNALS:
        bad(
            "warning_signal",
            desc.warning_signal,
            "is not a supported warning signal.",
            f"use one of {', '.join(WARNING_SIGNALS)}, optionally as SIG@SECONDS.",
        )
    if desc.srun_step and desc.warning_signal in launcher.STEP_SIGNALS:
        bad(
            "warning_signal",
            desc.warning_signal,
            "reaches only the batch shell, and the job's tasks run under srun (launcher "
            f"{desc.launcher!r}, or a container image), which answers it by killing every task.",
            "use USR1 or USR2 (srun passes them on to every task; the trainer's notice "
            "signals include SIGUSR1).",
        )
    limit, warn = desc.time_limit_minutes, desc.warning_seconds
    if desc.warning_signal and is_int(limit) and is_int(warn) and warn >= limit * 60:
        bad(
            "warning_seconds",
            warn,
            f"is not shorter than the time limit ({limit} min).",
            "send the warning a few minutes before the end, or raise the time limit.",
        )


def launch_problems(launcher_name: Any, nccl_env_file: Any, bad, container_image: Any = "") -> None:
    """Checks ``launcher`` and ``nccl_env_file`` (shared with the step's parameter checks).

    A container image runs the trainer through pyxis' own ``srun`` (``slurm.container_run``),
    which already starts every task: it takes the launcher ``none`` only.
    """
    if container_image and launcher_name not in ("none", None):
        bad(
            "launcher",
            launcher_name,
            "cannot be combined with container_image: the image's srun already starts nodes x "
            "tasks_per_node tasks, each with Slurm's SLURM_PROCID.",
            "use launcher 'none' with container_image, or drop container_image.",
        )
    if launcher_name not in launcher.LAUNCHERS:
        bad(
            "launcher",
            launcher_name,
            "is not a launcher.",
            "use 'none' (the trainer once, on the first node), 'srun' (tasks_per_node tasks on "
            "every node, with RANK/WORLD_SIZE/MASTER_ADDR...) or 'torchrun' (one torchrun per "
            "node, tasks_per_node workers each).",
        )
    if nccl_env_file != "" and not (is_clean_text(nccl_env_file) and nccl_env_file.startswith("/")):
        bad(
            "nccl_env_file",
            nccl_env_file,
            "must be '' or an absolute path without newlines.",
            f"pass e.g. {launcher.DEFAULT_NCCL_ENV_FILE}, or '' to source no NCCL settings.",
        )
