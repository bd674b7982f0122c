"""Persistent emulator state: named collections of JSON documents in the state directory.

Every document is one row of a SQLite database, ``{state_dir}/store/state.sqlite3`` (WAL mode,
so ``state.sqlite3-wal`` and ``-shm`` sit beside it), keyed by collection and key (usually a
resource name); a write costs one row whatever the collection's size. Documents are also cached
in memory (a collection is read once, on first use), so reads never touch the disk. One
re-entrant lock guards everything, so a ``transaction()`` block is a consistent
read-modify-write; its writes reach the database in one SQLite transaction when the outermost
block exits, and an exception inside it rolls the touched collections back. Commits are not
fsynced (``synchronous=NORMAL``): a power cut may lose the last requests, never corrupt the file.

The stdlib ``sqlite3`` is used rather than a document-store library: it gives atomic
multi-document commits and O(1) writes with no dependency.

State directories written before the database (one ``{state_dir}/store/{collection}.json``
file per collection) are migrated when opened: their documents are imported in order and each
file is renamed to ``{collection}.json.migrated``. A directory holding both a non-empty database
and such files is refused (``StoreError`` says which files to remove).

Only one process may own a state directory at a time (``EmulatorServer`` takes a lock file).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pathlib
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

STORE_DIRNAME = "store"
DATABASE_FILENAME = "state.sqlite3"
MIGRATED_SUFFIX = ".migrated"

_COLLECTION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS documents ("
    " collection TEXT NOT NULL, key TEXT NOT NULL, document TEXT NOT NULL,"
    " PRIMARY KEY (collection, key))"
)
_UPSERT = (
    "INSERT INTO documents (collection, key, document) VALUES (?, ?, ?) "
    "ON CONFLICT (collection, key) DO UPDATE SET document = excluded.document"
)
_DELETED = object()


class Stopped(RuntimeError):
    """A write came after ``stop_writes``: its server has stopped and given up the state."""


class StoreError(ValueError):
    """The state directory's store cannot be opened as it is (the message says how to fix it)."""


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Writes JSON to ``path`` atomically (temporary file in the same directory, then rename).

    Args:
        path: Destination file.
        data: JSON-serialisable value.
    """
    target = pathlib.Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=False)
            handle.write("\n")
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def read_json(path: str | os.PathLike[str], default: Any = None) -> Any:
    """Reads a JSON file, or returns ``default`` when it does not exist.

    Raises:
        ValueError: The file exists but is not valid JSON.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return default
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc


def database_path(state_dir: str | os.PathLike[str]) -> pathlib.Path:
    """Where the store database of a state directory lives."""
    return pathlib.Path(state_dir) / STORE_DIRNAME / DATABASE_FILENAME


