"""Entry point of the ``train_on_cluster`` component: Spot training on a Slurm training cluster.

Builds the Slurm backend and the recovery strategy from the component's parameters and runs the
shared supervisor (``training_step.supervise``), which also writes the metrics and the report.
"""

from __future__ import annotations

from typing import Any

from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import errors, rest
from vsp.components.runtime.slurm import api as slurm_api
from vsp.components.runtime.slurm import backend as slurm_backend
from vsp.components.runtime.training import runner as training_step


def train_on_cluster(
    *,
    project: str,
    location: str,
    cluster_id: str,
    training: slurm_backend.SlurmTraining,
    spot_partition: str,
    fallback_partition: str = "",
    max_preemptions: int = 10,
    max_user_failures: int = 0,
    fallback_after_preemptions: int = 0,
    capacity_wait_seconds: float = 0.0,
    run_key: str = "",
    pipeline_run: str = "",
    task_name: str = "",
    **supervise_options: Any,
) -> training_step.TrainOutcome:
    """Spot training as Slurm jobs on a training cluster; see ``training_run``."""
    if not training.command:
        raise errors.UserError("command is empty. Fix: give the trainer's argv as a list.")
    if not (training.checkpoint_dir or "").strip():
        raise errors.UserError(
            "checkpoint_dir is empty: the trainer would neither save nor resume, so a "
            "preemption would restart training from step 0. Fix: give a directory every "
            "attempt can reach (the component's '' picks one on Cloud Storage beside model_dir)."
        )
    ref = cluster_resource.ClusterRef(project, location, cluster_id)
    client = slurm_api.SlurmClient(rest.VertexRestClient(location), ref)
    targets = slurm_backend.targets(spot_partition, fallback_partition)
    strategy = training_step.spot_strategy(
        targets,
        max_preemptions=max_preemptions,
        max_user_failures=max_user_failures,
        fallback_after_preemptions=fallback_after_preemptions,
        capacity_wait_seconds=capacity_wait_seconds,
    )
    return training_step.supervise(
        slurm_backend.SlurmBackend(client, training, targets, pipeline_run=pipeline_run),
        strategy,
        training_step.run_key_for(pipeline_run, cluster_id, run_key, task_name),
        checkpoint_dir=training.checkpoint_dir,
        model_dir=training.model_dir,
        **supervise_options,
    )
