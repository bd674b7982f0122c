"""Crash-safe file primitives and the Cloud Storage path mapping, with the standard library only.

Step code (which runs on a stock Python image with no numpy) and the trainer-side libraries
(``checkpoint``, ``model_dir``) share these: atomic writes, directory fsync tolerant of GCS FUSE,
sha256 digests and the check of files against a manifest's ``files`` mapping, and the mapping of
``gs://BUCKET/PATH`` to the GCS FUSE mount.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

TMP_PREFIX = ".tmp-"

PathLike = str | os.PathLike
Writer = Callable[[IO[bytes]], None]


def fsync_dir(path: PathLike) -> bool:
    """fsyncs a directory so renames in it are durable; False where unsupported (GCS FUSE)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.debug("directory fsync of %s failed (tolerated): %s", path, exc)
        return False
    return True


def write_synced(path: Path, data: bytes | Writer) -> None:
    """Writes ``data`` (bytes, or a function writing to the file) to ``path``; flush + fsync."""
    with open(path, "wb") as f:
        if callable(data):
            data(f)
        else:
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_file_atomic(path: Path, data: bytes | Writer) -> None:
    """Writes a temp file next to ``path``, fsyncs it, renames it over ``path``, fsyncs the dir."""
    tmp = path.parent / f"{TMP_PREFIX}{path.name}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        write_synced(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def file_digest(path: Path) -> tuple[int, str]:
    """The size in bytes and hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def describe_files(directory: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """The manifest ``files`` entry (size and sha256) of each named file in ``directory``."""
    described = {}
    for name in names:
        size, sha = file_digest(directory / name)
        described[name] = {"size": size, "sha256": sha}
    return described


def file_problems(directory: Path, files: Any) -> list[str]:
    """Checks files against a manifest ``files`` mapping; returns one message per mismatch."""
    if not isinstance(files, dict) or not files:
        return ["manifest has no 'files' mapping"]
    problems = []
    for name, entry in sorted(files.items()):
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int):
            problems.append(f"manifest entry for {name!r} is malformed")
            continue
        target = directory / name
        if "/" in name or name.startswith(".") or not target.is_file():
            problems.append(f"file {name!r} is missing")
            continue
        size, sha = file_digest(target)
        if size != entry["size"]:
            problems.append(f"file {name!r} has {size} bytes, manifest says {entry['size']}")
        elif sha != entry.get("sha256"):
            problems.append(f"file {name!r} sha256 {sha[:12]}... does not match the manifest")
    return problems


def utc_now() -> tuple[float, str]:
    """Current time as (unix seconds, ISO-8601 UTC string)."""
    now = time.time()
    return now, datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc).isoformat()
