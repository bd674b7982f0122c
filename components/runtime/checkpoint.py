"""Crash-safe training checkpoints: atomic save, verified load, keep-last-N retention.

Stdlib + numpy only (no kfp, no cloud SDK), so trainer code can import it anywhere.

Layout: one **directory** per checkpoint under a checkpoint root::

    <root>/ckpt-0000000120/arrays.npz     named numpy arrays (params, optimizer moments, ...)
    <root>/ckpt-0000000120/metadata.json  JSON-able dict (RNG state, data position, ...)
    <root>/ckpt-0000000120/manifest.json  step, created time, format, size + sha256 per file

Save protocol: the payload files are written into a staging directory ``<root>/.tmp-...`` in the
same root, each flushed and fsynced; the staging directory is renamed to ``ckpt-{step:010d}`` and
the root fsynced; then ``manifest.json`` is written atomically (temp file, fsync, rename) and
**last**. A checkpoint without a manifest that parses and matches its files is *torn* and is
skipped by ``latest_valid``/``load_latest`` (with a logged reason), so a crash at any moment
leaves either the previous checkpoint or a complete new one as the newest valid.

Why ``.npz`` + JSON rather than pickle: loading never executes code (checkpoint buckets are shared
and writable by many principals; arrays are read with ``allow_pickle=False``), the ``.npy``
format is documented and stable across numpy versions, arrays round-trip bit-exactly, and the
JSON metadata is human-readable and round-trips Python floats and big ints (RNG states) exactly.

Filesystems: works on local disks, shared filesystems (NFS, Filestore, Lustre) and GCS FUSE
(``/gcs/...``; ``gs://bucket/x`` is mapped to ``/gcs/bucket/x`` by ``to_local_path``). GCS FUSE
does not rename directories atomically (or refuses to, depending on mount options) and may fail
``fsync`` on a directory: directory fsync errors are tolerated, a refused directory rename falls
back to moving the files one by one, and correctness rests on the manifest-last rule plus the
size/sha256 check, never on the directory rename.

Assumes a single writer per checkpoint root (e.g. rank 0): temp leftovers found by
``clean_temp_files``/``prune`` are taken to be from crashed saves and deleted.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import secrets
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from components.runtime import errors, model_dir

log = logging.getLogger(__name__)

FORMAT = "vsp-checkpoint"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ARRAYS_FILE = "arrays.npz"
METADATA_FILE = "metadata.json"
GCS_FUSE_ROOT_ENV = "VSP_GCS_FUSE_ROOT"
_NAME_RE = re.compile(r"^ckpt-(\d{10,})$")

PathLike = str | os.PathLike


class CorruptCheckpointError(errors.UserError):
    """A checkpoint is torn (no valid manifest) or its files do not match the manifest."""


@dataclasses.dataclass(frozen=True)
class CheckpointRef:
    """A checkpoint found on disk whose manifest verified. ``manifest`` is the parsed JSON."""

    path: Path
    step: int
    manifest: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: the arrays and metadata exactly as saved."""

    path: Path
    step: int
    arrays: dict[str, np.ndarray]
    metadata: dict[str, Any]


def to_local_path(path: PathLike, *, gcs_root: str | None = None) -> Path:
    """Maps ``gs://bucket/x`` to the GCS FUSE mount (``/gcs/bucket/x``); other paths unchanged.

    Args:
        path: A local path, a ``/gcs/...`` path or a ``gs://`` URI.
        gcs_root: Mount point of GCS FUSE; default ``$VSP_GCS_FUSE_ROOT`` or ``/gcs``.
    """
    text = os.fspath(path)
    if text.startswith("gs://"):
        rest = text[len("gs://") :].strip("/")
        if not rest:
            raise errors.UserError(f"{text!r} names no bucket. Fix: use gs://BUCKET/PATH.")
        root = gcs_root or os.environ.get(GCS_FUSE_ROOT_ENV) or "/gcs"
        return Path(root, rest)
    return Path(text).expanduser()


