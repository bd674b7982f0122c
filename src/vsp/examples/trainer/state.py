"""The example trainer's state and configuration, and their exact checkpoint form.

Checkpoint contents (``vsp.components.runtime.trainer.checkpoint`` format):

* arrays: ``param.<name>``, ``adam.m.<name>``, ``adam.v.<name>`` (float64), ``data.perm`` (the
  current epoch's permutation, int64) and ``history.loss`` (loss of every finished step).
* metadata: ``step``, ``epoch``, ``index`` (position in the permutation), ``rng`` (the PCG64
  ``bit_generator.state``, 128-bit ints as JSON ints), ``adam_t``, ``train_seconds`` (time spent
  in the steps this state holds: the useful training time), ``config`` (what must match
  to resume), ``policy`` (measured save costs, preemptions, run time), ``saved_on_notice``,
  ``slurm_restart_count``.

Restoring all of it makes a resumed run continue with exactly the bits an uninterrupted run
would have, however many times it is stopped (by notice or SIGKILL).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import checkpoint
from vsp.examples.trainer import model

SAVE_MODES = ("async", "blocking")


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
    save_mode: str = "async"
    save_block_seconds: float = 0.0
    save_persist_seconds: float = 0.0
    startup_seconds: float = 0.0
    slow_from_step: int = 0
    slow_step_seconds: float = 0.0

    def sleep_for(self, step: int) -> float:
        """The artificial sleep of training step ``step`` (1-based), seconds."""
        slow = self.slow_from_step and step >= self.slow_from_step
        return self.slow_step_seconds if slow else self.step_seconds

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
    train_seconds: float = 0.0


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
        "train_seconds": state.train_seconds,
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
    # Loading a final checkpoint continues a finished training (a hand-over to the next
    # task), which is no interruption: it does not count as a resume.
    state.resumes = int(meta.get("resumes", 0)) + (0 if meta.get("final_save") else 1)
    state.train_seconds = float(meta.get("train_seconds", 0.0))
    return state
