"""How a training attempt stands or ended: one vocabulary for every backend.

A Slurm job (``slurm.job.JobInfo.outcome``) and a CustomJob
(``training.backends.custom_job.classify``) are each read into an ``Outcome``; the recovery
strategies (``training.recovery``) decide from it alone. A preemption (the capacity was taken
back) is told apart from a user failure (the trainer itself failed): the first is resumed from
the checkpoint, the second gets bounded restarts.
"""

from __future__ import annotations

import enum


class Outcome(str, enum.Enum):
    """How an attempt stands or ended.

    * ``PENDING``: waiting for capacity (queued, requeued, held).
    * ``RUNNING``: running, or ending (still flagged as completing).
    * ``SUCCEEDED``: the trainer finished (exit 0).
    * ``PREEMPTED``: the infrastructure stopped it; resume from the checkpoint.
    * ``USER_FAILURE``: the attempt itself is at fault; do not resubmit blindly.
    * ``CANCELLED``: someone (a user, an admin, the pipeline) cancelled it.
    """

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    PREEMPTED = "PREEMPTED"
    USER_FAILURE = "USER_FAILURE"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        """Whether the attempt has ended."""
        return self not in (Outcome.PENDING, Outcome.RUNNING)
