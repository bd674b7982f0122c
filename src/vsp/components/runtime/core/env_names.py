"""Environment variables a user may give a job: their names, and the ones that change the shell.

Shared by the Slurm job description checks and the training parameter check, so both refuse
the same names with the same words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# Variables that change how bash runs a script: it would source BASH_ENV/ENV, take shell options
# (SHELLOPTS=noexec runs nothing and exits 0) or import functions (BASH_FUNC_*).
SHELL_CONTROL_ENV = frozenset({"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "CDPATH", "GLOBIGNORE"})


def check_environment(environment: Any, bad: Callable[[str, Any, str, str], None]) -> None:
    """Reports each problem of an environment mapping as ``bad(field, value, problem, fix)``."""
    if not isinstance(environment, dict):
        bad("environment", environment, "must be a mapping.", "pass a dict of str to str.")
        return
    for name, value in environment.items():
        field = f"environment[{name!r}]"
        if not (isinstance(name, str) and ENV_NAME_RE.match(name)):
            bad(
                field,
                name,
                "is not a valid variable name.",
                "use letters, digits and _ only, not starting with a digit.",
            )
        elif name in SHELL_CONTROL_ENV or name.startswith("BASH_FUNC_"):
            bad(
                field,
                name,
                "changes how the job's shell runs (it could source a file or skip the payload).",
                "drop it from environment; set it inside the trainer if the trainer needs it.",
            )
        elif not isinstance(value, str) or "\0" in value:
            bad(field, value, "must be a string without NUL.", "convert the value to a string.")
