"""The trainer's own per-step log (``--step-log``): when each training step began and ended.

The reference a run's goodput metric is checked against: the checkpoint history says how long
saves and reloads took, this log says which steps were computed when, so the time spent on the
steps that survived into the model can be summed without trusting the history. Hand-rolled:
one appended text line per step.

A step lasts from the moment the loop began it until the loop begins the next step, pauses for
a checkpoint save, or leaves. The loop's own work after a step (its progress line, its log
line, the check whether to save) is training time and belongs to the step before it; a save's
time belongs to no step. So a step's line is written when the step ends that way, not when its
update is done: on a busy machine the loop may wait for a core between two updates, and that
wait is part of training, as it is for any trainer.

A save lasts from the pause until the save call returned (``resumed``), the span the checkpoint
history gives it. The loop's own work after a save (its progress line, its log line about the
save, the policy's bookkeeping) belongs to the step after it, as the loop's work after a step
belongs to that step.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


class StepLog:
    """``--step-log``: one line ``STEP BEGAN ENDED PID`` (epoch seconds, the trainer's process
    id) per training step, appended and flushed when the step ends (see the module). Does
    nothing without a path.

    Use: ``began = log.begin()`` at the top of every step, ``log.done(step, began)`` once its
    update is made, ``log.pause()`` before a checkpoint save and ``log.resumed()`` when the save
    call returned; leaving the ``with`` block ends the open step too. A process killed between
    ``done`` and the next ``begin`` or ``pause`` leaves no line for that step (it was not saved,
    so no model holds it).

    Args:
        path: The log file (appended; its folder is made), or None for no log.
        clock: Epoch-seconds source.
    """

    def __init__(self, path: Path | None, clock: Callable[[], float] = time.time):
        self.path = path
        self.clock = clock
        self._handle = None
        self._open: tuple[int, float] | None = None  # (step, began) of a step not yet ended
        self._resumed_at: float | None = None  # when the last save returned, if no step since

    def __enter__(self) -> StepLog:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in exit
        return self

    def begin(self) -> float:
        """Ends the open step now and returns the time the next step begins: now, or when
        the save before it returned (``resumed``)."""
        now = self.clock()
        self._end(now)
        began = now if self._resumed_at is None else min(self._resumed_at, now)
        self._resumed_at = None
        return began

    def done(self, step: int, began: float) -> None:
        """Step ``step``, begun at ``began``, made its update; it ends at the next ``begin``,
        ``pause`` or exit."""
        self._open = (step, began)

    def pause(self) -> None:
        """Ends the open step now (call before a checkpoint save)."""
        if self._open is not None:
            self._end(self.clock())

    def resumed(self) -> None:
        """The save call returned now: training time again, counted in the next step."""
        self._resumed_at = self.clock()

    def _end(self, ended: float) -> None:
        if self._open is None:
            return
        step, began = self._open
        self._open = None
        if self._handle is not None:
            self._handle.write(f"{step} {began:.6f} {ended:.6f} {os.getpid()}\n")
            self._handle.flush()

    def __exit__(self, *exc_info: object) -> None:
        self.pause()
        if self._handle is not None:
            self._handle.close()
            self._handle = None


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