def checkpoint_name(step: int) -> str:
    """The directory name of the checkpoint of ``step``: ``ckpt-{step:010d}``."""
    return f"ckpt-{step:010d}"


def remove_tree(path: Path) -> None:
    """Deletes a checkpoint (manifest first, so a half-deleted one reads as torn) or a file."""
    if not path.is_dir():
        path.unlink(missing_ok=True)
        return
    (path / MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        log.warning("could not fully delete %s", path)


# ----- public API -----


def save(
    directory: PathLike,
    step: int,
    arrays: Mapping[str, Any],
    metadata: Mapping[str, Any],
    *,
    keep: int | None = None,
) -> CheckpointRef:
    """Saves a checkpoint atomically (see the module docstring for the protocol).

    Args:
        directory: The checkpoint root (created if missing); ``gs://`` URIs map to ``/gcs``.
        step: The number of finished training steps the state corresponds to (>= 0).
        arrays: Named numpy arrays (params, optimizer state, data permutation, ...).
        metadata: JSON-able dict (RNG state, data position, counters, config, ...).
        keep: When set, ``prune(directory, keep)`` runs after the save; temp leftovers from
            crashed saves are removed either way.

    Returns:
        The reference of the new checkpoint. An existing checkpoint of the same step is replaced.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise errors.UserError(f"step must be a non-negative int, got {step!r}")
    checked = model_dir.check_arrays(arrays)
    meta_bytes = model_dir.encode_json(dict(metadata))
    root = to_local_path(directory)
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(step)
    staging = root / f"{model_dir.TMP_PREFIX}{final.name}-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        model_dir.write_synced(staging / ARRAYS_FILE, lambda f: model_dir.write_npz(f, checked))
        model_dir.write_synced(staging / METADATA_FILE, meta_bytes)
        model_dir.fsync_dir(staging)
        files = model_dir.describe_files(staging, [ARRAYS_FILE, METADATA_FILE])
        if final.exists():
            log.warning("replacing existing checkpoint %s", final)
            remove_tree(final)
        _move_dir(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    model_dir.fsync_dir(root)
    created, created_iso = model_dir.utc_now()
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "step": step,
        "created_unix": created,
        "created": created_iso,
        "files": files,
    }
    model_dir.write_file_atomic(final / MANIFEST, model_dir.encode_json(manifest))
    ref = CheckpointRef(path=final, step=step, manifest=manifest)
    if keep is not None:
        prune(root, keep, protect=ref)
    else:
        clean_temp_files(root)
    return ref


def _move_dir(source: Path, target: Path) -> None:
    try:
        os.rename(source, target)
    except OSError as exc:  # GCS FUSE may refuse directory renames: move file by file
        log.info("renaming %s failed (%s); moving its files one by one", source, exc)
        target.mkdir(exist_ok=True)
        for child in source.iterdir():
            os.replace(child, target / child.name)
        source.rmdir()


def list_checkpoints(directory: PathLike) -> list[tuple[int, Path]]:
    """(step, path) of every ``ckpt-*`` directory, valid or not, by ascending step."""
    root = to_local_path(directory)
    if not root.exists():
        return []
    if not root.is_dir():
        raise errors.UserError(f"checkpoint root {root} is not a directory")
    found = []
    for entry in root.iterdir():
        match = _NAME_RE.match(entry.name)
        if match and entry.is_dir():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def verify(path: PathLike) -> CheckpointRef:
    """Checks one checkpoint directory; raises ``CorruptCheckpointError`` saying why it is bad."""
    path = to_local_path(path)
    match = _NAME_RE.match(path.name)
    if not match:
        raise CorruptCheckpointError(f"{path}: not a ckpt-NNNNNNNNNN directory")
    step = int(match.group(1))
    try:
        raw = (path / MANIFEST).read_bytes()
    except FileNotFoundError:
        raise CorruptCheckpointError(f"{path}: no {MANIFEST} (torn save)") from None
    except OSError as exc:
        raise CorruptCheckpointError(f"{path}: cannot read {MANIFEST}: {exc}") from exc
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: {MANIFEST} is not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CorruptCheckpointError(f"{path}: {MANIFEST} is not a {FORMAT} manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        version = manifest.get("format_version")
        raise CorruptCheckpointError(f"{path}: unsupported format_version {version!r}")
    if manifest.get("step") != step:
        raise CorruptCheckpointError(f"{path}: manifest step {manifest.get('step')!r} != {step}")
    files = manifest.get("files")
    listed = files if isinstance(files, dict) else {}
    required = (ARRAYS_FILE, METADATA_FILE)
    problems = [f"manifest does not list {n!r}" for n in required if n not in listed]
    try:
        problems += model_dir.file_problems(path, files)
    except OSError as exc:
        problems.append(f"cannot read files: {exc}")
    if problems:
        raise CorruptCheckpointError(f"{path}: " + "; ".join(problems))
    return CheckpointRef(path=path, step=step, manifest=manifest)


def latest_valid(directory: PathLike) -> CheckpointRef | None:
    """The newest checkpoint that verifies, logging why each newer one was skipped; or None."""
    for _, path in reversed(list_checkpoints(directory)):
        try:
            return verify(path)
        except CorruptCheckpointError as exc:
            log.warning("skipping checkpoint: %s", exc)
    return None


def load(checkpoint: CheckpointRef | PathLike) -> Checkpoint:
    """Verifies and loads one checkpoint (arrays with ``allow_pickle=False``, JSON metadata)."""
    path = checkpoint.path if isinstance(checkpoint, CheckpointRef) else checkpoint
    ref = verify(path)
    try:
        arrays = model_dir.read_npz(ref.path / ARRAYS_FILE)
        metadata = json.loads((ref.path / METADATA_FILE).read_bytes())
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise CorruptCheckpointError(f"{ref.path}: cannot decode payload: {exc}") from exc
    return Checkpoint(path=ref.path, step=ref.step, arrays=arrays, metadata=metadata)


def load_latest(directory: PathLike) -> Checkpoint | None:
    """Loads the newest checkpoint that verifies and decodes (skipping bad ones), or None."""
    for _, path in reversed(list_checkpoints(directory)):
        try:
            return load(path)
        except CorruptCheckpointError as exc:
            log.warning("skipping checkpoint: %s", exc)
    return None


def clean_temp_files(directory: PathLike) -> list[Path]:
    """Deletes ``.tmp-*`` leftovers of crashed saves in the root and in checkpoint dirs."""
    root = to_local_path(directory)
    if not root.is_dir():
        return []
    candidates = [e for e in root.iterdir() if e.name.startswith(model_dir.TMP_PREFIX)]
    for _, path in list_checkpoints(root):
        candidates += [e for e in path.iterdir() if e.name.startswith(model_dir.TMP_PREFIX)]
    for entry in candidates:
        log.info("removing leftover temp file %s", entry)
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    return candidates


def prune(directory: PathLike, keep: int, *, protect: CheckpointRef | None = None) -> list[Path]:
    """Keeps the ``keep`` newest checkpoints plus the newest valid one; deletes the rest.

    Also deletes temp leftovers. The newest valid checkpoint is never deleted, even when the
    ``keep`` newest are all torn.

    Args:
        directory: The checkpoint root.
        keep: How many of the newest checkpoints (by step) to keep, at least 1.
        protect: A checkpoint known to be valid (just saved), to skip re-hashing it.

    Returns:
        The paths removed.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise errors.UserError(f"keep must be an int >= 1, got {keep!r}")
    removed = clean_temp_files(directory)
    entries = list_checkpoints(directory)
    kept = {path for _, path in entries[-keep:]}
    for _, path in reversed(entries):
        if protect is not None and path == protect.path:
            kept.add(path)
            break
        try:
            verify(path)
        except CorruptCheckpointError as exc:
            log.info("not protecting %s", exc)
            continue
        kept.add(path)
        break
    for _, path in entries:
        if path not in kept:
            log.info("retention: deleting %s", path.name)
            remove_tree(path)
            removed.append(path)
    return removed
