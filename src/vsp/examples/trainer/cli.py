"""Command line of the example trainer (``python -m vsp.examples.trainer``).

Exit codes:

* 0: training finished; the model dir is written and verifies.
* 143 (``contract.EXIT_PREEMPTED``): a preemption notice (SIGTERM/SIGUSR1 by default)
  arrived; the step in flight was finished, checkpointed (nothing is saved without a checkpoint
  dir) and the run stopped early. Rerun the same command to resume. A signal that arrives before
  the handlers are installed (interpreter start-up) kills the process the default way (-15).
* 2: bad arguments or settings (``UserError``), e.g. a checkpoint dir written by a run with other
  settings, or no model dir.
* 70: internal error (a bug).
* 75: transient error (``TransientError``), worth retrying.

Directories: ``--checkpoint-dir`` defaults to ``$VSP_CHECKPOINT_DIR``, else
``$AIP_CHECKPOINT_DIR``; ``--model-dir`` to ``$VSP_MODEL_DIR``, else ``$AIP_MODEL_DIR``. A
``gs://bucket/path`` value is read as the GCS FUSE path ``/gcs/bucket/path`` (mount root from
``$VSP_GCS_FUSE_ROOT``). Progress goes to stdout, one line per logged step:
``<time> step <n>/<steps> loss <loss>``; ``--step-log FILE`` also appends
``<step> <began> <ended> <pid>`` (epoch seconds) for every step, from its start to the next
step or save (``step_log``).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from vsp.components.runtime.core import errors, gcs_paths
from vsp.components.runtime.trainer import contract, policy_flags
from vsp.components.runtime.trainer import notice as trainer_notice
from vsp.examples.trainer import loop, state

log = logging.getLogger("vsp.examples.trainer")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m vsp.examples.trainer",
        description="Train a small numpy MLP on synthetic data; resumes from checkpoints.",
    )
    add = parser.add_argument
    add("--steps", type=int, default=200, help="total training steps (default %(default)s)")
    add(
        "--seed", type=int, default=0, help="seed of data, init and shuffling (default %(default)s)"
    )
    add("--batch-size", type=int, default=32, help="minibatch size (default %(default)s)")
    add("--lr", type=float, default=0.01, help="Adam learning rate (default %(default)s)")
    add("--hidden", type=int, default=32, help="hidden units (default %(default)s)")
    add("--samples", type=int, default=1024, help="synthetic dataset size (default %(default)s)")
    add("--checkpoint-dir", help="default $VSP_CHECKPOINT_DIR, else $AIP_CHECKPOINT_DIR")
    add("--model-dir", help="default $VSP_MODEL_DIR, else $AIP_MODEL_DIR")
    policy_flags.add_policy_flags(parser)
    add(
        "--save-mode",
        choices=state.SAVE_MODES,
        default="async",
        help="async (default: snapshot in memory, write in the background, manifest last)"
        " or blocking",
    )
    add(
        "--save-block-seconds",
        type=float,
        default=0.0,
        help="simulated extra seconds a save blocks training (default %(default)s)",
    )
    add(
        "--save-persist-seconds",
        type=float,
        default=0.0,
        help="simulated extra seconds to write a checkpoint (default %(default)s; in the background"
        " when async)",
    )
    add("--keep", type=int, default=3, help="checkpoints to keep (default %(default)s)")
    add(
        "--step-seconds",
        type=float,
        default=0.0,
        help="artificial sleep per step (default %(default)s)",
    )
    add(
        "--startup-seconds",
        type=float,
        default=0.0,
        help="artificial sleep before the first step, after resuming (default %(default)s)",
    )
    add(
        "--slow-from-step",
        type=int,
        default=0,
        help="from this step on, sleep --slow-step-seconds per step instead"
        " (default %(default)s: never)",
    )
    add(
        "--slow-step-seconds",
        type=float,
        default=0.0,
        help="artificial sleep per step from --slow-from-step on (default %(default)s)",
    )
    add("--log-every", type=int, default=10, help="log every N steps (default %(default)s)")
    add(
        "--step-log",
        help="append 'STEP BEGAN ENDED PID' (epoch seconds) per training step to this file",
    )
    add(
        "--notice-signals",
        default="SIGTERM,SIGUSR1",
        help="signals that mean 'preemption coming' (default SIGTERM,SIGUSR1)",
    )
    return parser


def resolve_dir(
    value: str | None, env_names: Sequence[str], environ: Mapping[str, str]
) -> Path | None:
    """The flag value, else the first non-empty env var; ``gs://`` mapped to GCS FUSE."""
    for candidate in (value, *(environ.get(name) for name in env_names)):
        if candidate:
            return gcs_paths.to_local_path(
                candidate, gcs_root=environ.get(gcs_paths.GCS_FUSE_ROOT_ENV)
            )
    return None


