"""KFP components: Spot training as Vertex AI CustomJobs, and their exit task.

Declarations (``vsp.components.declare``): each body hands its parameters to
``vsp.components.runtime.steps.<component>.main``.
"""

from typing import NamedTuple

from kfp import dsl

from vsp.components.declare import component


@component
def train_custom_job(
    project: str,
    location: str,
    display_name: str,
    base_output_directory: str,
    machine_type: str,
    gcp_resources: dsl.OutputPath(str),
    metrics: dsl.Output[dsl.Metrics],
    report: dsl.Output[dsl.HTML],
    container_image: str = "",
    command: list = [],  # noqa: B006 - KFP reads the default; it is never mutated
    args: list = [],  # noqa: B006
    env: dict = {},  # noqa: B006
    python_module: str = "",
    executor_image: str = "",
    package_uris: list = [],  # noqa: B006
    accelerator_type: str = "",
    accelerator_count: int = 0,
    replica_count: int = 1,
    boot_disk_type: str = "pd-ssd",
    boot_disk_size_gb: int = 100,
    service_account: str = "",
    labels: dict = {},  # noqa: B006
    attempt_timeout_seconds: int = 604800,
    restart_job_on_worker_restart: bool = False,
    fallback_strategy: str = "STANDARD",
    max_wait_seconds: int = 0,
    max_preemptions: int = 20,
    max_user_failures: int = 0,
    fallback_after_preemptions: int = 0,
    capacity_wait_seconds: float = 0.0,
    spot_price_per_node_hour: float = 0.0,
    ondemand_price_per_node_hour: float = 0.0,
    timeout_seconds: float = 1209600.0,
    poll_seconds: float = 30.0,
    run_key: str = "",
    pipeline_run: str = "",
    task_id: str = "",
) -> NamedTuple(
    "Outputs",
    [("job_ids", list), ("checkpoint_dir", str), ("model_dir", str), ("preemptions", int)],
):
    """Trains with Vertex AI CustomJobs on Spot VMs, resuming from checkpoints after preemption.

    Vertex restarts a preempted Spot job up to six times and then fails it with a stockout; this
    step then submits a new job with the same ``base_output_directory`` (so the same
    ``AIP_CHECKPOINT_DIR``) within ``max_preemptions``, and can fall back to STANDARD after
    ``fallback_after_preemptions`` preemptions or when Spot capacity does not come within
    ``capacity_wait_seconds``. Job names are written to ``gcp_resources`` before polling and
    jobs carry a run-key label, so a retried step re-attaches. Cancelling the pipeline cancels
    the job.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region.
        display_name: Display name prefix of the jobs.
        base_output_directory: gs:// prefix; the trainer gets ``AIP_CHECKPOINT_DIR`` and
            ``AIP_MODEL_DIR`` under it.
        machine_type: Machine type, e.g. ``a3-highgpu-8g``.
        gcp_resources: Output: the CustomJobs of the run (proto-JSON).
        metrics: Output: preemptions, resubmissions, wall time (s), node-hours, work lost (s),
            goodput (0-1), cost and estimated Spot saving (USD).
        report: Output: HTML report with the timeline of jobs and preemptions.
        container_image: Training container image ('' when python_module is used).
        command: Container entrypoint (empty: the image's).
        args: Container or module arguments.
        env: Environment variables of the trainer.
        python_module: Module run as ``python -m`` (Python package spec).
        executor_image: Executor image of the Python package spec.
        package_uris: gs:// URIs of the Python package(s).
        accelerator_type: Accelerator, e.g. ``NVIDIA_H100_80GB`` ('' for none).
        accelerator_count: Accelerators per replica.
        replica_count: Replicas of the worker pool.
        boot_disk_type: Boot disk type.
        boot_disk_size_gb: Boot disk size, GB.
        service_account: Service account of the jobs ('' = default).
        labels: Labels of the jobs (``vsp-`` keys are reserved).
        attempt_timeout_seconds: Maximum run time of one job, seconds (at most 7 days).
        restart_job_on_worker_restart: Restart the whole job when a worker restarts.
        fallback_strategy: STANDARD or FLEX_START to fall back to ('' = stay on Spot).
        max_wait_seconds: FLEX_START queue wait, seconds (0 = Vertex's default).
        max_preemptions: Preemptions survived (Vertex's in-place restarts included).
        max_user_failures: Restarts after the trainer itself failed.
        fallback_after_preemptions: Fall back after this many preemptions (0 = never).
        capacity_wait_seconds: Longest wait for Spot capacity, seconds (0 = no limit).
        spot_price_per_node_hour: Spot price per node-hour, USD/hour, for the cost metrics.
        ondemand_price_per_node_hour: On-demand price per node-hour, USD/hour, for the saving
            estimate.
        timeout_seconds: Longest time the whole run may take, seconds.
        poll_seconds: Longest interval between job state polls, seconds.
        run_key: Identity of the run's jobs ('' = derived from the pipeline run).
        pipeline_run: The pipeline run's unique id (pass ``dsl.PIPELINE_JOB_ID_PLACEHOLDER``);
            every job is labelled with it, so the exit task finds the run's jobs.
        task_id: This task's unique id (pass ``dsl.PIPELINE_TASK_ID_PLACEHOLDER``); part of
            the derived run key, so two training tasks of one run, and the iterations of a
            ``dsl.ParallelFor``, never share jobs, while a retry of the task re-attaches. The
            checkpoints are under ``base_output_directory``: give each task (and each run that
            must not resume an earlier one) its own; ``{run}`` in it becomes the pipeline
            run's id.

    Returns:
        job_ids: CustomJob ids of every attempt, oldest first.
        checkpoint_dir: ``AIP_CHECKPOINT_DIR`` of the jobs.
        model_dir: ``AIP_MODEL_DIR`` of the jobs.
        preemptions: Preemptions survived.
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import train_custom_job

    return train_custom_job.main(**params)


@component
def finalize_custom_jobs(
    project: str,
    location: str,
    status: dsl.PipelineTaskFinalStatus,
    pipeline_run: str = "",
) -> list:
    """The exit task: cancels the run's CustomJobs still queued or running after a failed or
    cancelled run, so no GPU job is left running on paid capacity.

    Jobs are found by the ``vsp-pipeline-run`` label ``train_custom_job`` puts on every attempt;
    after a success nothing is sent.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region of the jobs.
        status: Final status of the run's tasks (filled in by the pipeline).
        pipeline_run: Pipeline run name (the pipeline passes its unique id).

    Returns:
        Resource names of the jobs cancelled.
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import finalize_custom_jobs

    return finalize_custom_jobs.main(**params)
