"""The ``train_on_cluster`` step: Spot training on a Slurm training cluster.

Builds the Slurm backend and the recovery strategy from the component's parameters and runs the
shared supervisor (``driver.supervise``), which also writes the metrics and the report.
``main`` is the component's entry; ``train_on_cluster`` the same work from a typed spec.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from vsp.components.runtime.cluster import claims, names, resource
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.core import errors, gcs_paths, param_rules, rest, run_identity, step
from vsp.components.runtime.slurm import api, job_checks
from vsp.components.runtime.slurm import launcher as launchers
from vsp.components.runtime.trainer import manifests
from vsp.components.runtime.training import (
    beacon,
    code_check,
    driver,
    hang,
    job_logs,
    options_check,
    progress_feed,
)
from vsp.components.runtime.training.backends import slurm

log = logging.getLogger(__name__)

# How long the claim after training waits for a cluster another run is updating, seconds.
_CLAIM_WAIT_SECONDS = 120.0


@step.accepts_options
def main(
    *,
    project: str,
    location: str,
    command: list,
    working_directory: str,
    model_dir: str,
    gcp_resources: str,
    metrics: Any,
    report: Any,
    cluster_name: str,
    cluster_id: str,
    checkpoint_dir: str,
    spot_partition: str,
    fallback_partition: str,
    environment: dict,
    nodes: int,
    tasks_per_node: int,
    gpus_per_node: int,
    time_limit_minutes: int,
    account: str,
    log_directory: str,
    max_preemptions: int,
    max_user_failures: int,
    fallback_after_preemptions: int,
    capacity_wait_seconds: float,
    warning_seconds: int,
    spot_price_per_node_hour: float,
    ondemand_price_per_node_hour: float,
    timeout_seconds: float,
    poll_seconds: float,
    run_key: str,
    pipeline_run: str,
    task_id: str,
    code_uri: str = "",
    code_sha256: str = "",
    code_cache_dir: str = "",
    container_image: str = "",
    max_hangs: int = 1,
    hang_floor_seconds: float = 1800.0,
    hang_step_factor: float = 20.0,
    keep_job_on_timeout: bool = False,
    launcher: str = "none",
    nccl_env_file: str = launchers.DEFAULT_NCCL_ENV_FILE,
    progress_topic: str = "",
) -> tuple[list, str, str, int, str]:
    """The component's entry: its parameters in, its outputs out (see the component).

    Returns:
        ``(job_ids, checkpoint_dir, model_dir, preemptions, code_sha256)``.
    """
    report.metadata["title"] = "Spot training report"
    chosen = {}

    def run() -> driver.TrainOutcome:
        # Every parameter checked (types, bounds, names) before anything is submitted.
        options_check.check_training(
            command=command, environment=environment, working_directory=working_directory,
            nodes=nodes, gpus_per_node=gpus_per_node, time_limit_minutes=time_limit_minutes,
            max_preemptions=max_preemptions, max_user_failures=max_user_failures,
            fallback_after_preemptions=fallback_after_preemptions,
            capacity_wait_seconds=capacity_wait_seconds, poll_seconds=poll_seconds,
            timeout_seconds=timeout_seconds, spot_price_per_node_hour=spot_price_per_node_hour,
            ondemand_price_per_node_hour=ondemand_price_per_node_hour, max_hangs=max_hangs,
            hang_floor_seconds=hang_floor_seconds, hang_step_factor=hang_step_factor,
        )  # fmt: skip
        launch = []
        job_checks.launch_problems(
            launcher,
            nccl_env_file,
            lambda *p: launch.append(errors.SpecProblem(*p)),
            container_image=container_image,
        )
        if (bad := param_rules.pubsub_topic(progress_topic)) is not None:
            launch.append(errors.SpecProblem("progress_topic", progress_topic, *bad))
        if launch:
            raise errors.SpecValidationError("train_on_cluster", launch)
        code = code_check.resolve(code_uri, code_sha256, code_cache_dir)
        chosen["code_sha256"] = code.sha256 if code else ""
        cluster = names.resolve_cluster_id(location, cluster_id, cluster_name)
        run = run_identity.ensure(pipeline_run, "train_on_cluster")
        key = driver.run_key_for(run, cluster, run_key, task_id)
        chosen["model_dir"] = run_identity.expand_run_token(model_dir, run)
        chosen["checkpoint_dir"] = run_identity.expand_run_token(
            checkpoint_dir, run
        ) or manifests.default_checkpoint_dir(chosen["model_dir"], key)
        log_folder = run_identity.expand_run_token(log_directory, run)
        logs = str(gcs_paths.to_local_path(log_folder)) if log_folder else ""
        output = f"{logs.rstrip('/')}/{job_logs.FILE_PATTERN}" if logs else None  # as FUSE path
        training = slurm.SlurmTraining(
            command=list(command),
            working_directory=run_identity.expand_run_token(working_directory, run),
            checkpoint_dir=chosen["checkpoint_dir"],
            model_dir=chosen["model_dir"],
            environment=dict(environment),
            nodes=nodes,
            tasks_per_node=tasks_per_node,
            gpus_per_node=gpus_per_node,
            time_limit_minutes=time_limit_minutes or None,
            account=account or None,
            standard_output=output,
            warning_seconds=warning_seconds,
            code=code,
            container_image=container_image,
            launcher=launcher,
            nccl_env_file=nccl_env_file,
        )
        return train_on_cluster(
            project=project,
            location=location,
            cluster_id=cluster,
            training=training,
            spot_partition=spot_partition,
            fallback_partition=fallback_partition,
            max_preemptions=max_preemptions,
            max_user_failures=max_user_failures,
            fallback_after_preemptions=fallback_after_preemptions,
            capacity_wait_seconds=capacity_wait_seconds,
            run_key=key,
            pipeline_run=run,
            task_id=task_id,
            max_hangs=max_hangs,
            hang_rule=hang.HangRule(hang_floor_seconds, hang_step_factor),
            keep_job_on_timeout=keep_job_on_timeout,
            progress_topic=progress_topic,
            **driver.component_options(
                spot_price=spot_price_per_node_hour,
                ondemand_price=ondemand_price_per_node_hour,
                poll_seconds=poll_seconds,
                timeout_seconds=timeout_seconds,
                gcp_resources_path=gcp_resources,
                report_path=report.path,
            ),
        )

    outcome = step.run_step("train_on_cluster", run)
    driver.publish_metrics(outcome, metrics)
    result = outcome.result
    return (
        result.job_ids,
        chosen["checkpoint_dir"],
        chosen["model_dir"],
        result.preemptions,
        chosen["code_sha256"],
    )


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
    training: slurm.SlurmTraining,
    spot_partition: str,
    fallback_partition: str = "",
    max_preemptions: int = 10,
    max_user_failures: int = 0,
    fallback_after_preemptions: int = 0,
    capacity_wait_seconds: float = 0.0,
    run_key: str = "",
    pipeline_run: str = "",
    task_id: str = "",
    max_hangs: int = 1,
    progress_topic: str = "",
    feed_settings: progress_feed.FeedSettings | None = None,
    **supervise_options: Any,
) -> driver.TrainOutcome:
    """Spot training as Slurm jobs on a training cluster; see ``driver.supervise``.

    Staged code is read back and its sha256 checked, and a container image checked against
    the cluster, before any job is submitted (``code_check``). With ``progress_topic`` (and a
    poll plan) the jobs publish their state changes there and the step waits on them
    (``progress_feed``, pulled as ``feed_settings`` say).
    """
    if not training.command:
        raise errors.UserError("command is empty. Fix: give the trainer's argv as a list.")
    if not (training.checkpoint_dir or "").strip():
        raise errors.UserError(
            "checkpoint_dir is empty: the trainer would neither save nor resume, so a "
            "preemption would restart training from step 0. Fix: give a directory every "
            "attempt can reach (the component's '' picks one on Cloud Storage beside model_dir)."
        )
    pipeline_run = run_identity.ensure(pipeline_run, "train_on_cluster")
    settings = supervise_options.get("poll_settings")
    beacon_dir = beacon.folder_for(training.checkpoint_dir) if settings else ""
    key = driver.run_key_for(pipeline_run, cluster_id, run_key, task_id)
    feed = None
    if progress_topic:  # checked before any call
        feed = progress_feed.ProgressFeed(
            progress_topic, key, location, feed_settings or progress_feed.FeedSettings()
        )
        if not beacon_dir:
            log.warning(
                "progress_topic is not used: the step waits on the job's messages between the "
                "looks of its poll plan, which needs the checkpoints on Cloud Storage (gs:// or "
                "/gcs/); with checkpoint_dir %s it polls Vertex every poll_seconds",
                training.checkpoint_dir,
            )
            feed = None
    ref = resource.ClusterRef(project, location, cluster_id)
    vertex = rest.VertexRestClient(location)
    client = api.SlurmClient(vertex, ref)
    notes = []
    if training.code is not None:
        code_check.verify(training.code)
        log.info("code %s: sha256 %s checked", training.code.uri, training.code.sha256)
        notes.append(("Code", f"{training.code.uri} (sha256 {training.code.sha256})"))
    cluster = resource.ClusterResource(vertex, ref).get()
    if cluster is None:
        raise errors.UserError(
            f"cluster {ref.name} does not exist, so no job can be submitted to it. If an earlier "
            "step of this run created or reused it, it was deleted since (another run's "
            "teardown, the reaper, or by hand: `vsp clusters list` shows the survivors; its "
            "deletion is in the project's audit log). Fix: check cluster_id (or cluster_name) "
            "and location, or create the cluster first (create_cluster, whose cluster_name "
            "output makes this step wait for it)."
        )
    if training.container_image:
        code_check.check_container(training.container_image, cluster, cluster_id)
        notes.append(("Container image", training.container_image))
    if fallback_partition:
        fallback_partition = fallback_if_present(cluster, fallback_partition)
    targets = slurm.targets(spot_partition, fallback_partition)
    strategy = driver.spot_strategy(
        targets,
        max_preemptions=max_preemptions,
        max_user_failures=max_user_failures,
        fallback_after_preemptions=fallback_after_preemptions,
        capacity_wait_seconds=capacity_wait_seconds,
        max_hangs=max_hangs,
    )
    backend = slurm.SlurmBackend(
        client,
        training,
        targets,
        pipeline_run=pipeline_run,
        beacon_dir=beacon_dir,
        beacon_heartbeat=settings.heartbeat_seconds if settings else 0.0,
        cache_seconds=settings.cache_seconds if settings else 0.0,
        progress_env=feed.environment() if feed else None,
    )
    # The run's jobs have ended, so none protects the cluster until its next step: claim it.
    claim = functools.partial(
        claims.renew_claim,
        vertex,
        ref,
        pipeline_run,
        why="until the run's next step or its teardown",
        options=resource.ClusterOptions(timeout=_CLAIM_WAIT_SECONDS),
        settle=False,  # two calls: the step's per-job-hour count stays its polls'
    )
    return driver.supervise(
        backend,
        strategy,
        key,
        progress_feed=feed,
        checkpoint_dir=training.checkpoint_dir,
        model_dir=training.model_dir,
        report_notes=notes,
        on_success=claim,
        **supervise_options,
    )
