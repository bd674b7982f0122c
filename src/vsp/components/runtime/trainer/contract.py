"""The trainer contract: what each attempt's process is given, and how it answers.

The one interface users code against. Every attempt (a Slurm job on a training cluster, or a
CustomJob replica) runs the user's command with:

- ``VSP_CHECKPOINT_DIR``: the checkpoint directory all attempts share; resume from the newest
  valid checkpoint there (CustomJobs: the same URI as ``AIP_CHECKPOINT_DIR``);
- ``VSP_MODEL_DIR``: where the final model goes (CustomJobs: the same as ``AIP_MODEL_DIR``);
- ``VSP_ATTEMPT``: the attempt's number, 0 for the first;
- ``VSP_RUN_KEY``: the run's identity, the same for every attempt;
- ``VSP_GCS_FUSE_ROOT`` (optional): where Cloud Storage is mounted when it is not ``/gcs``.

The process answers with its exit code: 0 when the model is written; ``EXIT_PREEMPTED`` (143,
128 + SIGTERM) after saving on a notice (SIGTERM on preemption, SIGUSR1 before the time limit),
which counts as a preemption, not a failure; anything else is the trainer failing. Numpy-free,
so the pipeline steps use it too.
"""

from __future__ import annotations

CHECKPOINT_DIR_ENV = "VSP_CHECKPOINT_DIR"
MODEL_DIR_ENV = "VSP_MODEL_DIR"
ATTEMPT_ENV = "VSP_ATTEMPT"
RUN_KEY_ENV = "VSP_RUN_KEY"
VERTEX_CHECKPOINT_DIR_ENV = "AIP_CHECKPOINT_DIR"
VERTEX_MODEL_DIR_ENV = "AIP_MODEL_DIR"
EXIT_PREEMPTED = 143
