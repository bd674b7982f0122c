"""The training loop: resume, train, checkpoint periodically and on notice, write the model.

Checkpoint contents (``vsp.components.runtime.trainer.checkpoint`` format):

* arrays: ``param.<name>``, ``adam.m.<name>``, ``adam.v.<name>`` (float64), ``data.perm`` (the
  current epoch's permutation, int64) and ``history.loss`` (loss of every finished step).
* metadata: ``step``, ``epoch``, ``index`` (position in the permutation), ``rng`` (the PCG64
  ``bit_generator.state``, 128-bit ints as JSON ints), ``adam_t``, ``config`` (what must match
  to resume), ``policy`` (measured save cost, preemptions, run time), ``saved_on_notice``,
  ``slurm_restart_count``.

Restoring all of it makes a resumed run continue with exactly the bits an uninterrupted run
would have, however many times it is stopped (by notice or SIGKILL).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import checkpoint
from vsp.components.runtime.trainer import model_files as model_dir
from vsp.components.runtime.trainer import policy as checkpoint_policy
from vsp.examples.trainer import model
from vsp.examples.trainer.step_log import StepLog

log = logging.getLogger("vsp.examples.trainer")


class Preempted(Exception):
    """The loop stopped at a step boundary because a preemption notice arrived."""

    def __init__(self, step: int, reason: str, saved: bool):
        self.step, self.reason, self.saved = step, reason, saved
        super().__init__(f"preempted ({reason}) after step {step}")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything the run needs; see ``cli`` for the meaning of each flag."""

    steps: int
    seed: int
    batch_size: int
    lr: float
    model_dir: Path
    checkpoint_dir: Path | None = None
    keep: int = 3
    step_seconds: float = 0.0
    log_every: int = 10
    step_log: Path | None = None
    samples: int = 1024
    features: int = 8
    hidden: int = 32
    classes: int = 3
    input_noise: float = 0.05

    def identity(self) -> dict[str, Any]:
        """The settings a checkpoint must share with this run to be resumed (not ``steps``)."""
        names = ("seed", "batch_size", "lr", "samples", "features", "hidden", "classes")
        return {name: getattr(self, name) for name in (*names, "input_noise")}


@dataclasses.dataclass
class TrainState:
    """The complete mutable state of a run."""

    step: int
    params: dict[str, np.ndarray]
    adam: model.Adam
    order: model.BatchOrder
    rng: np.random.Generator
    losses: list[float]
    resumes: int = 0


def fresh_state(cfg: TrainConfig) -> TrainState:
    """The state at step 0."""
    params = model.init_params(cfg.seed, cfg.features, cfg.hidden, cfg.classes)
    return TrainState(
        step=0,
        params=params,
        adam=model.Adam(params, cfg.lr),
        order=model.BatchOrder(cfg.samples, cfg.batch_size),
        rng=model.stream(cfg.seed, model.TRAIN_STREAM),
        losses=[],
    )


def to_checkpoint(state: TrainState, cfg: TrainConfig, extra: dict[str, Any]) -> tuple[dict, dict]:
    """(arrays, metadata) holding ``state`` completely."""
    arrays: dict[str, np.ndarray] = {}
    for name in model.PARAM_NAMES:
        arrays[f"param.{name}"] = state.params[name]
        arrays[f"adam.m.{name}"] = state.adam.m[name]
        arrays[f"adam.v.{name}"] = state.adam.v[name]
    arrays["data.perm"] = state.order.perm
    arrays["history.loss"] = np.asarray(state.losses, dtype=np.float64)
    metadata = {
        "step": state.step,
        "epoch": state.order.epoch,
        "index": state.order.index,
        "rng": state.rng.bit_generator.state,
        "adam_t": state.adam.t,
        "resumes": state.resumes,
        "config": cfg.identity(),
        **extra,
    }
    return arrays, metadata


