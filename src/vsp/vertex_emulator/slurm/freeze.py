"""The trainer-freeze fault: SIGSTOP a job's trainer once it reports a given training step.

A fault rule with action ``slurm_freeze`` and ``step`` S on a submit request marks that job:
once one of its ranks writes step S or later to its progress file (``trainer.progress``, under
the job's ``VSP_CHECKPOINT_DIR``) outside a save, the emulator sends SIGSTOP to that rank's
process (the pid in the file). With the rule's ``rank`` R only rank R's process is stopped: one
rank of a multi-node job, while the others run on into their next collective and wait there.
A stopped process is left as a deadlock or a stalled collective would leave it: it stays alive,
the batch shell and its beacon go on, no training step finishes. The job stays RUNNING until it
is cancelled (a cancel's SIGKILL ends a stopped process). The timeline records a ``fault`` event
``FREEZE`` with the step, the rank and the pid.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from vsp.components.runtime.core import gcs_paths
from vsp.components.runtime.trainer import contract, progress
from vsp.vertex_emulator import fault_rules
from vsp.vertex_emulator.slurm import context as slurm_context

FAULT_ACTION = "slurm_freeze"

fault_rules.register_action(FAULT_ACTION)


def _job_env(job: dict[str, Any]) -> dict[str, str]:
    pairs = (item.split("=", 1) for item in job.get("environment") or [] if "=" in item)
    return dict(pairs)


def fire_due(ctx: slurm_context.ClusterContext) -> None:
    """Freezes the trainer of every marked running job whose progress reached its step."""
    for job in ctx.jobs.values():
        at = job.get("freeze_at_step")
        if at is None or job.get("phase") != "script" or job.get("kill") is not None:
            continue
        env = _job_env(job)
        root = env.get(contract.CHECKPOINT_DIR_ENV, "")
        if not root:
            continue
        local = gcs_paths.to_local_path(root, gcs_root=env.get(gcs_paths.GCS_FUSE_ROOT_ENV))
        found = progress.read_job(local, str(job["job_id"]))
        target = job.get("freeze_rank")
        reached = [
            r
            for r in found
            if r.step >= at and r.phase == "step" and (target is None or r.rank == target)
        ]
        if not reached:
            continue
        record = reached[0]
        proc = ctx.procs.get(ctx.key(job))
        try:  # only a process of this job's own group is ever stopped
            if proc is None or os.getpgid(record.pid) != proc.pgid:
                continue
            os.kill(record.pid, signal.SIGSTOP)
        except (ProcessLookupError, PermissionError):
            continue
        job["freeze_at_step"] = None
        ctx.record_event(job, "fault", "FREEZE", list(job.get("alloc") or []))
        ctx.events[-1].update(step=record.step, pid=record.pid, rank=record.rank)
