"""KFP component: check the parameters of a run's later steps before anything is created.

A component declaration (see ``components.cluster`` for the rules these follow); the work is in
``vsp.components.runtime.registry.preflight``.
"""


def check_run_parameters(
    model_id: str,
    serving_image: str,
    model_dir: str,
    version_aliases: list = [],  # noqa: B006 - KFP reads the default; it is never mutated
    model_labels: dict = {},  # noqa: B006
    check_teardown: bool = False,
    teardown_policy: str = "auto",
    schedule_cron: str = "",
    interval_hours: float = 0.0,
    idle_price_per_hour: float = 0.0,
    provisioning_minutes: float = 20.0,
    provisioning_price_per_hour: float = 0.0,
    delay_penalty_per_hour: float = 10.0,
    failure_keep_minutes: float = 60.0,
    check_checkpoint_dir: bool = False,
    checkpoint_dir: str = "",
    price_file: str = "",
    location: str = "us-central1",
    machine_type: str = "a3-highgpu-8g",
    spot_max_nodes: int = 2,
    ondemand_max_nodes: int = 1,
    cluster_spec: dict = {},  # noqa: B006
    shrunk_price_per_hour: float = 0.0,
    scale_up_minutes: float = 10.0,
    check_training: bool = False,
    command: list = [],  # noqa: B006
    working_directory: str = "",
    environment: dict = {},  # noqa: B006
    nodes: int = 1,
    gpus_per_node: int = 0,
    time_limit_minutes: int = 0,
    max_preemptions: int = 10,
    max_user_failures: int = 0,
    fallback_after_preemptions: int = 0,
    capacity_wait_seconds: float = 0.0,
    poll_seconds: float = 20.0,
    spot_price_per_node_hour: float = 0.0,
    ondemand_price_per_node_hour: float = 0.0,
) -> bool:
    """Fails fast, before any cluster or job exists, on parameters a later step would refuse.

    Registration and the teardown decision run after training; their parameters (model id,
    serving image, aliases, labels, where the model is written, teardown policy, cron, prices)
    are checked here with the same rules, and every problem is reported at once.

    Args:
        model_id: Model Registry id the run will register into.
        serving_image: Serving container image of the model.
        model_dir: Where the model will be written: ``gs://BUCKET/PATH`` or ``/gcs/BUCKET/PATH``.
        version_aliases: Aliases the new version will get.
        model_labels: Labels the new version will get.
        check_teardown: Also check the teardown parameters below.
        teardown_policy: ``auto``, ``keep``, ``shrink`` or ``delete``.
        schedule_cron: The schedule's cron ('' = none).
        interval_hours: Expected hours between runs (0 = unknown).
        idle_price_per_hour: Idle cluster cost, USD/hour (0 = priced from the cluster).
        provisioning_minutes: Cluster provisioning time, minutes.
        provisioning_price_per_hour: Cost while provisioning, USD/hour (0 = from the cluster).
        delay_penalty_per_hour: Cost of the next run waiting, currency/hour.
        failure_keep_minutes: Minutes a failed run keeps its cluster for a retry.
        check_checkpoint_dir: Also check ``checkpoint_dir`` (the run trains with checkpoints).
        checkpoint_dir: The training step's checkpoint directory ('' = the default beside
            ``model_dir``, which needs a folder above ``model_dir``).
        price_file: The teardown's price file (JSON or YAML, USD per node-hour), checked
            when given ('' = none).
        location: Vertex AI region of the cluster (the price table's region).
        machine_type: GPU machine type of the cluster's Spot and on-demand pools.
        spot_max_nodes: Nodes of the Spot pool.
        ondemand_max_nodes: Nodes of the on-demand pool.
        cluster_spec: Full cluster body when the run gives one instead of the flat
            parameters ({} = built from them). With an idle or provisioning price of 0 the
            cluster is priced now, so a machine without a price fails before anything exists.
        shrunk_price_per_hour: Cost of the cluster with its GPU pools at no nodes, USD/hour
            (0 = derived, or not weighed).
        scale_up_minutes: Minutes a shrunk cluster's GPU pools take to come back.
        check_training: Also check the training step's parameters below, with the bounds and
            rules the training step applies.
        command: Trainer argv, one list item per argument.
        working_directory: Absolute job directory on the cluster's shared storage.
        environment: Extra environment variables of the trainer (names checked).
        nodes: Nodes per training job (1-1024).
        gpus_per_node: GPUs per node requested from Slurm (0-16).
        time_limit_minutes: Slurm time limit per job, minutes (0 = partition default).
        max_preemptions: Preemptions survived before the run fails (0-10000).
        max_user_failures: Restarts after the trainer itself failed (0-1000).
        fallback_after_preemptions: Move to the fallback after this many preemptions (0 = never).
        capacity_wait_seconds: Longest wait for Spot capacity, seconds (0 = no limit).
        poll_seconds: Longest interval between job state polls, seconds (0.1-3600).
        spot_price_per_node_hour: Spot price per node-hour, currency/hour (>= 0).
        ondemand_price_per_node_hour: On-demand price per node-hour, currency/hour (>= 0).

    Returns:
        True (the step fails with every problem listed otherwise).
    """
    from vsp.components.runtime.cluster import builder as cluster_builder
    from vsp.components.runtime.core import step
    from vsp.components.runtime.registry import preflight
    from vsp.components.runtime.teardown import decision as teardown
    from vsp.components.runtime.training import options_check

    def check() -> bool:
        inputs = None
        if check_teardown:
            inputs = teardown.component_inputs(
                policy=teardown_policy,
                schedule_cron=schedule_cron,
                interval_hours=interval_hours,
                idle_price_per_hour=idle_price_per_hour,
                provisioning_minutes=provisioning_minutes,
                provisioning_price_per_hour=provisioning_price_per_hour,
                delay_penalty_per_hour=delay_penalty_per_hour,
                shrunk_price_per_hour=shrunk_price_per_hour,
                scale_up_minutes=scale_up_minutes,
            )
        cluster = None
        if check_teardown and 0 in (idle_price_per_hour, provisioning_price_per_hour):
            cluster = (
                dict(cluster_spec)
                or cluster_builder.build_cluster_spec(
                    machine_type=machine_type,
                    spot_max_nodes=spot_max_nodes,
                    ondemand_max_nodes=ondemand_max_nodes,
                    validate=False,  # create_cluster validates the spec itself
                ).to_request_body()
            )
        training = {}
        if check_training:
            training = options_check.component_params(
                {
                    "command": command, "working_directory": working_directory,
                    "environment": environment, "nodes": nodes, "gpus_per_node": gpus_per_node,
                    "time_limit_minutes": time_limit_minutes, "max_preemptions": max_preemptions,
                    "max_user_failures": max_user_failures,
                    "fallback_after_preemptions": fallback_after_preemptions,
                    "capacity_wait_seconds": capacity_wait_seconds, "poll_seconds": poll_seconds,
                    "spot_price_per_node_hour": spot_price_per_node_hour,
                    "ondemand_price_per_node_hour": ondemand_price_per_node_hour,
                }
            )  # fmt: skip
        preflight.check_run(
            {
                "model_id": model_id,
                "serving_image": serving_image,
                "model_dir": model_dir,
                "version_aliases": list(version_aliases),
                "labels": dict(model_labels),
            },
            inputs,
            failure_keep_minutes=failure_keep_minutes,
            price_file=price_file,
            cluster=cluster,
            location=location,
            training=training,
            **({"checkpoint_dir": checkpoint_dir} if check_checkpoint_dir else {}),
        )
        return True

    return step.run_step("check_run_parameters", check)
