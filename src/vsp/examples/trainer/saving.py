"""How the example trainer saves: blocking, or a snapshot persisted in the background.

``--save-mode blocking`` writes the checkpoint in the training thread. ``--save-mode async``
(default) uses ``trainer.async_save.AsyncCheckpointer``: training is blocked only for the
in-memory snapshot, the write runs in a background thread, and the manifest is written last.

``--save-block-seconds`` and ``--save-persist-seconds`` simulate a large checkpoint: the first is
spent in the training thread before the snapshot (serialising a big model), the second before
the write (uploading it: in the background when async, in the training thread when blocking).
The policy is told both costs: the blocking part and the time until the manifest was written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from vsp.components.runtime.trainer import async_save, checkpoint, manifests
from vsp.components.runtime.trainer import policy as checkpoint_policy
from vsp.examples.trainer import state as train_state

log = logging.getLogger("vsp.examples.trainer")


class Saver:
    """Saves checkpoints of one attempt and reports their costs to the policy.

    Args:
        cfg: The run configuration (checkpoint dir, keep, save mode, simulated costs).
        policy: The checkpoint policy told each save's costs.
    """

    def __init__(
        self, cfg: train_state.TrainConfig, policy: checkpoint_policy.CheckpointPolicy
    ) -> None:
        self.cfg, self.policy = cfg, policy
        self.is_async = cfg.save_mode == "async"
        self._finished: list[float] = []  # totals of finished persists, applied in this thread
        self._blocked_before: dict[int, float] = {}
        self._async = async_save.AsyncCheckpointer(
            cfg.checkpoint_dir, keep=cfg.keep, persist=self._persist, on_persisted=self._persisted
        )

    def _persist(
        self,
        directory,
        step,
        arrays,
        metadata,
        keep=None,
        reason="periodic",
        blocked_before=0.0,
        in_background=False,
    ) -> manifests.CheckpointRef:
        # The simulated serialisation before the snapshot held training in both modes (an
        # asynchronous save's blocked_before already holds it: the caller's work inside
        # progress.saving()); the simulated upload held training only when the save blocks.
        persist_started = time.monotonic()
        if self.cfg.save_persist_seconds > 0:
            time.sleep(self.cfg.save_persist_seconds)
        held = blocked_before
        if not in_background:
            held += self._blocked_before.get(step, 0.0) + time.monotonic() - persist_started
        return checkpoint.save(
            directory,
            step,
            arrays,
            metadata,
            keep=keep,
            reason=reason,
            blocked_before=held,
            in_background=in_background,
        )

    def _persisted(self, timing: async_save.SaveTiming) -> None:  # background thread
        total = self._blocked_before.get(timing.step, 0.0) + (timing.total_s or 0.0)
        self._finished.append(total)
        log.info(
            "saved checkpoint at step %d: checkpoint persisted %.3f s after its save started",
            timing.step, total,
        )  # fmt: skip

    def _apply_finished(self) -> None:
        while self._finished:
            total = self._finished.pop(0)
            self.policy.record_persist(total)

    @property
    def in_flight(self) -> bool:
        """True while an asynchronous persist runs."""
        return self._async.in_flight

    def save(
        self,
        step: int,
        arrays: Mapping[str, Any],
        metadata: Mapping[str, Any],
        reason: str = "periodic",
        held_since: float | None = None,
    ) -> float:
        """Saves ``step`` (``reason`` as ``checkpoint.save`` takes it); returns the seconds
        training was blocked.

        Args:
            step: The step the state holds.
            arrays: The state's arrays.
            metadata: The state's metadata.
            reason: ``periodic``, ``notice`` or ``final``.
            held_since: ``time.monotonic()`` when the caller stopped training for this save
                (default: now); the time since (building the state) counts as blocked, in the
                history too.

        Raises:
            Exception: An error of the previous background persist, or of this blocking save.
        """
        started = time.monotonic() if held_since is None else held_since
        if self.cfg.save_block_seconds > 0:
            time.sleep(self.cfg.save_block_seconds)
        self._blocked_before[step] = time.monotonic() - started
        if self.is_async:
            self._async.save(step, arrays, metadata, reason=reason)
        else:
            self._persist(
                self.cfg.checkpoint_dir, step, arrays, metadata, keep=self.cfg.keep, reason=reason
            )
        blocked = time.monotonic() - started
        self.policy.record_save(step, blocked, persisted=not self.is_async)
        self._apply_finished()
        return blocked

    def wait(self) -> None:
        """Waits for the persist in flight (re-raising its error) and records its cost."""
        self._async.wait()
        self._apply_finished()
