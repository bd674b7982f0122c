"""Persistent emulator state: named collections of JSON documents in the state directory.

Each collection lives in ``{state_dir}/store/{collection}.json`` as one JSON object mapping a key
(usually a resource name) to a document, and is cached in memory. Writes are atomic (a temporary
file renamed over the old one; not fsynced). One re-entrant lock guards everything, so a
``transaction()`` block is a consistent read-modify-write; its writes reach the disk when the
outermost block exits, and an exception inside it rolls the touched collections back.

Only one process may own a state directory at a time (``EmulatorServer`` takes a lock file).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pathlib
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

STORE_DIRNAME = "store"

_COLLECTION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


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


class StateStore:
    """Thread-safe collections of JSON documents persisted under ``{state_dir}/store``.

    Every getter returns a deep copy, and every setter stores one: callers never share
    mutable state with the store.
    """

    def __init__(self, state_dir: str | os.PathLike[str]):
        """Opens (creating if needed) the store of a state directory.

        Args:
            state_dir: The emulator's state directory.
        """
        self._dir = pathlib.Path(state_dir) / STORE_DIRNAME
        self._dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._data: dict[str, dict[str, Any]] = {}
        self._dirty: set[str] = set()
        self._depth = 0

    @property
    def lock(self) -> threading.RLock:
        """The store's re-entrant lock (held for the whole of a ``transaction``)."""
        return self._lock

    @contextlib.contextmanager
    def transaction(self) -> Iterator[StateStore]:
        """Holds the lock; flushes on normal exit, rolls back touched collections on error."""
        with self._lock:
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
            self._collection(collection)[key] = copy.deepcopy(document)
            self._dirty.add(collection)

    def delete(self, collection: str, key: str) -> bool:
        """Removes a document; returns whether it existed."""
        with self.transaction():
            existed = self._collection(collection).pop(key, None) is not None
            if existed:
                self._dirty.add(collection)
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

    def keys(self, collection: str) -> list[str]:
        """All keys, in insertion order."""
        with self._lock:
            return list(self._collection(collection))

    def contains(self, collection: str, key: str) -> bool:
        """Whether a document is stored under ``key``."""
        with self._lock:
            return key in self._collection(collection)

    def _path(self, collection: str) -> pathlib.Path:
        return self._dir / f"{collection}.json"

    def _collection(self, name: str) -> dict[str, Any]:
        if name not in self._data:
            if not _COLLECTION_NAME.match(name):
                raise ValueError(f"invalid collection name {name!r}")
            loaded = read_json(self._path(name), default={})
            if not isinstance(loaded, dict):
                raise ValueError(f"{self._path(name)} must hold a JSON object")
            self._data[name] = loaded
        return self._data[name]

    def _flush(self) -> None:
        for name in sorted(self._dirty):
            write_json_atomic(self._path(name), self._data[name])
        self._dirty.clear()

    def _rollback(self) -> None:
        for name in self._dirty:
            self._data.pop(name, None)
        self._dirty.clear()
