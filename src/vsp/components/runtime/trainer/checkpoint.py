"""Crash-safe training checkpoints: atomic save, verified load, keep-last-N retention.

Stdlib + numpy only (no kfp, no cloud SDK), so trainer code can import it anywhere. The readers
that the pipeline steps need without numpy (listing, verifying) live in ``manifests``.

Layout: one **directory** per checkpoint under a checkpoint root::

    <root>/ckpt-0000000120/arrays.npz     named numpy arrays (params, optimizer moments, ...)
    <root>/ckpt-0000000120/metadata.json  JSON-able dict (RNG state, data position, ...)
    <root>/ckpt-0000000120/manifest.json  step, created time, format, size + sha256 per file
    <root>/history.jsonl                  a line per save and per resume (``history``), kept

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

import contextvars
import dataclasses
import json
import logging
import os
import secrets
import shutil
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vsp.components.runtime.core import errors, file_primitives, gcs_paths
from vsp.components.runtime.trainer import (
    history,
    history_writer,
    manifests,
    model_files,
    progress,
)

log = logging.getLogger(__name__)

# When the state a background persist writes was snapshotted (``time.time()`` seconds), set by
# ``async_save.AsyncCheckpointer`` in its persist thread around the persist call. ``save`` takes
# its recorded start from it, so a persist that starts late (a queue, a wrapper that waits) does
# not count the time between the snapshot and the call as training kept by this checkpoint.
SNAPSHOT_TAKEN_AT: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "vsp_checkpoint_snapshot_taken_at", default=None
)


# The numpy-free readers live in ``manifests`` (the pipeline steps use them); they are named here
# too so trainer code needs one import.


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: the arrays and metadata exactly as saved."""

    path: Path
    step: int
    arrays: dict[str, np.ndarray]
    metadata: dict[str, Any]


