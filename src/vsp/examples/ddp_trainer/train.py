"""The DDP example: a small regression MLP trained on every rank, checkpointed collectively.

Deterministic: the data set, the initial weights and each step's global batch come from fixed
seeds (the batch of step ``s`` is the same whatever the world size; rank ``r`` of ``W`` takes
every ``W``-th example of it), torch runs one thread with deterministic algorithms, and the
momentum buffers are checkpointed, so a run preempted and resumed any number of times at the
same world size ends with parameters bit-identical to an uninterrupted run. At another world
size the gradient sums run in another order: the run continues from the checkpointed step and
ends within rounding of the uninterrupted run.

Checkpoints: ``torch.distributed.checkpoint`` writes every rank's part into
``collective.state_dir(root, step)``; rank 0 commits it (``collective.commit``: manifest last,
history lines) after a barrier, so the checkpoint library's retention, latest-valid selection
and the step's goodput figures apply. Every rank calls the step hook (``progress.step``) after
each step and marks its saves (``progress.saving``), so the supervisor's hang detection sees
each rank, and names the one that stopped. A preemption notice (SIGTERM, or SIGUSR1 before the
time limit) on any rank is shared at the next step boundary (an all-reduce of the flags), every
rank saves, and all exit 143 (``contract.EXIT_PREEMPTED``).

When to save periodically: the checkpoint policy's flags (``policy_flags``; ``--save-every N``
is ``--checkpoint-every-steps N``), by default ``--checkpoint-interval auto``, the notice-first
interval from the measured saves and steps and ``--mtbf-seconds`` (the job's, not a node's).
Rank 0's policy decides, and the same all-reduce tells every rank; what the policy learned rides
in each checkpoint (``carried_policy``).

Output: each rank logs ``rank R/W on node NODE (pid P, restart N)`` at start; rank 0 logs the
resumed step, each saved checkpoint and ``final loss L``. At the end every rank saves a
``final`` checkpoint, and rank 0 writes the model directory (``model.npz`` with the
parameters, ``metadata.json`` with step, world size, final loss and the policy's last
explanation). ``--step-log FILE``: rank 0 appends ``STEP BEGAN ENDED PID`` per step, the truth
of the goodput tests.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint import state_dict as dcp_state
from torch.nn.parallel import DistributedDataParallel

from vsp.components.runtime.core import errors, gcs_paths
from vsp.components.runtime.trainer import (
    collective,
    contract,
    history_writer,
    model_files,
    policy_flags,
    progress,
)
from vsp.components.runtime.trainer import notice as trainer_notice
from vsp.examples.ddp_trainer import carried_policy
from vsp.examples.trainer.step_log import StepLog

log = logging.getLogger("vsp.examples.ddp_trainer")

EXAMPLES = 1024
FEATURES = 16


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m vsp.examples.ddp_trainer")
    parser.add_argument(
        "--steps", type=int, default=200, help="training steps in all (default %(default)s)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of data, weights and batches (default %(default)s)",
    )
    parser.add_argument(
        "--keep", type=int, default=3, help="checkpoints kept (default %(default)s)"
    )
    parser.add_argument(
        "--batch", type=int, default=64, help="global batch, all ranks (default %(default)s)"
    )
    parser.add_argument("--hidden", type=int, default=32, help="hidden units (default %(default)s)")
    parser.add_argument(
        "--lr", type=float, default=0.05, help="learning rate (default %(default)s)"
    )
    parser.add_argument(
        "--step-seconds", type=float, default=0.0, help="sleep per step, s (default %(default)s)"
    )
    parser.add_argument(
        "--step-log",
        type=Path,
        default=None,
        help="rank 0 appends STEP BEGAN ENDED PID per step (the goodput truth)",
    )
    policy_flags.add_policy_flags(parser, every_steps_aliases=["--save-every"])
    parser.add_argument(
        "--checkpoint-dir",
        default=os.environ.get(contract.CHECKPOINT_DIR_ENV),
        help=f"each rank writes its part of every checkpoint here (${contract.CHECKPOINT_DIR_ENV})",
    )
    parser.add_argument(
        "--model-dir",
        default=os.environ.get(contract.MODEL_DIR_ENV),
        help=f"where rank 0 writes the trained model (${contract.MODEL_DIR_ENV})",
    )
    args = parser.parse_args(argv)
    if not args.checkpoint_dir or not args.model_dir:
        parser.error(f"set ${contract.CHECKPOINT_DIR_ENV} and ${contract.MODEL_DIR_ENV}")
    try:
        args.policy = policy_flags.policy_from_args(args, os.environ)
    except errors.UserError as exc:
        parser.error(str(exc))
    return args


def dataset(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed regression data set: ``y = tanh(X w) + noise``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(EXAMPLES, FEATURES, generator=gen)
    w = torch.randn(FEATURES, 1, generator=gen)
    return x, torch.tanh(x @ w) + 0.05 * torch.randn(EXAMPLES, 1, generator=gen)


def batch_indices(seed: int, step: int, size: int, rank: int, world: int) -> torch.Tensor:
    """This rank's examples of step ``step``'s global batch (the same batch at any world size)."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    return torch.randperm(EXAMPLES, generator=gen)[:size][rank::world]


def model_for(seed: int, hidden: int) -> nn.Module:
    torch.manual_seed(seed + 1)
    return nn.Sequential(nn.Linear(FEATURES, hidden), nn.Tanh(), nn.Linear(hidden, 1))


