"""Reading the checkpoint history: a JSON line per save and per resume, written as it happens.

``<checkpoint root>/history.jsonl``, beside the checkpoints (``history_writer`` appends to it),
is read by the step through Cloud Storage; retention never prunes it. Lines (epoch s, s)::

    {"event": "start",  "time": T, "step": 0, "seconds": R}     a run began with no checkpoint
    {"event": "resume", "time": T, "step": S, "seconds": R}     loaded step S; loading took R
    {"event": "save", "time": T, "step": S, "seconds": B, "reason": "periodic|notice|final"}
    {"event": "saved", "time": T, "step": S, "seconds": B}      the save of S is complete

``time``: when it began; ``seconds``: how long it held training back. A ``saved`` line gives
its save's whole blocked time. ``notice_outcomes`` counts the interruptions whose notice save
the next process resumed from, and those without one. Standard library only (steps have no
numpy); hand-rolled: one line per event, a torn line is skipped with a warning.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

from vsp.components.runtime.core import file_primitives, gcs_paths

log = logging.getLogger(__name__)

HISTORY_FILE = "history.jsonl"
SAVE_REASONS = ("periodic", "notice", "final")
START_EVENTS = ("start", "resume")


@dataclasses.dataclass(frozen=True)
class Record:
    """One history line (see the module docstring); ``reason`` only for saves."""

    event: str
    time: float
    step: int
    seconds: float
    reason: str = ""

    @property
    def end(self) -> float:
        """Epoch seconds training went on again."""
        return self.time + self.seconds


def history_file(directory: file_primitives.PathLike) -> Path:
    """Where the history of the checkpoint root ``directory`` lives."""
    return gcs_paths.to_local_path(directory) / HISTORY_FILE


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


def notice_outcomes(records: list[Record]) -> tuple[int, int]:
    """``(landed, failed)`` over the interruptions in ``records``.

    An interruption is a trainer process followed by another start line. It *landed* when that
    process made a ``notice`` save of the very step the next one resumed from; otherwise
    (no notice save, or one that never completed, so the next process resumed from an older
    step or from scratch) it *failed*. A process that made its ``final`` save of the step the
    next one resumed from finished its training: that is a hand-over (a fine-tuning task
    continuing a pretraining's folder), not an interruption, and counts in neither.
    """
    runs: list[tuple[Record, list[Record]]] = []
    for record in sorted(records, key=lambda r: r.time):
        if record.event in START_EVENTS:
            runs.append((record, []))
        elif runs and record.event == "save" and record.reason in ("notice", "final"):
            runs[-1][1].append(record)
    landed = interruptions = 0
    for (_, saves), (following, _) in zip(runs, runs[1:], strict=False):
        resumed = following.step if following.event == "resume" else None
        if any(s.reason == "final" and s.step == resumed for s in saves):
            continue
        interruptions += 1
        landed += any(s.reason == "notice" and s.step == resumed for s in saves)
    return landed, interruptions - landed
