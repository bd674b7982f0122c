"""The ``spot-custom-job-training`` pipeline: Spot CustomJobs with resubmission, then registration.

No cluster is needed: train-custom-job resumes from checkpoints across preemptions and
resubmissions, and register-model adds the trained model as a new Model Registry version. Both sit
in a ``dsl.ExitHandler`` whose exit task, finalize-custom-jobs, cancels the run's CustomJobs that
are still queued or running when the run failed or was cancelled (found by their pipeline-run
label).
"""

from kfp import dsl

from vsp.pipelines.definitions import model_tasks, parameters, task_policy

# No postponed annotations here: kfp reads the pipeline signature types at definition time.
NAME = "spot-custom-job-training"
EXIT_GROUP = "train-register"


def build(components: dict):
    """Builds the pipeline function from a component set (see ``components.catalog``)."""
    train_custom_job = components["train_custom_job"]
    finalize_custom_jobs = components["finalize_custom_jobs"]
    training = parameters.defaults(train_custom_job)
    model = parameters.defaults(components["register_model"])

    @dsl.pipeline(
        name=NAME,
        description="Train with Vertex AI CustomJobs on Spot VMs; resubmit after Vertex's six "
        "restarts run out, resuming from checkpoints, with optional fallback to STANDARD; "
        "then register the model as a new Model Registry version.",
    )
    def spot_custom_job_training(
        project: str,
        base_output_directory: str,
        model_id: str,
        serving_image: str,
        location: str = "us-central1",
        display_name: str = "spot-training",
        machine_type: str = "a3-highgpu-8g",
        accelerator_type: str = "NVIDIA_H100_80GB",
        accelerator_count: int = 8,
        container_image: str = training["container_image"],
        command: list = training["command"],
        args: list = training["args"],
        env: dict = training["env"],
        fallback_strategy: str = training["fallback_strategy"],
        max_preemptions: int = training["max_preemptions"],
        fallback_after_preemptions: int = training["fallback_after_preemptions"],
        capacity_wait_seconds: float = training["capacity_wait_seconds"],
        spot_price_per_node_hour: float = training["spot_price_per_node_hour"],
        ondemand_price_per_node_hour: float = training["ondemand_price_per_node_hour"],
        poll_seconds: float = training["poll_seconds"],
        model_display_name: str = model["display_name"],
        version_aliases: list = model["version_aliases"],
        model_labels: dict = model["labels"],
        data_version: str = model["data_version"],
        code_version: str = model["code_version"],
    ):
        """Spot CustomJob training with checkpoint resume, then model registration.

        Args:
            project: Google Cloud project id.
            base_output_directory: gs:// prefix of checkpoints (AIP_CHECKPOINT_DIR) and model;
                ``{run}`` in it becomes the run's id (a folder per run of a schedule: with one
                folder, each run resumes from the final checkpoint of the run before).
            model_id: Model Registry id; a new version is added when the model exists.
            serving_image: Serving container image of the registered model.
            location: Vertex AI region.
            display_name: Display name prefix of the jobs.
            machine_type: Machine type.
            accelerator_type: Accelerator type ('' for none).
            accelerator_count: Accelerators per replica.
            container_image: Training container image.
            command: Container entrypoint.
            args: Container arguments.
            env: Environment variables of the trainer.
            fallback_strategy: STANDARD or FLEX_START to fall back to ('' = stay on Spot).
            max_preemptions: Preemptions survived (Vertex's in-place restarts included).
            fallback_after_preemptions: Fall back after this many preemptions (0 = never).
            capacity_wait_seconds: Longest wait for Spot capacity, seconds (0 = no limit).
            spot_price_per_node_hour: Spot price per node-hour (cost metrics).
            ondemand_price_per_node_hour: On-demand price per node-hour (saving estimate).
            poll_seconds: Longest interval between job state polls, seconds.
            model_display_name: Display name of the model ('' = model_id).
            version_aliases: Aliases of the new model version, e.g. ``["candidate"]``.
            model_labels: Labels of the model version.
            data_version: Training data version, stored on the model version.
            code_version: Training code version (e.g. a commit), stored on the model version.
        """
        values = dict(locals())
        finalize = finalize_custom_jobs(
            project=project, location=location, pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER
        )
        task_policy.apply(finalize, "finalize-custom-jobs")
        with dsl.ExitHandler(finalize, name=EXIT_GROUP):
            train = train_custom_job(
                project=project,
                location=location,
                display_name=display_name,
                base_output_directory=base_output_directory,
                machine_type=machine_type,
                accelerator_type=accelerator_type,
                accelerator_count=accelerator_count,
                container_image=container_image,
                command=command,
                args=args,
                env=env,
                fallback_strategy=fallback_strategy,
                max_preemptions=max_preemptions,
                fallback_after_preemptions=fallback_after_preemptions,
                capacity_wait_seconds=capacity_wait_seconds,
                spot_price_per_node_hour=spot_price_per_node_hour,
                ondemand_price_per_node_hour=ondemand_price_per_node_hour,
                poll_seconds=poll_seconds,
                pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                task_id=dsl.PIPELINE_TASK_ID_PLACEHOLDER,
            )
            task_policy.apply(train, "train-custom-job")
            train.after(model_tasks.check_parameters(components, values, base_output_directory))
            model_tasks.register_model(components, values, train)

    return spot_custom_job_training
