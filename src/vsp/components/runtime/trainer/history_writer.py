"""Appending to the checkpoint history (``history``), for the checkpoint library.

A save's ``save`` line is written just before its manifest commits it, so a process killed in
between leaves a line for a save that does not exist: readers follow the step the next process
resumed from, so it does not count. Its ``saved`` line, once the manifest is written and
retention has run, gives the whole time the save blocked. Each line is one write, flushed and
fsynced; on GCS FUSE an append rewrites the (small) object.
"""

from __future__ import annotations

import json
import os
import time

from vsp.components.runtime.core import errors, file_primitives
from vsp.components.runtime.trainer.history import SAVE_REASONS, Record, history_file


def to_json(record: Record) -> str:
    """The history line of ``record``."""
    body = {"event": record.event, "time": record.time, "step": record.step}
    body["seconds"] = record.seconds
    if record.reason:
        body["reason"] = record.reason
    return json.dumps(body, sort_keys=True)


def append(directory: file_primitives.PathLike, record: Record) -> None:
    """Appends one record (a single write of one line, flushed and fsynced)."""
    path = history_file(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(to_json(record) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def record_save(
    directory: file_primitives.PathLike, step: int, started: float, seconds: float, reason: str
) -> Record:
    """Appends the record of a save that began at ``started`` and blocked ``seconds``.

    Raises:
        errors.UserError: ``reason`` is not one of ``SAVE_REASONS``.
    """
    if reason not in SAVE_REASONS:
        raise errors.UserError(
            f"save reason {reason!r} is not one of {', '.join(SAVE_REASONS)}. Fix: pass "
            "reason='periodic' for interval saves, 'notice' on a preemption notice, 'final' "
            "at the end of training."
        )
    record = Record("save", round(started, 6), int(step), round(max(0.0, seconds), 6), reason)
    append(directory, record)
    return record


def record_saved(
    directory: file_primitives.PathLike, step: int, started: float, seconds: float
) -> None:
    """Appends that the save of ``step`` begun at ``started`` completed after ``seconds``."""
    append(directory, Record("saved", round(started, 6), int(step), round(max(0.0, seconds), 6)))


def record_unchanged(
    directory: file_primitives.PathLike, step: int, reason: str, at: float | None = None
) -> Record:
    """Records a save of ``step`` that had nothing to write: its committed checkpoint already
    holds this process's state (no step trained since it was loaded or saved).

    A ``save`` and a ``saved`` line of 0 s at ``at`` (default now): a notice honoured this
    way counts as landed when the next process resumes from ``step``
    (``history.notice_outcomes``), and a final one as a hand-over.
    """
    moment = time.time() if at is None else float(at)
    record = record_save(directory, step, moment, 0.0, reason)
    record_saved(directory, step, moment, 0.0)
    return record


def record_resume(
    directory: file_primitives.PathLike, step: int | None, started: float, seconds: float
) -> Record:
    """Appends the start of a trainer process: resumed from ``step`` (None: from scratch)."""
    event = "start" if step is None else "resume"
    record = Record(event, round(started, 6), int(step or 0), round(max(0.0, seconds), 6))
    append(directory, record)
    return record