def parse_signals(text: str) -> list[signal.Signals]:
    """``"SIGTERM,USR1"`` -> signals; UserError for unknown names."""
    found = []
    for raw in filter(None, (part.strip().upper() for part in text.split(","))):
        name = raw if raw.startswith("SIG") else f"SIG{raw}"
        try:
            found.append(signal.Signals[name])
        except KeyError:
            raise errors.UserError(f"unknown signal {raw!r} in --notice-signals") from None
    if not found:
        raise errors.UserError("--notice-signals names no signal")
    return found


def config_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> state.TrainConfig:
    """Validates the arguments and builds the run configuration."""
    model_dir = resolve_dir(
        args.model_dir, (contract.MODEL_DIR_ENV, contract.VERTEX_MODEL_DIR_ENV), environ
    )
    if model_dir is None:
        raise errors.UserError("no model dir. Fix: pass --model-dir or set VSP_MODEL_DIR.")
    ckpt_names = (contract.CHECKPOINT_DIR_ENV, contract.VERTEX_CHECKPOINT_DIR_ENV)
    positive = {"--steps": args.steps, "--keep": args.keep, "--log-every": args.log_every}
    positive |= {"--hidden": args.hidden, "--samples": args.samples}
    for flag, value in positive.items():
        if value < 1:
            raise errors.UserError(f"{flag} must be >= 1, got {value}")
    for flag, value in {
        "--step-seconds": args.step_seconds,
        "--save-block-seconds": args.save_block_seconds,
        "--save-persist-seconds": args.save_persist_seconds,
        "--startup-seconds": args.startup_seconds,
        "--slow-step-seconds": args.slow_step_seconds,
        "--slow-from-step": args.slow_from_step,
    }.items():
        if not value >= 0:
            raise errors.UserError(f"{flag} must be >= 0 seconds, got {value}")
    return state.TrainConfig(
        steps=args.steps,
        seed=args.seed,
        batch_size=args.batch_size,
        lr=args.lr,
        model_dir=model_dir,
        checkpoint_dir=resolve_dir(args.checkpoint_dir, ckpt_names, environ),
        keep=args.keep,
        step_seconds=args.step_seconds,
        log_every=args.log_every,
        step_log=gcs_paths.to_local_path(args.step_log) if args.step_log else None,
        samples=args.samples,
        hidden=args.hidden,
        save_mode=args.save_mode,
        save_block_seconds=args.save_block_seconds,
        save_persist_seconds=args.save_persist_seconds,
        startup_seconds=args.startup_seconds,
        slow_from_step=args.slow_from_step,
        slow_step_seconds=args.slow_step_seconds,
    )


def _log_to_stdout() -> logging.Handler:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    for name in ("vsp.examples.trainer", "vsp.components.runtime"):
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.INFO)
    return handler


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Runs the trainer; returns the process exit code (see the module docstring)."""
    environ = os.environ if environ is None else environ
    args = build_parser().parse_args(argv)
    handler = _log_to_stdout()
    try:
        cfg = config_from_args(args, environ)
        policy = policy_flags.policy_from_args(args, environ)
        restarts = loop.slurm_restart_count(environ)
        if restarts is not None:
            log.info("SLURM_RESTART_COUNT=%d", restarts)
        log.info("checkpoints: %s (%s), model: %s", cfg.checkpoint_dir, policy.mode, cfg.model_dir)
        if cfg.checkpoint_dir is None:
            log.warning("no checkpoint dir: a preempted run will start over")
        with trainer_notice.PreemptionNotice(parse_signals(args.notice_signals)) as notice:
            trainer = loop.Trainer(cfg, policy, notice, slurm_restart_count=restarts)
            trainer.run()
            trainer.write_model()
        return 0
    except loop.Preempted as stop:
        code = contract.EXIT_PREEMPTED
        saved = "checkpoint saved" if stop.saved else "nothing saved"
        log.info(
            "preemption notice (%s) after step %d: %s; exit %d", stop.reason, stop.step, saved, code
        )
        return code
    except errors.VspError as exc:
        log.error("error: %s", exc)
        return exc.exit_code
    except Exception:
        log.exception("internal error")
        return errors.EXIT_INTERNAL_ERROR
    finally:
        for name in ("vsp.examples.trainer", "vsp.components.runtime"):
            logging.getLogger(name).removeHandler(handler)
