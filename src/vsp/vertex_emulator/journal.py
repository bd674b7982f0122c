"""The request journal: one JSON line per API request in ``{state_dir}/journal.jsonl``.

Each line holds ``time`` (RFC 3339, when the request arrived), ``method``, ``path`` (decoded, no
query string), ``query`` (parameter -> value, or a list when repeated), ``body`` (parsed JSON or
null), ``status`` (the HTTP status sent, or ``"reset"`` when the connection was dropped) and
``fault`` (id of the fault rule that fired, comma-joined if several, else null). Control
endpoints (``/emulator/...``) are not journaled.
"""

from __future__ import annotations

import json
import os
import pathlib
import threading
from typing import Any

JOURNAL_FILENAME = "journal.jsonl"


def journal_path(state_dir: str | os.PathLike[str]) -> pathlib.Path:
    """Where the journal of a state directory lives."""
    return pathlib.Path(state_dir) / JOURNAL_FILENAME


def read_journal(state_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Reads every journal entry of a state directory, oldest first.

    Args:
        state_dir: The emulator's state directory.

    Returns:
        The entries; an empty list when there is no journal. A torn last line (a crash during
        an append) is skipped.
    """
    entries: list[dict[str, Any]] = []
    try:
        with open(journal_path(state_dir), encoding="utf-8") as handle:
            for line in handle:
                line = line.strip()
                if not line:
                    continue
                try:
                    entries.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    except FileNotFoundError:
        return []
    return entries


class Journal:
    """Thread-safe appender of journal entries."""

    def __init__(self, state_dir: str | os.PathLike[str]):
        """Prepares the journal of a state directory (the file is created on first append).

        Args:
            state_dir: The emulator's state directory.
        """
        self._state_dir = pathlib.Path(state_dir)
        self._path = journal_path(state_dir)
        self._lock = threading.Lock()

    @property
    def path(self) -> pathlib.Path:
        """The journal file."""
        return self._path

    def append(self, entry: dict[str, Any]) -> None:
        """Appends one entry as a JSON line."""
        line = json.dumps(entry, separators=(",", ":"), ensure_ascii=False) + "\n"
        with self._lock, open(self._path, "a", encoding="utf-8") as handle:
            handle.write(line)

    def read(self) -> list[dict[str, Any]]:
        """All entries, oldest first."""
        with self._lock:
            return read_journal(self._state_dir)
