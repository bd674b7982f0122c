"""Entry point of the ``train_on_cluster`` component: Spot training on a Slurm training cluster.

Builds the Slurm backend and the recovery strategy from the component's parameters and runs the
shared supervisor (``training_step.supervise``), which also writes the metrics and the report.
"""

from __future__ import annotations

import logging
from typing import Any

from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.core import errors, rest
from vsp.components.runtime.slurm import api as slurm_api
from vsp.components.runtime.slurm import backend as slurm_backend
from vsp.components.runtime.training import beacon as beacon_lib
from vsp.components.runtime.training import runner as training_step

log = logging.getLogger(__name__)


def fallback_if_present(cluster: dict[str, Any] | None, fallback_partition: str) -> str:
    """The fallback partition, or '' when the cluster has a partition list without it.

    The pipelines pass ``ondemand`` whatever the cluster holds; a cluster built without the
    on-demand pool (``ondemand_max_nodes=0``, the default) has no such partition, and a job sent
    there would be refused. When the partitions cannot be read, the fallback is kept as given.
    """
    try:
        spec = cluster_spec.ClusterSpec.from_api(cluster) if cluster else None
    except ValueError:  # an unreadable answer (pydantic): keep the caller's choice
        return fallback_partition
    partitions = spec.slurm.partitions if spec is not None and spec.slurm else None
    if not partitions or any(p.id == fallback_partition for p in partitions):
        return fallback_partition
    log.info(
        "cluster has no partition %r (partitions: %s): no on-demand fallback; set "
        "ondemand_max_nodes > 0 to have one",
        fallback_partition,
        ", ".join(str(p.id) for p in partitions),
    )
    return ""


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
    vertex = rest.VertexRestClient(location)
    client = slurm_api.SlurmClient(vertex, ref)
    if fallback_partition:
        fallback_partition = fallback_if_present(
            cluster_resource.ClusterResource(vertex, ref).get(), fallback_partition
        )
    targets = slurm_backend.targets(spot_partition, fallback_partition)
    strategy = training_step.spot_strategy(
        targets,
        max_preemptions=max_preemptions,
        max_user_failures=max_user_failures,
        fallback_after_preemptions=fallback_after_preemptions,
        capacity_wait_seconds=capacity_wait_seconds,
    )
    settings = supervise_options.get("poll_settings")
    backend = slurm_backend.SlurmBackend(
        client,
        training,
        targets,
        pipeline_run=pipeline_run,
        beacon_dir=beacon_lib.folder_for(training.checkpoint_dir) if settings else "",
        beacon_heartbeat=settings.heartbeat_seconds if settings else 0.0,
    )
    return training_step.supervise(
        backend,
        strategy,
        training_step.run_key_for(pipeline_run, cluster_id, run_key, task_name),
        checkpoint_dir=training.checkpoint_dir,
        model_dir=training.model_dir,
        **supervise_options,
    )
