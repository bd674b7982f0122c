"""The checkpoint history: one JSON line per save and per resume, written when it happens.

``<checkpoint root>/history.jsonl`` sits beside the checkpoints, on the same storage (Cloud
Storage through GCS FUSE on a cluster), so the pipeline step reads it as it reads the job's log.
It is append-only and retention never prunes it: keep-last-N deletes old checkpoints, but when
each was written, how long it blocked training and why it was taken still decide the goodput.

Records (times in epoch seconds, durations in seconds)::

    {"event": "start",  "time": T, "step": 0, "seconds": R}     a run began with no checkpoint
    {"event": "resume", "time": T, "step": S, "seconds": R}     loaded step S; loading took R
    {"event": "save", "time": T, "step": S, "seconds": B, "reason": "periodic|notice|final"}
    {"event": "saved", "time": T, "step": S, "seconds": B}      the save of S is complete

``time`` is when the operation began, ``seconds`` how long it held training back. A save's
``save`` line is written just before its manifest commits it, so a process killed in between
leaves a line for a save that does not exist (readers follow the step the next process resumed
from, so it does not count); its ``saved`` line, once the manifest is written and retention
has run, gives the whole time the save blocked and replaces the ``save`` line's. Standard
library only: the pipeline steps read it without numpy. Hand-rolled because it is one appended
line per event; a line that does not parse (a torn append) is skipped with a warning.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path

from vsp.components.runtime.core import errors, file_primitives

log = logging.getLogger(__name__)

HISTORY_FILE = "history.jsonl"
SAVE_REASONS = ("periodic", "notice", "final")
START_EVENTS = ("start", "resume")


@dataclasses.dataclass(frozen=True)
class Record:
    """One history line.

    Attributes:
        event: ``start``, ``resume`` or ``save``.
        time: Epoch seconds the operation began.
        step: The step saved, or resumed from (0 for ``start``).
        seconds: Seconds it held training back (save blocked; load took).
        reason: For saves: ``periodic``, ``notice`` or ``final``; '' otherwise.
    """

    event: str
    time: float
    step: int
    seconds: float
    reason: str = ""

    @property
    def end(self) -> float:
        """Epoch seconds training went on again."""
        return self.time + self.seconds

    def to_json(self) -> str:
        body = {"event": self.event, "time": self.time, "step": self.step}
        body["seconds"] = self.seconds
        if self.reason:
            body["reason"] = self.reason
        return json.dumps(body, sort_keys=True)


def history_file(directory: file_primitives.PathLike) -> Path:
    """Where the history of the checkpoint root ``directory`` lives."""
    return file_primitives.to_local_path(directory) / HISTORY_FILE


def append(directory: file_primitives.PathLike, record: Record) -> None:
    """Appends one record (a single write of one line, flushed and fsynced)."""
    path = history_file(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(record.to_json() + "\n")
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


def record_resume(
    directory: file_primitives.PathLike, step: int | None, started: float, seconds: float
) -> Record:
    """Appends the start of a trainer process: resumed from ``step`` (None: from scratch)."""
    event = "start" if step is None else "resume"
    record = Record(event, round(started, 6), int(step or 0), round(max(0.0, seconds), 6))
    append(directory, record)
    return record


def _parse(line: str) -> Record | None:
    try:
        raw = json.loads(line)
        record = Record(
            event=str(raw["event"]),
            time=float(raw["time"]),
            step=int(raw["step"]),
            seconds=float(raw.get("seconds", 0.0)),
            reason=str(raw.get("reason", "")),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if record.event not in ("save", "saved", *START_EVENTS):
        return None
    return record


def read(directory: file_primitives.PathLike) -> list[Record] | None:
    """Every readable record, by time; None when the root or its history cannot be seen."""
    path = history_file(directory)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    records: list[Record] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        record = _parse(line)
        if record is None:
            log.warning("skipping unreadable line %d of %s: %.80s", number, path, line)
        elif record.event == "saved":
            _complete(records, record)
        else:
            records.append(record)
    return sorted(records, key=lambda r: r.time)


def _complete(records: list[Record], saved: Record) -> None:
    """Gives the latest ``save`` line of the same step and start the whole blocked time."""
    for index in range(len(records) - 1, -1, -1):
        found = records[index]
        if found.event == "save" and found.step == saved.step and found.time == saved.time:
            records[index] = dataclasses.replace(found, seconds=saved.seconds)
            return