def from_checkpoint(ckpt: checkpoint.Checkpoint, cfg: TrainConfig) -> TrainState:
    """Rebuilds the state saved in ``ckpt``; UserError if it belongs to a different run."""
    meta, arrays = ckpt.metadata, ckpt.arrays
    saved = meta.get("config", {})
    diffs = [
        f"{key}: checkpoint {saved.get(key)!r} != {value!r}"
        for key, value in cfg.identity().items()
        if saved.get(key) != value
    ]
    if diffs:
        raise errors.UserError(
            f"checkpoint {ckpt.path} was written by a run with other settings ({'; '.join(diffs)})."
            " Fix: use the same arguments, or a fresh --checkpoint-dir."
        )
    state = fresh_state(cfg)
    for name in model.PARAM_NAMES:
        state.params[name] = arrays[f"param.{name}"]
        state.adam.m[name] = arrays[f"adam.m.{name}"]
        state.adam.v[name] = arrays[f"adam.v.{name}"]
    state.adam.t = int(meta["adam_t"])
    state.order.perm = arrays["data.perm"]
    state.order.epoch, state.order.index = int(meta["epoch"]), int(meta["index"])
    state.rng.bit_generator.state = meta["rng"]
    state.losses = arrays["history.loss"].tolist()
    state.step = ckpt.step
    state.resumes = int(meta.get("resumes", 0)) + 1
    return state


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
        cfg: TrainConfig,
        policy: checkpoint_policy.CheckpointPolicy,
        notice: checkpoint_policy.PreemptionNotice,
        slurm_restart_count: int | None = None,
    ):
        self.cfg, self.policy, self.notice = cfg, policy, notice
        self.slurm_restart_count = slurm_restart_count
        self.x, self.y = model.make_dataset(cfg.seed, cfg.samples, cfg.features, cfg.classes)
        self.attempt_start = time.monotonic()
        self.prior_run_seconds = 0.0
        self.last_saved_step: int | None = None
        self.state = self._restore()

    def _restore(self) -> TrainState:
        cfg = self.cfg
        ckpt = checkpoint.resume(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
        if ckpt is None:
            if cfg.checkpoint_dir and self.slurm_restart_count:
                log.warning(
                    "restart %s but no valid checkpoint: from scratch", self.slurm_restart_count
                )
            log.info("starting from step 0 (seed %d)", cfg.seed)
            return fresh_state(cfg)
        state = from_checkpoint(ckpt, cfg)
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
        """Saves a checkpoint of the current state and records its cost in the policy."""
        state = self.state
        started = time.monotonic()
        self.policy.observe(state.resumes, self.prior_run_seconds + started - self.attempt_start)
        extra = {
            "policy": self.policy.state_dict(),
            "saved_on_notice": why == "notice",
            "slurm_restart_count": self.slurm_restart_count,
        }
        arrays, metadata = to_checkpoint(state, self.cfg, extra)
        checkpoint.save(
            self.cfg.checkpoint_dir, state.step, arrays, metadata, keep=self.cfg.keep, reason=why
        )
        duration = time.monotonic() - started
        self.policy.record_save(state.step, duration)
        self.last_saved_step = state.step
        interval = self.policy.interval_s
        next_in = f"; next in {interval:.1f} s" if interval is not None else ""
        log.info("saved checkpoint at step %d in %.3f s (%s)%s", state.step, duration, why, next_in)
        if not self.policy.save_fits_notice():
            cost = self.policy.save_cost_s
            log.warning("saves take %.1f s: too slow for a 30 s Spot notice", cost)

    def _boundary(self) -> None:
        step, has_dir = self.state.step, self.cfg.checkpoint_dir is not None
        if has_dir and not self.notice.requested and self.policy.should_save(step):
            self.save("periodic")
        if self.notice.requested:
            if has_dir and self.last_saved_step != step:
                self.save("notice")
            if not has_dir:
                log.warning("preemption notice but no checkpoint dir: progress is lost")
            raise Preempted(step, self.notice.reason, saved=has_dir)

    def run(self) -> TrainState:
        """Trains until ``cfg.steps``; raises ``Preempted`` after saving on a notice."""
        cfg, state = self.cfg, self.state
        self.policy.start(state.step)
        if state.step > cfg.steps:
            log.warning("checkpoint is at step %d, past --steps %d", state.step, cfg.steps)
        with StepLog(cfg.step_log) as step_log:
            while state.step < cfg.steps:
                began = time.time()
                batch = state.order.next_indices(state.rng)
                noise = cfg.input_noise * state.rng.standard_normal((len(batch), cfg.features))
                x = self.x[batch] + noise
                loss, grads = model.loss_and_grads(state.params, x, self.y[batch])
                state.adam.update(state.params, grads)
                state.losses.append(loss)
                state.step += 1
                if cfg.step_seconds > 0:
                    time.sleep(cfg.step_seconds)
                if state.step % cfg.log_every == 0 or state.step == cfg.steps:
                    log.info("step %d/%d loss %.6f", state.step, cfg.steps, loss)
                step_log.write(state.step, began, time.time())
                self._boundary()
        if cfg.checkpoint_dir is not None and self.last_saved_step != state.step:
            self.save("final")
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
            "resumes": state.resumes,
            "slurm_restart_count": self.slurm_restart_count,
        }
        metadata = {"step": state.step, "config": cfg.identity(), "model": "mlp-tanh-2layer"}
        params = {name: state.params[name] for name in model.PARAM_NAMES}
        model_dir.write_model_dir(
            cfg.model_dir, params, metadata, extra_files={"metrics.json": metrics}
        )
        manifest = model_dir.verify_model_dir(cfg.model_dir)
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
