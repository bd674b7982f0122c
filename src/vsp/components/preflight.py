"""KFP component: check the parameters of a run's later steps before anything is created.

A declaration (``vsp.components.declare``): its body hands its parameters to
``vsp.components.runtime.steps.check_run_parameters.main``.
"""

from vsp.components.declare import component


@component
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
    cluster_id: str = "",
    machine_type: str = "a3-highgpu-8g",
    spot_max_nodes: int = 2,
    ondemand_max_nodes: int = 0,
    cluster_spec: dict = {},  # noqa: B006
    shrunk_price_per_hour: float = 0.0,
    scale_up_minutes: float = 10.0,
    check_training: bool = False,
    command: list = [],  # noqa: B006
    working_directory: str = "",
    environment: dict = {},  # noqa: B006
    nodes: int = 1,
    gpus_per_node: int = 0,
    accelerator_type: str = "",
    accelerator_count: int = -1,
    time_limit_minutes: int = 0,
    max_preemptions: int = 10,
    max_user_failures: int = 0,
    fallback_after_preemptions: int = 0,
    capacity_wait_seconds: float = 0.0,
    poll_seconds: float = 20.0,
    spot_price_per_node_hour: float = 0.0,
    ondemand_price_per_node_hour: float = 0.0,
    cluster_options: dict = {},  # noqa: B006
    training_options: dict = {},  # noqa: B006
    model_options: dict = {},  # noqa: B006
    teardown_options: dict = {},  # noqa: B006
    option_names: dict = {},  # noqa: B006
    notify_topic: str = "",
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
        delay_penalty_per_hour: Cost of the next run waiting, USD/hour.
        failure_keep_minutes: Minutes a failed run keeps its cluster for a retry.
        check_checkpoint_dir: Also check ``checkpoint_dir`` (the run trains with checkpoints).
        checkpoint_dir: The training step's checkpoint directory ('' = the default beside
            ``model_dir``, which needs a folder above ``model_dir``).
        price_file: The teardown's price file (JSON or YAML, USD per node-hour), checked
            when given ('' = none).
        location: Vertex AI region of the cluster (the price table's region).
        cluster_id: The Slurm cluster's id, checked as create_cluster checks it ('' = not
            checked).
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
        accelerator_type: Accelerator of the training pools built from the flat parameters
            ('' = not checked); a machine type that does not come with it (or take it) is
            refused unless cluster_spec gives the cluster.
        accelerator_count: Accelerators per node of the training pools built from the flat
            parameters (-1 = unknown); gpus_per_node above it is refused unless cluster_spec
            gives the cluster.
        time_limit_minutes: Slurm time limit per job, minutes (0 = partition default).
        max_preemptions: Preemptions survived before the run fails (0-10000).
        max_user_failures: Restarts after the trainer itself failed (0-1000).
        fallback_after_preemptions: Move to the fallback after this many preemptions (0 = never).
        capacity_wait_seconds: Longest wait for Spot capacity, seconds (0 = no limit).
        poll_seconds: The training step's poll_seconds, checked here, seconds (0.1-3600):
            its Vertex poll interval, and a fifth of its beacon read interval.
        spot_price_per_node_hour: Spot price per node-hour, USD/hour (>= 0).
        ondemand_price_per_node_hour: On-demand price per node-hour, USD/hour (>= 0).
        cluster_options: The pipeline's group of create_cluster parameters (name -> value):
            each name must be in option_names, and the values this step checks (machine
            type, pools, cluster_spec) are checked as if given by name.
        training_options: The same for train_on_cluster's parameters.
        model_options: The same for register_model's parameters (``labels`` is checked as
            model_labels).
        teardown_options: The same for decide_teardown's parameters (``policy`` is checked as
            teardown_policy).
        option_names: Group -> the names it may hold (the pipeline passes them, from its
            components' parameters); a group without an entry is not checked for names.
        notify_topic: The exit task's Pub/Sub topic, ``projects/P/topics/T`` ('' = none).

    Returns:
        True (the step fails with every problem listed otherwise).
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import check_run_parameters

    return check_run_parameters.main(**params)
