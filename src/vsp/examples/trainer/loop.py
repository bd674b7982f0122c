"""The training loop: resume, train, checkpoint periodically and on notice, write the model.

The state and its checkpoint form are in ``state``; how a save is made (blocking, or a snapshot
persisted in the background) in ``saving``. The periodic interval and its explanation come from
the ``CheckpointPolicy``, which also learns how often a notice save fails from the checkpoint
history (the notice outcomes of earlier processes); the explanation is logged and written to
``metrics.json``, which the training step's report shows.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from vsp.components.runtime.trainer import (
    checkpoint,
    history,
    history_writer,
    manifests,
    model_files,
    progress,
)
from vsp.components.runtime.trainer import notice as trainer_notice
from vsp.components.runtime.trainer import policy as checkpoint_policy
from vsp.examples.trainer import model, saving
from vsp.examples.trainer import state as train_state
from vsp.examples.trainer.step_log import StepLog

# The state lives in ``state``; named here too, so callers need one import.

log = logging.getLogger("vsp.examples.trainer")


class Preempted(Exception):
    """The loop stopped at a step boundary because a preemption notice arrived."""

    def __init__(self, step: int, reason: str, saved: bool):
        self.step, self.reason, self.saved = step, reason, saved
        super().__init__(f"preempted ({reason}) after step {step}")


class Trainer:
    """Runs one attempt: resume if possible, train to ``cfg.steps``, checkpoint as told.

    Args:
        cfg: The run configuration.
        policy: When to save periodically.
        notice: The installed preemption notice, polled at every step boundary.
        slurm_restart_count: ``$SLURM_RESTART_COUNT`` if set, recorded in checkpoints.
    """

    def __init__(
        self,
        cfg: train_state.TrainConfig,
        policy: checkpoint_policy.CheckpointPolicy,
        notice: trainer_notice.PreemptionNotice,
        slurm_restart_count: int | None = None,
    ):
        self.cfg, self.policy, self.notice = cfg, policy, notice
        self.slurm_restart_count = slurm_restart_count
        self.x, self.y = model.make_dataset(cfg.seed, cfg.samples, cfg.features, cfg.classes)
        self.attempt_start = time.monotonic()
        self.prior_run_seconds = 0.0
        self.last_saved_step: int | None = None
        self._warned_slow = False
        self.saver = saving.Saver(cfg, policy)
        self.step_log = StepLog(None)  # the run's own while ``run`` trains
        self.state = self._restore()
        records = history.read(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
        if records:
            policy.observe_notices(*history.notice_outcomes(records))
        log.info("checkpoint policy: %s", policy.explain())

    def _restore(self) -> train_state.TrainState:
        cfg = self.cfg
        ckpt = checkpoint.resume(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
        if ckpt is None:
            if cfg.checkpoint_dir and self.slurm_restart_count:
                log.warning(
                    "restart %s but no valid checkpoint: from scratch", self.slurm_restart_count
                )
            log.info("starting from step 0 (seed %d)", cfg.seed)
            return train_state.fresh_state(cfg)
        state = train_state.from_checkpoint(ckpt, cfg)
        policy_state = ckpt.metadata.get("policy", {})
        self.policy.load_state_dict(policy_state)
        self.prior_run_seconds = self.policy.run_seconds
        self.policy.observe(state.resumes, self.prior_run_seconds)
        self.last_saved_step = state.step
        log.info(
            "resumed from %s at step %d (epoch %d, index %d, resume #%d)",
            ckpt.path.name, state.step, state.order.epoch, state.order.index, state.resumes,
        )  # fmt: skip
        return state

    def save(self, why: str) -> None:
        """Saves a checkpoint of the current state and records its costs in the policy."""
        state = self.state
        self.step_log.pause()  # a save's time is no step's
        # Training is held from here: the checkpoint history's save starts here too, as the
        # library counts the work inside progress.saving() before the save call.
        with progress.saving():
            started = time.monotonic()
            run_seconds = self.prior_run_seconds + started - self.attempt_start
            self.policy.observe(state.resumes, run_seconds)
            extra = {
                "policy": self.policy.state_dict(),
                "saved_on_notice": why == "notice",
                # A final checkpoint is a hand-over: whoever loads it next is not resuming
                # after an interruption (train_state.from_checkpoint).
                "final_save": why == "final",
                "slurm_restart_count": self.slurm_restart_count,
            }
            arrays, metadata = train_state.to_checkpoint(state, self.cfg, extra)
            blocked = self.saver.save(state.step, arrays, metadata, why, held_since=started)
            self.step_log.resumed()  # the history's save ends here too
        self.last_saved_step = state.step
        interval = self.policy.interval_s
        next_in = f"; next in {interval:.1f} s" if interval is not None else ""
        # "saved checkpoint at step N" is logged once the checkpoint is durable: here for a
        # blocking save, by the background persist for an asynchronous one.
        if self.saver.is_async:
            log.info("checkpoint at step %d: snapshot, persisting in the background, blocked "
                     "%.3f s (%s)%s", state.step, blocked, why, next_in)  # fmt: skip
        else:
            log.info("saved checkpoint at step %d in %.3f s (%s)%s", state.step, blocked, why,
                     next_in)  # fmt: skip
        measured = self.policy.measured_persists > 0
        if measured and not self.policy.save_fits_notice() and not self._warned_slow:
            self._warned_slow = True
            log.warning(
                "a save takes %.3g s: it does not fit in the %.3g s notice (margin %.2gx)",
                self.policy.save_total_s, self.policy.notice_s, self.policy.notice_margin,
            )  # fmt: skip

    def _boundary(self) -> None:
        step, has_dir = self.state.step, self.cfg.checkpoint_dir is not None
        if has_dir and not self.notice.requested and self.policy.should_save(step):
            self.save("periodic")
        if self.notice.requested:
            if has_dir:
                self.saver.wait()  # the persist in flight first: its checkpoint is then valid
                if self.last_saved_step != step:
                    self.save("notice")
                else:  # the checkpoint of this step holds the state: honoured, nothing to write
                    history_writer.record_unchanged(self.cfg.checkpoint_dir, step, "notice")
                self.saver.wait()
            else:
                log.warning("preemption notice but no checkpoint dir: progress is lost")
            raise Preempted(step, self.notice.reason, saved=has_dir)

    def run(self) -> train_state.TrainState:
        """Trains until ``cfg.steps``; raises ``Preempted`` after saving on a notice."""
        cfg, state = self.cfg, self.state
        self.policy.start(state.step)
        if state.step > cfg.steps:
            log.warning("checkpoint is at step %d, past --steps %d", state.step, cfg.steps)
        if cfg.startup_seconds > 0:
            time.sleep(cfg.startup_seconds)
        with StepLog(cfg.step_log) as self.step_log:
            while state.step < cfg.steps:
                began, step_started = self.step_log.begin(), time.monotonic()
                batch = state.order.next_indices(state.rng)
                noise = cfg.input_noise * state.rng.standard_normal((len(batch), cfg.features))
                x = self.x[batch] + noise
                loss, grads = model.loss_and_grads(state.params, x, self.y[batch])
                state.adam.update(state.params, grads)
                state.losses.append(loss)
                state.step += 1
                if cfg.sleep_for(state.step) > 0:
                    time.sleep(cfg.sleep_for(state.step))
                step_seconds = time.monotonic() - step_started
                state.train_seconds += step_seconds
                # The notice is seen at the next step boundary: the policy weighs how often a
                # step ends too late for the notice save to fit.
                self.policy.record_step(step_seconds)
                if state.step % cfg.log_every == 0 or state.step == cfg.steps:
                    log.info("step %d/%d loss %.6f", state.step, cfg.steps, loss)
                self.step_log.done(state.step, began)
                progress.step(state.step)  # the step hook: hang detection reads it
                self._boundary()
        self.step_log = StepLog(None)  # closed: the last step ended when the loop did
        if cfg.checkpoint_dir is not None and self.last_saved_step != state.step:
            self.save("final")
        elif cfg.checkpoint_dir is not None:  # the last save holds the final state
            history_writer.record_unchanged(cfg.checkpoint_dir, state.step, "final")
        if cfg.checkpoint_dir is not None:
            self.saver.wait()
        return state

    def write_model(self) -> dict[str, Any]:
        """Writes ``model.npz``, ``metadata.json`` and ``metrics.json``; returns the manifest."""
        state, cfg = self.state, self.cfg
        final_loss = state.losses[-1] if state.losses else None
        metrics = {
            "schema": "vsp-trainer-metrics/1",
            "steps": state.step,
            "final_loss": final_loss,
            "loss_history": state.losses,
            "train_seconds": state.train_seconds,
            "resumes": state.resumes,
            "slurm_restart_count": self.slurm_restart_count,
            "checkpoint_policy": self.policy.explain(),
        }
        metadata = {"step": state.step, "config": cfg.identity(), "model": "mlp-tanh-2layer"}
        params = {name: state.params[name] for name in model.PARAM_NAMES}
        model_files.write_model_dir(
            cfg.model_dir, params, metadata, extra_files={"metrics.json": metrics}
        )
        manifest = manifests.verify_model_dir(cfg.model_dir)
        log.info("model written to %s (step %d, verified)", cfg.model_dir, state.step)
        log.info("loss curve: %s", loss_curve(state.losses))
        return manifest


def loss_curve(losses: list[float], points: int = 8) -> str:
    """A short text rendering of the loss history: ``step:loss`` at evenly spaced steps."""
    if not losses:
        return "(no steps)"
    picks = sorted({round(i * (len(losses) - 1) / max(1, points - 1)) for i in range(points)})
    return "  ".join(f"{i + 1}:{losses[i]:.4f}" for i in picks)


def slurm_restart_count(environ: Mapping[str, str] | None = None) -> int | None:
    """``$SLURM_RESTART_COUNT`` as an int; None outside Slurm or when not a number.

    Slurm sets the variable only once a job was requeued, so inside a Slurm job
    (``SLURM_JOB_ID`` set) an unset count is the first run: 0.
    """
    env = os.environ if environ is None else environ
    value = env.get("SLURM_RESTART_COUNT", "").strip()
    if not value and env.get("SLURM_JOB_ID"):
        return 0
    return int(value) if value.isdigit() else None