def run(args: argparse.Namespace, notice: trainer_notice.PreemptionNotice) -> int:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    log.info("rank %d/%d on node %s (pid %d, restart %s)", rank, world, node, os.getpid(), restart)
    if args.batch % world:
        log.error("--batch %d is not a multiple of the world size %d", args.batch, world)
        return 2
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    root = gcs_paths.to_local_path(args.checkpoint_dir)
    x, y = dataset(args.seed)
    module = model_for(args.seed, args.hidden)
    ddp = DistributedDataParallel(module)
    optim = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    # Rank 0 names the checkpoint to resume; once every rank loaded it, rank 0 records the
    # attempt's start in the history (the time before counts as startup and reload).
    looked_up = time.time()
    found = torch.tensor([-1])
    if rank == 0:
        ref = collective.latest(root)
        found[0] = -1 if ref is None else ref.step
    dist.broadcast(found, 0)
    step = int(found[0])
    if step >= 0:
        model_sd, optim_sd = dcp_state.get_state_dict(ddp, optim)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=str(collective.state_dir(root, step)))
        dcp_state.set_state_dict(
            ddp, optim, model_state_dict=state["model"], optim_state_dict=state["optim"]
        )
    dist.barrier()
    policy, attempt_start = args.policy, time.monotonic()
    carried = carried_policy.Carried()
    if rank == 0:  # rank 0 decides when to save; the ranks agree at each step boundary
        collective.record_resumed(root, step if step >= 0 else None, looked_up)
        resumed_dir = collective.state_dir(root, step) if step >= 0 else None
        carried = carried_policy.restore(policy, root, resumed_dir)
        if step >= 0:
            log.info("resumed from step %d (%d rank(s) now)", step, world)
        log.info("checkpoint policy: %s", policy.explain())
    last_saved = step if step >= 0 else None  # every rank holds the same steps
    step = max(step, 0)
    policy.start(step)
    loss_fn = nn.MSELoss()

    def save(reason: str) -> None:
        nonlocal last_saved
        if step == last_saved:  # its committed checkpoint holds this state: nothing to write
            if rank == 0:
                history_writer.record_unchanged(root, step, reason)
                log.info("%s save of step %d: already committed, nothing to write", reason, step)
            return
        step_log.pause()  # a save's time is no step's
        started = time.time()  # training is held from here: the history's save starts here
        held = time.monotonic()
        policy.observe(carried.resumes, carried.run_seconds + held - attempt_start)
        with progress.saving():  # a blocking save is not a stalled step
            collective_save(reason, started)
            step_log.resumed()  # the save returned: the loop's work from here is the next step's
        policy.record_save(step, time.monotonic() - held)
        last_saved = step
        if reason == "final":  # the model write, the teardown and the exit are no steps
            progress.finishing()

    def collective_save(reason: str, started: float) -> None:
        if rank == 0:
            collective.prepare(root, step)
        dist.barrier()
        model_sd, optim_sd = dcp_state.get_state_dict(ddp, optim)
        dcp.save(
            {"model": model_sd, "optim": optim_sd},
            checkpoint_id=str(collective.state_dir(root, step)),
        )
        dist.barrier()  # every rank's part is written
        if rank == 0:
            carried_policy.write(collective.state_dir(root, step), policy, reason)
            collective.commit(root, step, reason, started=started, keep=args.keep)
            log.info("checkpoint of step %d committed (%s)", step, reason)
        dist.barrier()

    def boundary() -> bool:
        """A step boundary: every rank learns of a notice on any rank and of a periodic save
        rank 0's policy calls for, and saves; True when the run must stop (notice saved)."""
        due = rank == 0 and policy.should_save(step)
        flags = torch.tensor([1 if notice.requested else 0, 1 if due else 0])
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        if int(flags[0]):
            save("notice")
            log.info("preemption notice: saved step %d, exit %d", step, contract.EXIT_PREEMPTED)
            dist.destroy_process_group()
            return True
        if int(flags[1]):
            save("periodic")
            if rank == 0 and policy.interval_s is not None:
                log.info("next periodic save in %.4g s of training", policy.interval_s)
        return False

    step_log = StepLog(args.step_log if rank == 0 else None)
    with step_log:
        # A notice while the process group formed and the checkpoint loaded stops the run here.
        if step < args.steps and boundary():
            return contract.EXIT_PREEMPTED
        while step < args.steps:
            began, step_started = step_log.begin(), time.monotonic()
            idx = batch_indices(args.seed, step, args.batch, rank, world)
            optim.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(x[idx]), y[idx])
            loss.backward()
            optim.step()
            step += 1
            if args.step_seconds:
                time.sleep(args.step_seconds)
            policy.record_step(time.monotonic() - step_started)
            step_log.done(step, began)
            progress.step(step)  # the step hook: hang detection reads it
            if step < args.steps and boundary():  # after the last step: the final save
                return contract.EXIT_PREEMPTED
    # The final state, checkpointed too: the step's goodput counts the steps up to a save as
    # useful, and a step retried after the model is written resumes from here.
    save("final")
    with torch.no_grad():
        final = float(loss_fn(module(x), y))
    if rank == 0:
        arrays = {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}
        meta = {"step": step, "world_size": world, "final_loss": final, "seed": args.seed}
        meta["checkpoint_policy"] = policy.explain()
        model_files.write_model_dir(gcs_paths.to_local_path(args.model_dir), arrays, meta)
        log.info("final loss %.10f after %d steps; model written", final, step)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(asctime)s ddp %(message)s", force=True
    )
    np.seterr(all="ignore")
    args = parse(argv)
    # From here a notice is a flag, also while the process group forms and the checkpoint
    # loads: the first step boundary sees it (and saves nothing when nothing was trained).
    with trainer_notice.PreemptionNotice() as notice:
        return run(args, notice)
