"""Asynchronous checkpoint saves: a short in-memory snapshot, then the write in the background.

``AsyncCheckpointer.save`` blocks training only to copy the arrays and the metadata (the
snapshot); a background thread then writes the checkpoint with ``checkpoint.save``, whose
protocol writes the manifest last, so a process killed mid-persist leaves a torn directory that
``load_latest`` skips: the previous checkpoint stays the newest valid one. At most one persist is
in flight: the next ``save`` waits for it first, and ``wait`` (call it on a preemption notice and
before exit) waits for it and re-raises, in the caller's thread, any exception the persist
raised.

Why a hand-written thread rather than ``concurrent.futures`` or orbax: one worker with
wait-before-next is a dozen lines on ``threading``; a ``Future`` would hide the ordering this
module guarantees, and orbax's async checkpointer needs JAX and writes another format.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from vsp.components.runtime.core import file_primitives
from vsp.components.runtime.trainer import checkpoint, manifests, model_files, progress

log = logging.getLogger(__name__)

PersistFn = Callable[..., manifests.CheckpointRef]
"""Writes one checkpoint: ``(directory, step, arrays, metadata, keep=...) -> CheckpointRef``."""


@dataclasses.dataclass(frozen=True)
class SaveTiming:
    """How long one save took, in seconds.

    Attributes:
        step: The step saved.
        block_s: Training time blocked: the caller's own work for this save inside
            ``progress.saving()`` before the call (serialising), waiting for the previous
            persist, and the snapshot.
        wait_s: Part of ``block_s`` spent waiting for the previous persist.
        total_s: From the start of the snapshot to the manifest written (None while in flight).
    """

    step: int
    block_s: float
    wait_s: float
    total_s: float | None = None


class AsyncCheckpointer:
    """Saves checkpoints with the persist in a background thread, one at a time.

    Args:
        directory: The checkpoint root (as for ``checkpoint.save``).
        keep: Keep-last-N retention applied after each persist (None: no pruning).
        persist: The function that writes a checkpoint (default ``checkpoint.save``, called with
            its ``keep``, ``reason``, ``blocked_before`` and ``in_background`` keywords); tests
            and the example trainer wrap it (e.g. to simulate a slow store).
        on_persisted: Called in the background thread with the ``SaveTiming`` (with
            ``total_s``) after each successful persist.
        clock: Monotonic seconds.
    """

    def __init__(
        self,
        directory: file_primitives.PathLike,
        *,
        keep: int | None = None,
        persist: PersistFn = checkpoint.save,
        on_persisted: Callable[[SaveTiming], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.directory = directory
        self.keep = keep
        self._persist = persist
        self._on_persisted = on_persisted
        self._clock = clock
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.last_ref: manifests.CheckpointRef | None = None
        self.last_timing: SaveTiming | None = None

    @property
    def in_flight(self) -> bool:
        """True while a persist runs in the background."""
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout_s: float | None = None) -> manifests.CheckpointRef | None:
        """Waits for the persist in flight; re-raises its exception; returns the last ref.

        Args:
            timeout_s: Give up waiting after this many seconds (None: wait until done).

        Raises:
            TimeoutError: The persist is still running after ``timeout_s``.
            Exception: Whatever the background persist raised (raised once, then cleared).
        """
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                raise TimeoutError(f"checkpoint persist still running after {timeout_s} s")
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error
        return self.last_ref

    def save(
        self,
        step: int,
        arrays: Mapping[str, Any],
        metadata: Mapping[str, Any],
        reason: str = "periodic",
    ) -> SaveTiming:
        """Waits for the previous persist, snapshots, and starts persisting in the background.

        The checkpoint history records ``reason`` and the snapshot's time as what the save held
        training for (the persist runs beside training: ``checkpoint.save``'s
        ``in_background``).

        Returns when the snapshot is taken: the caller may change ``arrays`` and ``metadata``
        right away. An exception of the previous persist is raised here, before any snapshot.

        Returns:
            The timing of the blocking part (``total_s`` is None until the persist finishes).
        """
        started = self._clock()
        held_before = progress.seconds_in_save()  # the caller's own save work (serialising)
        self.wait()
        waited = self._clock() - started
        # the snapshot: copies the caller can no longer change; checks what save would refuse
        snapshot = {
            name: np.array(value, copy=True)
            for name, value in model_files.check_arrays(arrays).items()
        }
        meta = json.loads(model_files.encode_json(dict(metadata)))
        timing = SaveTiming(step=step, block_s=held_before + self._clock() - started, wait_s=waited)
        taken_at = time.time()  # wall time, as the checkpoint history records it
        self._thread = threading.Thread(
            target=self._run,
            args=(step, snapshot, meta, started, timing, reason, taken_at),
            name=f"checkpoint-persist-{step}",
            daemon=True,
        )
        self._thread.start()
        return timing

    def _run(
        self,
        step: int,
        arrays: dict,
        metadata: dict,
        started: float,
        timing: SaveTiming,
        reason: str,
        taken_at: float,
    ) -> None:
        snapshot = checkpoint.SNAPSHOT_TAKEN_AT.set(taken_at)
        try:
            ref = self._persist(
                self.directory,
                step,
                arrays,
                metadata,
                keep=self.keep,
                reason=reason,
                blocked_before=timing.block_s,
                in_background=True,
            )
            done = dataclasses.replace(timing, total_s=self._clock() - started)
            self.last_ref, self.last_timing = ref, done
            if self._on_persisted is not None:
                self._on_persisted(done)
        except BaseException as exc:  # surfaced by the next wait() or save()
            log.error("checkpoint persist of step %d failed: %s", step, exc)
            self._error = exc
        finally:
            checkpoint.SNAPSHOT_TAKEN_AT.reset(snapshot)

    def close(self) -> manifests.CheckpointRef | None:
        """Waits for the persist in flight (re-raising its error); same as ``wait()``."""
        return self.wait()

    def __enter__(self) -> AsyncCheckpointer:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.wait()
            return
        try:  # already failing: finish the persist, but do not mask the original error
            self.wait()
        except Exception as exc:
            log.error("checkpoint persist failed too: %s", exc)
