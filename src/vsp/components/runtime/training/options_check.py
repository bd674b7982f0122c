"""The training step's parameters, checked before anything is created or submitted.

The same check runs in the training step (``check_training``, before the first submission) and
in the pipeline's first step (``check_run_parameters``), so a typo in an environment variable
name or a nonsense number fails in seconds, before a cluster is provisioned for it.

Every number has bounds: a negative ``fallback_after_preemptions`` would move a healthy Spot
job to on-demand, a ``poll_seconds`` of -1 would poll without pause. Types are checked too
(a ``--param`` may hand over a string), and a value shown in a message is cut to 80
characters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from vsp.components.runtime.core import env_names, errors

# name -> (minimum, maximum, integer?)
BOUNDS: dict[str, tuple[float, float, bool]] = {
    "nodes": (1, 1024, True),
    "gpus_per_node": (0, 16, True),
    "time_limit_minutes": (0, 365 * 24 * 60, True),
    "max_preemptions": (0, 10_000, True),
    "max_user_failures": (0, 1_000, True),
    "fallback_after_preemptions": (0, 10_000, True),
    "capacity_wait_seconds": (0, 30 * 24 * 3600, False),
    "poll_seconds": (0.1, 3600, False),
    "timeout_seconds": (1, 90 * 24 * 3600, False),
    "spot_price_per_node_hour": (0, 10_000, False),
    "ondemand_price_per_node_hour": (0, 10_000, False),
    "max_hangs": (0, 1_000, True),
    "hang_floor_seconds": (0, 30 * 24 * 3600, False),
    "hang_step_factor": (1, 10_000, False),
}


def _number_problem(name: str, value: Any) -> errors.SpecProblem | None:
    low, high, integer = BOUNDS[name]
    kind = "a whole number" if integer else "a number"
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    if ok and integer:
        ok = float(value).is_integer() if isinstance(value, float) else True
    if ok:
        ok = math.isfinite(value) and low <= value <= high
    if ok:
        return None
    return errors.SpecProblem(
        name, value, f"must be {kind} from {low:g} to {high:g}.",
        f"set {name} within those bounds.",
    )  # fmt: skip


def problems(**params: Any) -> list[errors.SpecProblem]:
    """Every problem of the given training parameters (only those passed are checked).

    Args:
        **params: Any of ``BOUNDS``' names, ``command`` (argv list), ``environment`` (str to
            str), ``working_directory`` (absolute path) and ``checkpoint_dir``.
    """
    found = [
        problem
        for name, value in params.items()
        if name in BOUNDS and (problem := _number_problem(name, value)) is not None
    ]
    if "command" in params:
        found += _command_problems(params["command"])
    if "environment" in params:
        environment = params["environment"]

        def bad(field: str, value: Any, problem: str, fix: str) -> None:
            found.append(errors.SpecProblem(field, value, problem, fix))

        env_names.check_environment(environment, bad)
    if params.get("working_directory", "") != "":  # '' = not used (CustomJob training)
        directory = params["working_directory"]
        if not (
            isinstance(directory, str)
            and directory.startswith("/")
            and not any(c in directory for c in "\0\n\r")
        ):
            found.append(
                errors.SpecProblem(
                    "working_directory",
                    directory,
                    "must be an absolute path on one line.",
                    "give the job directory on the cluster's shared storage, e.g. /home/me/run.",
                )  # fmt: skip
            )
    return found


def check_training(**params: Any) -> None:
    """Raises ``SpecValidationError`` listing every problem of the training parameters."""
    found = problems(**params)
    if found:
        raise errors.SpecValidationError("the training parameters", found)


def component_params(values: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of ``values`` this module checks."""
    names = {*BOUNDS, "command", "environment", "working_directory"}
    return {k: v for k, v in values.items() if k in names}


def _command_problems(command: Any) -> list[errors.SpecProblem]:
    """What is wrong with ``command``, naming the item when one is."""
    if not isinstance(command, (list, tuple)) or not command:
        return [
            errors.SpecProblem(
                "command",
                command,
                "must be a non-empty list of strings.",
                "give the trainer's argv, one item per argument, e.g. "
                '["python", "/home/me/train.py"] (a relative path is read from the job\'s '
                "working_directory).",
            )
        ]
    found = []
    for index, part in enumerate(command):
        if not isinstance(part, str):
            found.append(
                errors.SpecProblem(
                    f"command[{index}]",
                    part,
                    f"is {type(part).__name__}, not a string: every argument is text.",
                    # A pipeline's JSON carries every number as a float: 30 arrives as 30.0.
                    f'quote it, e.g. "{int(part) if float(part).is_integer() else part}".'
                    if isinstance(part, (int, float)) and math.isfinite(part)
                    else "give each argument as a string.",
                )
            )
        elif index == 0 and not part.strip():
            found.append(
                errors.SpecProblem(
                    "command[0]",
                    part,
                    "is blank: the first item is the program the job runs.",
                    'name the program first, e.g. ["python", "/home/me/train.py"].',
                )
            )
        elif "\0" in part:
            found.append(
                errors.SpecProblem(
                    f"command[{index}]",
                    part,
                    "holds a NUL character, which no argument can carry.",
                    "remove it.",
                )
            )
    return found