def remove_tree(path: Path) -> None:
    """Deletes a checkpoint (manifest first, so a half-deleted one reads as torn) or a file."""
    if not path.is_dir():
        path.unlink(missing_ok=True)
        return
    (path / manifests.MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        log.warning("could not fully delete %s", path)


# ----- public API -----


def save(
    directory: file_primitives.PathLike,
    step: int,
    arrays: Mapping[str, Any],
    metadata: Mapping[str, Any],
    *,
    keep: int | None = None,
    reason: str = "periodic",
    blocked_before: float = 0.0,
    in_background: bool = False,
) -> manifests.CheckpointRef:
    """Saves a checkpoint atomically (see the module docstring for the protocol).

    Args:
        directory: The checkpoint root (created if missing); ``gs://`` URIs map to ``/gcs``.
        step: The number of finished training steps the state corresponds to (>= 0).
        arrays: Named numpy arrays (params, optimizer state, data permutation, ...).
        metadata: JSON-able dict (RNG state, data position, counters, config, ...).
        keep: When set, ``prune(directory, keep)`` runs after the save; temp leftovers from
            crashed saves are removed either way.
        reason: Why the save is taken: ``periodic``, ``notice`` (a preemption notice) or
            ``final``; recorded with its start time and the seconds it blocked in the
            history. After a ``final`` save the progress file says ``finishing``.
        blocked_before: Seconds the caller already held training for this save before
            calling (serialising, snapshotting); the recorded start moves back by as much,
            and the recorded blocking time includes it. Work done inside ``progress.saving()``
            before the call counts without it: the larger of the two is taken.
        in_background: The call runs beside training (an asynchronous save's persist): the
            history records only ``blocked_before`` as time training was held, and the save's
            start counts back from when the state was snapshotted (``SNAPSHOT_TAKEN_AT``, set
            by ``async_save``), not from this call.

    Returns:
        The reference of the new checkpoint. An existing checkpoint of the same step is replaced.

    Raises:
        errors.UserError: This process is not rank 0 of its job (``process_rank``): two ranks
            writing one root replace each other's checkpoints, and one rank's state is lost.
    """
    rank = process_rank()
    if rank != 0:
        raise errors.UserError(
            f"checkpoint.save called on rank {rank}: every rank writing the same checkpoint "
            "root replaces the others' checkpoints, so all but one rank's state is lost. Fix: "
            "save on rank 0 only (`if checkpoint.process_rank() == 0:`) with the state every "
            "rank needs, or write each rank's part with vsp.components.runtime.trainer."
            "collective (prepare on rank 0, every rank writes, commit on rank 0)."
        )
    if in_background:
        saved = _save(directory, step, arrays, metadata, keep, reason, blocked_before, True)
    else:
        with progress.saving():  # a blocking save is not a stalled step (``progress``)
            held = max(blocked_before, progress.seconds_in_save())
            saved = _save(directory, step, arrays, metadata, keep, reason, held, False)
    if reason == "final":  # what follows (the model, the exit) is no training step
        progress.finishing()
    return saved


def _save(
    directory: file_primitives.PathLike,
    step: int,
    arrays: Mapping[str, Any],
    metadata: Mapping[str, Any],
    keep: int | None,
    reason: str,
    blocked_before: float,
    in_background: bool,
) -> manifests.CheckpointRef:
    snapshot_at = SNAPSHOT_TAKEN_AT.get() if in_background else None
    started = (time.time() if snapshot_at is None else snapshot_at) - blocked_before
    clock = time.monotonic() - blocked_before
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise errors.UserError(f"step must be a non-negative int, got {step!r}")
    if reason not in history.SAVE_REASONS:
        raise errors.UserError(
            f"reason must be one of {', '.join(history.SAVE_REASONS)}, got {reason!r}"
        )
    checked = model_files.check_arrays(arrays)
    meta_bytes = model_files.encode_json(dict(metadata))
    root = gcs_paths.to_local_path(directory)
    root.mkdir(parents=True, exist_ok=True)
    final = root / manifests.checkpoint_name(step)
    tag = f"{os.getpid()}-{secrets.token_hex(4)}"
    staging = root / f"{file_primitives.TMP_PREFIX}{final.name}-{tag}"
    staging.mkdir()
    try:
        file_primitives.write_synced(
            staging / manifests.CHECKPOINT_ARRAYS_FILE, lambda f: model_files.write_npz(f, checked)
        )
        file_primitives.write_synced(staging / manifests.CHECKPOINT_METADATA_FILE, meta_bytes)
        file_primitives.fsync_dir(staging)
        files = file_primitives.describe_files(
            staging, [manifests.CHECKPOINT_ARRAYS_FILE, manifests.CHECKPOINT_METADATA_FILE]
        )
        if final.exists():
            log.warning("replacing existing checkpoint %s", final)
            remove_tree(final)
        _move_dir(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    file_primitives.fsync_dir(root)
    created, created_iso = file_primitives.utc_now()
    manifest = {
        "format": manifests.CHECKPOINT_FORMAT,
        "format_version": manifests.CHECKPOINT_FORMAT_VERSION,
        "step": step,
        "created_unix": created,
        "created": created_iso,
        "files": files,
    }
    # The history line goes first: a process killed between it and the manifest leaves a line
    # for a save nobody resumes from, which goodput ignores (it follows the step the next
    # process resumed from); the other order could lose the line of a save that is resumed.
    history_writer.record_save(
        root, step, started, _held(clock, blocked_before, in_background), reason
    )
    file_primitives.write_file_atomic(final / manifests.MANIFEST, model_files.encode_json(manifest))
    ref = manifests.CheckpointRef(path=final, step=step, manifest=manifest)
    if keep is not None:
        prune(root, keep, protect=ref)
    else:
        clean_temp_files(root)
    history_writer.record_saved(root, step, started, _held(clock, blocked_before, in_background))
    return ref


def _held(clock: float, blocked_before: float, in_background: bool) -> float:
    """Seconds the save has held training so far (see ``save``'s ``in_background``)."""
    return blocked_before if in_background else time.monotonic() - clock


def _move_dir(source: Path, target: Path) -> None:
    try:
        os.rename(source, target)
    except OSError as exc:  # GCS FUSE may refuse directory renames: move file by file
        log.info("renaming %s failed (%s); moving its files one by one", source, exc)
        target.mkdir(exist_ok=True)
        for child in source.iterdir():
            os.replace(child, target / child.name)
        source.rmdir()


def load(checkpoint: manifests.CheckpointRef | file_primitives.PathLike) -> Checkpoint:
    """Verifies and loads one checkpoint (arrays with ``allow_pickle=False``, JSON metadata)."""
    path = checkpoint.path if isinstance(checkpoint, manifests.CheckpointRef) else checkpoint
    ref = manifests.verify_checkpoint(path)
    try:
        arrays = model_files.read_npz(ref.path / manifests.CHECKPOINT_ARRAYS_FILE)
        metadata = json.loads((ref.path / manifests.CHECKPOINT_METADATA_FILE).read_bytes())
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise manifests.CorruptCheckpointError(f"{ref.path}: cannot decode payload: {exc}") from exc
    return Checkpoint(path=ref.path, step=ref.step, arrays=arrays, metadata=metadata)


def load_latest(directory: file_primitives.PathLike) -> Checkpoint | None:
    """Loads the newest checkpoint that verifies and decodes (skipping bad ones), or None."""
    for _, path in reversed(manifests.list_checkpoints(directory)):
        try:
            return load(path)
        except manifests.CorruptCheckpointError as exc:
            log.warning("skipping checkpoint: %s", exc)
    return None


def resume(directory: file_primitives.PathLike) -> Checkpoint | None:
    """``load_latest``, recorded in the history: a ``resume`` line (or ``start`` when there is
    no checkpoint yet) with the time loading began and the seconds it took. Call it once when a
    trainer process starts; the pipeline step's goodput figures need these lines. Every rank of
    a job may call it: only rank 0 (``RANK``, else ``SLURM_PROCID``) writes the line, as a
    job's start is one start however many processes it has."""
    started, clock = time.time(), time.monotonic()
    loaded = load_latest(directory)
    step = None if loaded is None else loaded.step
    if process_rank() == 0:
        history_writer.record_resume(directory, step, started, time.monotonic() - clock)
    return loaded


def process_rank() -> int:
    """This process's global rank: ``RANK`` (torchrun, the srun launcher), else
    ``SLURM_PROCID``, else 0 (one process)."""
    for name in ("RANK", "SLURM_PROCID"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def clean_temp_files(directory: file_primitives.PathLike) -> list[Path]:
    """Deletes ``.tmp-*`` leftovers of crashed saves in the root and in checkpoint dirs."""
    root = gcs_paths.to_local_path(directory)
    if not root.is_dir():
        return []
    candidates = [e for e in root.iterdir() if e.name.startswith(file_primitives.TMP_PREFIX)]
    folders = [path for _, path in manifests.list_checkpoints(root)]
    for folder in folders:
        candidates += [e for e in folder.iterdir() if e.name.startswith(file_primitives.TMP_PREFIX)]
    for entry in candidates:
        log.info("removing leftover temp file %s", entry)
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    return candidates


def prune(
    directory: file_primitives.PathLike,
    keep: int,
    *,
    protect: manifests.CheckpointRef | None = None,
) -> list[Path]:
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
    entries = manifests.list_checkpoints(directory)
    kept = {path for _, path in entries[-keep:]}
    for _, path in reversed(entries):
        if protect is not None and path == protect.path:
            kept.add(path)
            break
        try:
            manifests.verify_checkpoint(path)
        except manifests.CorruptCheckpointError as exc:
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
