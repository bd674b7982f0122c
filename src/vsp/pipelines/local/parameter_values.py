"""Parameter values reach a local run's steps as given.

kfp.local's ``SubprocessRunner`` replaces every ``python3`` in a task's command line with the
step's interpreter path (``subprocess_task_handler.replace_python_executable``), to run the
component's ``python3 -m ...`` launcher in the right environment. The executor input, the JSON of
the task's parameter values, is one element of that command line, so a value such as
``--corpus=/data/python3-corpus`` or ``model_dir=gs://b/python3-models`` was rewritten too: the
trainer got another path and the model was registered elsewhere. Vertex AI Pipelines passes the
executor input untouched, and so does a local run inside ``kept_as_given``, which restores the
executor input's element after kfp.local's rewrite (hand-written because kfp offers no switch for
it; the rewrite itself is left to kfp for every other element).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

EXECUTOR_INPUT_FLAG = "--executor_input"


def executor_input_positions(full_command: list[str]) -> set[int]:
    """Indexes of the elements that hold an executor input (the one after its flag)."""
    return {i + 1 for i, part in enumerate(full_command[:-1]) if part == EXECUTOR_INPUT_FLAG}


@contextlib.contextmanager
def kept_as_given() -> Iterator[None]:
    """Makes kfp.local leave the executor input alone when it rewrites ``python3``, for a while."""
    from kfp.local import subprocess_task_handler as handler  # noqa: PLC0415

    original = handler.replace_python_executable

    def replace_python_executable(full_command: list[str], new_executable: str) -> list[str]:
        replaced = original(full_command, new_executable)
        kept = executor_input_positions(full_command)
        return [full_command[i] if i in kept else part for i, part in enumerate(replaced)]

    handler.replace_python_executable = replace_python_executable
    try:
        yield
    finally:
        handler.replace_python_executable = original