class StateStore:
    """Thread-safe collections of JSON documents persisted in ``{state_dir}/store``.

    Every getter returns a deep copy, and every setter stores one: callers never share
    mutable state with the store. Keys keep their insertion order (a replaced document keeps
    its place; a deleted and re-added one goes last).
    """

    def __init__(self, state_dir: str | os.PathLike[str]):
        """Opens (creating if needed) the store of a state directory.

        Args:
            state_dir: The emulator's state directory.

        Raises:
            StoreError: Legacy JSON collection files sit beside a non-empty database, or one
                of them is not a JSON object.
        """
        self._dir = pathlib.Path(state_dir) / STORE_DIRNAME
        self._dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(
            self._dir / DATABASE_FILENAME, check_same_thread=False, isolation_level=None
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self._data: dict[str, dict[str, Any]] = {}
        self._pending: dict[tuple[str, str], Any] = {}
        self._moved: set[tuple[str, str]] = set()  # deleted, then stored again: goes last
        self._depth = 0
        self._stopped = False
        self._migrate_json_files()

    @property
    def lock(self) -> threading.RLock:
        """The store's re-entrant lock (held for the whole of a ``transaction``)."""
        return self._lock

    def stop_writes(self) -> None:
        """Refuses every transaction from now on, once the one in progress has committed.

        A stopped server calls it before it gives up the state directory: a request its
        threads were still serving must not commit after another server has opened the same
        state (the other server would see half of it, e.g. a cluster whose provisioning
        operation it had already read as absent).
        """
        with self._lock:
            self._stopped = True

    def allow_writes(self) -> None:
        """Accepts transactions again (the server has started again)."""
        with self._lock:
            self._stopped = False

    def close(self) -> None:
        """Closes the database (the store must not be used afterwards)."""
        with self._lock:
            self._db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[StateStore]:
        """Holds the lock; commits on normal exit, rolls back touched collections on error."""
        with self._lock:
            if self._stopped and self._depth == 0:
                raise Stopped("the emulator has stopped: its state is no longer written")
            self._depth += 1
            completed = False
            try:
                yield self
                completed = True
            finally:
                self._depth -= 1
                if self._depth == 0:
                    if completed:
                        self._flush()
                    else:
                        self._rollback()

    def get(self, collection: str, key: str) -> Any:
        """The document stored under ``key``, or None."""
        with self._lock:
            return copy.deepcopy(self._collection(collection).get(key))

    def put(self, collection: str, key: str, document: Any) -> None:
        """Stores (inserts or replaces) a document."""
        with self.transaction():
            stored = copy.deepcopy(document)
            self._collection(collection)[key] = stored
            if self._pending.get((collection, key)) is _DELETED:
                self._moved.add((collection, key))
            self._pending[(collection, key)] = stored

    def delete(self, collection: str, key: str) -> bool:
        """Removes a document; returns whether it existed."""
        with self.transaction():
            existed = self._collection(collection).pop(key, None) is not None
            if existed:
                self._pending[(collection, key)] = _DELETED
            return existed

    def items(self, collection: str) -> list[tuple[str, Any]]:
        """All (key, document) pairs, in insertion order."""
        with self._lock:
            return [(k, copy.deepcopy(v)) for k, v in self._collection(collection).items()]

    def select(self, collection: str, predicate: Callable[[Any], bool]) -> list[tuple[str, Any]]:
        """Copies of the (key, document) pairs whose document satisfies ``predicate``.

        The predicate sees the stored document itself (no copy) and must not modify it.
        """
        with self._lock:
            return [
                (k, copy.deepcopy(v))
                for k, v in self._collection(collection).items()
                if predicate(v)
            ]

    def keys(self, collection: str, prefix: str = "") -> list[str]:
        """The keys (those starting with ``prefix`` when given), in insertion order."""
        with self._lock:
            names = self._collection(collection)
            return [k for k in names if k.startswith(prefix)] if prefix else list(names)

    def contains(self, collection: str, key: str) -> bool:
        """Whether a document is stored under ``key``."""
        with self._lock:
            return key in self._collection(collection)

    def count(self, collection: str) -> int:
        """How many documents a collection holds."""
        with self._lock:
            return len(self._collection(collection))

    def _collection(self, name: str) -> dict[str, Any]:
        if name not in self._data:
            if not _COLLECTION_NAME.match(name):
                raise ValueError(f"invalid collection name {name!r}")
            rows = self._db.execute(
                "SELECT key, document FROM documents WHERE collection = ? ORDER BY rowid", (name,)
            )
            self._data[name] = {key: json.loads(text) for key, text in rows}
        return self._data[name]

    def _flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        moved, self._moved = self._moved, set()
        try:
            self._db.execute("BEGIN")
            for (collection, key), document in pending.items():
                if document is _DELETED or (collection, key) in moved:
                    self._db.execute(
                        "DELETE FROM documents WHERE collection = ? AND key = ?", (collection, key)
                    )
                if document is not _DELETED:
                    self._db.execute(_UPSERT, (collection, key, json.dumps(document)))
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            for collection, _ in pending:
                self._data.pop(collection, None)
            raise

    def _rollback(self) -> None:
        for collection, _ in self._pending:
            self._data.pop(collection, None)
        self._pending.clear()
        self._moved.clear()

    def _migrate_json_files(self) -> None:
        legacy = sorted(self._dir.glob("*.json"))
        if not legacy:
            return
        (stored,) = self._db.execute("SELECT COUNT(*) FROM documents").fetchone()
        if stored:
            listed = ", ".join(str(path) for path in legacy)
            raise StoreError(
                f"{self._dir} holds both the store database {DATABASE_FILENAME} and older "
                f"per-collection files ({listed}). Fix: remove those files if the database is "
                f"current, or remove {DATABASE_FILENAME} to migrate them again."
            )
        collections = {}
        for path in legacy:
            if not _COLLECTION_NAME.match(path.stem):
                continue
            loaded = read_json(path, default={})
            if not isinstance(loaded, dict):
                raise StoreError(
                    f"{path} must hold a JSON object (key -> document). Fix: remove it or "
                    "restore it from a copy."
                )
            collections[path] = loaded
        with self.transaction():
            for path, loaded in collections.items():
                for key, document in loaded.items():
                    self.put(path.stem, key, document)
        for path in collections:
            os.replace(path, path.with_name(path.name + MIGRATED_SUFFIX))
