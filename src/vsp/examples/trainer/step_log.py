"""The trainer's own per-step log (``--step-log``): when each training step began and ended.

The reference a run's goodput metric is checked against: the checkpoint history says how long
saves and reloads took, this log says which steps were computed when, so the time spent on the
steps that survived into the model can be summed without trusting the history. Hand-rolled:
one appended text line per step.
"""

from __future__ import annotations

import os
from pathlib import Path


class StepLog:
    """``--step-log``: one line ``STEP BEGAN ENDED PID`` (epoch seconds, the trainer's process
    id) per training step (its progress line included, checkpoint saves not), appended and
    flushed as each step ends, so a run's useful time can be checked against its metrics. Does
    nothing without a path."""

    def __init__(self, path: Path | None):
        self.path = path
        self._handle = None

    def __enter__(self) -> StepLog:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in exit
        return self

    def write(self, step: int, began: float, ended: float) -> None:
        if self._handle is not None:
            self._handle.write(f"{step} {began:.6f} {ended:.6f} {os.getpid()}\n")
            self._handle.flush()

    def __exit__(self, *exc_info: object) -> None:
        if self._handle is not None:
            self._handle.close()


def read_step_log(path: Path) -> list[tuple[int, float, float, int]]:
    """The (step, began, ended, pid) lines of a step log, in the order written (torn lines
    skipped)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        words = line.split()
        if len(words) == 4:
            try:
                rows.append((int(words[0]), float(words[1]), float(words[2]), int(words[3])))
            except ValueError:
                continue
    return rows
