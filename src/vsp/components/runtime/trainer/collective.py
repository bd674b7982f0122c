"""Checkpoints written by every rank through a framework (torch.distributed.checkpoint...).

The checkpoint library's own ``checkpoint.save`` writes one process's numpy arrays. A
multi-node trainer's state is written collectively instead: each rank writes its part with its
framework (DCP's ``dcp.save`` writes ``__RANK_0.distcp`` per rank and ``.metadata``), and the
checkpoint becomes valid only once **every** part is durable. This module wraps such a folder
in the same manifest and history protocol, so latest-valid selection, retention, registration
and the step's goodput figures work unchanged. No framework is imported here.

Layout, beside ``checkpoint.save``'s::

    <root>/ckpt-0000000120/state/...        the framework's files (every rank's part)
    <root>/ckpt-0000000120/manifest.json    "payload": "directory"; size + sha256 of each file
    <root>/history.jsonl                    the same save/saved/resume lines

Protocol (one writer of the manifest and history: rank 0)::

    if rank == 0:
        path = collective.prepare(root, step)      # an empty ckpt-N/state
    barrier()
    dcp.save(state, checkpoint_id=collective.state_dir(root, step))   # every rank, its part
    barrier()                                      # every part is written and synced
    if rank == 0:
        collective.commit(root, step, "notice", started=t0)           # manifest last
    barrier()

A crash before ``commit`` leaves a ``ckpt-N`` without a manifest: torn, skipped by
``latest_valid`` and removed by retention, as with ``checkpoint.save``. ``commit`` fsyncs every
file again before it writes the manifest, so "durable" does not rest on the framework alone.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from vsp.components.runtime.core import errors, file_primitives, gcs_paths
from vsp.components.runtime.trainer import (
    checkpoint,
    history,
    history_writer,
    manifests,
    model_files,
)

log = logging.getLogger(__name__)

DCP_WRITER = "torch.distributed.checkpoint"


def checkpoint_dir(directory: file_primitives.PathLike, step: int) -> Path:
    """``<root>/ckpt-{step:010d}``."""
    return gcs_paths.to_local_path(directory) / manifests.checkpoint_name(_step(step))


def state_dir(directory: file_primitives.PathLike, step: int) -> Path:
    """Where every rank writes its part of the checkpoint of ``step`` (``ckpt-N/state``)."""
    return checkpoint_dir(directory, step) / manifests.STATE_DIR


def committed(directory: file_primitives.PathLike, step: int) -> manifests.CheckpointRef | None:
    """The valid checkpoint of exactly ``step``, or None (none, or torn).

    A trainer that resumed from ``step`` and has trained no step since holds what that
    checkpoint holds: a notice or final save then has nothing to write (``prepare`` would
    delete the committed checkpoint before the ranks write it again, and a kill in between
    would lose it). Skip the save and record it with ``history_writer.record_unchanged``.
    """
    folder = checkpoint_dir(directory, step)
    if not (folder / manifests.MANIFEST).is_file():
        return None
    try:
        return manifests.verify_checkpoint(folder)
    except manifests.CorruptCheckpointError:
        return None


def prepare(directory: file_primitives.PathLike, step: int) -> Path:
    """Empties ``ckpt-N`` (a torn or earlier save of the same step) and makes ``ckpt-N/state``.

    Call on one rank (rank 0) before the ranks write, with a barrier after it. A committed
    checkpoint of the same step is deleted too (and logged): check ``committed`` first and
    skip a save whose step is already committed.

    Returns:
        The state folder to write into.
    """
    folder = checkpoint_dir(directory, step)
    if committed(directory, step) is not None:
        log.warning(
            "step %d is already committed in %s: deleting it to save it again; until the new "
            "save commits, no checkpoint of it exists (skip such saves: collective.committed)",
            step, folder,
        )  # fmt: skip
    if folder.exists():
        checkpoint.remove_tree(folder)
    target = folder / manifests.STATE_DIR
    target.mkdir(parents=True)
    file_primitives.fsync_dir(folder.parent)
    return target


def _step(step: int) -> int:
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise errors.UserError(f"step must be a non-negative int, got {step!r}")
    return step


def _files(state: Path) -> list[str]:
    names = []
    for folder, _, files in os.walk(state):
        for name in files:
            names.append(os.path.relpath(os.path.join(folder, name), state.parent))
    return sorted(n.replace(os.sep, "/") for n in names)


def _fsync(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def commit(
    directory: file_primitives.PathLike,
    step: int,
    reason: str = "periodic",
    *,
    started: float | None = None,
    writer: str = DCP_WRITER,
    keep: int | None = None,
) -> manifests.CheckpointRef:
    """Makes the parts in ``ckpt-N/state`` a valid checkpoint: manifest last, history lines.

    Call on one rank (rank 0) after a barrier that follows every rank's write.

    Args:
        directory: The checkpoint root (``gs://`` maps to ``/gcs``).
        step: The number of finished training steps the state holds.
        reason: ``periodic``, ``notice`` or ``final`` (as ``checkpoint.save``).
        started: Unix time the ranks began writing (default: now); the history records the
            save from then, and the seconds since as the time it held training.
        writer: The framework that wrote the parts, recorded in the manifest.
        keep: When set, retention keeps the ``keep`` newest checkpoints (``checkpoint.prune``).

    Returns:
        The committed checkpoint.

    Raises:
        errors.UserError: A bad step or reason, or ``ckpt-N/state`` holds no file (the ranks
            wrote elsewhere, or ``prepare`` ran after them).
    """
    _step(step)
    if reason not in history.SAVE_REASONS:
        raise errors.UserError(
            f"reason must be one of {', '.join(history.SAVE_REASONS)}, got {reason!r}"
        )
    folder = checkpoint_dir(directory, step)
    names = _files(folder / manifests.STATE_DIR) if folder.is_dir() else []
    if not names:
        raise errors.UserError(
            f"{folder / manifests.STATE_DIR} holds no file to commit. Fix: have every rank "
            "write into collective.state_dir(root, step), with a barrier before commit."
        )
    started = time.time() if started is None else float(started)
    for name in names:
        _fsync(folder / name)
    for sub, _, _ in os.walk(folder):
        file_primitives.fsync_dir(Path(sub))
    files = {}
    for name in names:
        size, sha = file_primitives.file_digest(folder / name)
        files[name] = {"size": size, "sha256": sha}
    created, created_iso = file_primitives.utc_now()
    manifest = {
        "format": manifests.CHECKPOINT_FORMAT,
        "format_version": manifests.CHECKPOINT_FORMAT_VERSION,
        "payload": manifests.PAYLOAD_DIRECTORY,
        "writer": writer,
        "step": step,
        "created_unix": created,
        "created": created_iso,
        "files": files,
    }
    root = folder.parent
    history_writer.record_save(root, step, started, time.time() - started, reason)
    file_primitives.write_file_atomic(
        folder / manifests.MANIFEST, model_files.encode_json(manifest)
    )
    ref = manifests.CheckpointRef(path=folder, step=step, manifest=manifest)
    if keep is not None:
        checkpoint.prune(root, keep, protect=ref)
    history_writer.record_saved(root, step, started, time.time() - started)
    return ref


def latest(directory: file_primitives.PathLike) -> manifests.CheckpointRef | None:
    """The newest valid checkpoint (either layout), or None; nothing is recorded."""
    return manifests.latest_valid_checkpoint(directory)


def record_resumed(
    directory: file_primitives.PathLike, step: int | None, started: float
) -> history.Record:
    """Records this attempt's start in the history once every rank has loaded ``step``
    (None: no checkpoint, a fresh start), with the seconds since ``started`` (the unix time
    the lookup began) as its reload time. Call it on rank 0, after a barrier that follows the
    load; the step's goodput figures count the time before it as startup and reload, not
    training."""
    return history_writer.record_resume(directory, step, started, time.time() - started)


def resume(directory: file_primitives.PathLike) -> manifests.CheckpointRef | None:
    """``latest`` and ``record_resumed`` at once, for a trainer that loads nothing more (the
    reload time is then the lookup alone)."""
    started = time.time()
    ref = latest(directory)
    record_resumed(directory, None if ref is None else ref.step, started)
    return ref
