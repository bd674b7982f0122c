"""The ``slurm-spot-training`` pipeline: create, train on Spot, register, then keep or delete.

The form is short: the parameters most runs set, and four option groups (``cluster_options``,
``training_options``, ``model_options``, ``teardown_options``) for the rest, each holding
parameters of one component by name (passed to its ``options``; the first step checks every
name and value before anything is created). A parameter that only feeds a component takes
that component's default (``parameters.defaults``).

Graph: check-parameters -> create-cluster -> train-on-cluster -> register-model ->
decide-teardown, then a ``dsl.If``/``dsl.Elif``/``dsl.Else`` on the decision: keep-cluster
(labels with an expiry), shrink-cluster (the same labels, GPU pools scaled to no nodes) or
delete-cluster.
All of it sits in a ``dsl.ExitHandler`` whose exit task, finalize-cluster, runs however the run
ends: after a cancel it deletes the cluster, after a failure it keeps it for a retry with an
expiry (or deletes it), after a success it leaves the decision's result alone.

Why a single component as the exit task rather than a sub-pipeline holding the If/Else: an
exit task cannot consume other tasks' outputs (kfp raises "exit_task cannot depend on any other
tasks"), so the decision cannot feed it anyway, and Vertex AI Pipelines documents exit handlers
with one component as the exit task (the email notification component,
https://cloud.google.com/vertex-ai/docs/pipelines/email-notifications), while a pipeline used as
the exit task (kfp PR https://github.com/kubeflow/pipelines/pull/8220) is not documented for
Vertex. So the visible decision branch is inside the handler, and the exit task is the
documented kind.
"""

from kfp import dsl

from vsp.pipelines.definitions import cluster_tasks, parameters, task_policy

# No postponed annotations here: kfp reads the pipeline signature types at definition time.
NAME = "slurm-spot-training"
EXIT_GROUP = "train-register-teardown"
# With an on-demand pool, training falls back to it after this many preemptions, or after
# this long without Spot capacity (training_options overrides both).
FALLBACK_AFTER_PREEMPTIONS = 5
CAPACITY_WAIT_SECONDS = 3600.0


# Groups of rarely set parameters: pipeline parameter -> the component whose options it fills.
OPTION_GROUPS = {
    "cluster_options": "create_cluster",
    "training_options": "train_on_cluster",
    "model_options": "register_model",
    "teardown_options": "decide_teardown",
}


# What no group may set again, as each component gets it from the pipeline: its own
# parameters (a group value would win silently over the parameter, e.g. training_options'
# command over command), the teardown policy (teardown_policy), the tasks' outputs wired into
# the next task, and the run's placeholders.
TOP_LEVEL = frozenset(
    {
        "project", "location", "cluster_id", "command", "working_directory", "model_dir",
        "model_id", "serving_image", "machine_type", "accelerator_type", "accelerator_count",
        "spot_max_nodes", "nodes", "gpus_per_node", "version_aliases", "schedule_cron",
        "failure_keep_minutes", "notify_topic",
    }
)  # fmt: skip
BOUND = TOP_LEVEL | {"policy", "cluster_name", "job_ids", "preemptions"}
BOUND |= {"pipeline_run", "task_id"}


def build(components: dict):
    """Builds the pipeline function from a component set (see ``components.catalog``)."""
    check_run_parameters = components["check_run_parameters"]
    create_cluster = components["create_cluster"]
    train_on_cluster = components["train_on_cluster"]
    register_model = components["register_model"]
    decide_teardown = components["decide_teardown"]
    keep_cluster = components["keep_cluster"]
    shrink_cluster = components["shrink_cluster"]
    finalize_cluster = components["finalize_cluster"]
    cluster = parameters.defaults(create_cluster)
    training = parameters.defaults(train_on_cluster)
    model = parameters.defaults(register_model)
    teardown = parameters.defaults(decide_teardown)
    exit_task = parameters.defaults(finalize_cluster)
    option_names = {
        group: [n for n in parameters.option_names(components[name]) if n not in BOUND]
        for group, name in OPTION_GROUPS.items()
    }

    @dsl.pipeline(
        name=NAME,
        description="Create (or reuse) a Vertex AI training cluster, train on its Spot partition "
        "with checkpoint resume through the Slurm Job API, register the model as a new Model "
        "Registry version, then keep the cluster warm, shrink it or delete it depending on how "
        "often the pipeline runs.",
    )
    def slurm_spot_training(
        project: str,
        command: list,
        working_directory: str,
        model_dir: str,
        model_id: str,
        serving_image: str,
        location: str = "us-central1",
        cluster_id: str = cluster_tasks.default_cluster_id(NAME),
        machine_type: str = cluster["machine_type"],
        accelerator_type: str = cluster["accelerator_type"],
        accelerator_count: int = cluster["accelerator_count"],
        spot_max_nodes: int = cluster["spot_max_nodes"],
        nodes: int = training["nodes"],
        gpus_per_node: int = 8,
        version_aliases: list = model["version_aliases"],
        teardown_policy: str = teardown["policy"],
        schedule_cron: str = teardown["schedule_cron"],
        failure_keep_minutes: float = exit_task["failure_keep_minutes"],
        notify_topic: str = exit_task["notify_topic"],
        cluster_options: dict = {},  # noqa: B006 - a KFP default, never mutated
        training_options: dict = {},  # noqa: B006
        model_options: dict = {},  # noqa: B006
        teardown_options: dict = {},  # noqa: B006
    ):
        """Create a cluster, train on Spot with resume, register the model, keep, shrink or delete.

        Args:
            project: Google Cloud project id.
            command: Trainer argv, one list item per argument.
            working_directory: Absolute job directory on the cluster's shared storage.
            model_dir: Directory the trainer writes the final model to, on Cloud Storage as
                seen from the cluster: ``/gcs/BUCKET/PATH`` (GCS FUSE) or ``gs://BUCKET/PATH``;
                ``{run}`` in it becomes the run's id (a folder per run of a schedule).
            model_id: Model Registry id; a new version is added when the model exists.
            serving_image: Serving container image of the registered model.
            location: Vertex AI region.
            cluster_id: Cluster id (1-10 lowercase letters and digits); the default is derived
                from the pipeline name, so different pipelines never share a cluster.
            machine_type: GPU machine type of the training pools (default: 8 x H100 80 GB).
            accelerator_type: Accelerator type of the training pools.
            accelerator_count: Accelerators per training node; keep gpus_per_node equal to it.
            spot_max_nodes: Maximum nodes of the Spot pool (partition ``spot``).
            nodes: Nodes per training job.
            gpus_per_node: GPUs per node each Slurm job asks for (``gres/gpu:N``); the default
                8 is every GPU of the default machine, so keep it equal to accelerator_count
                (the first step refuses more than a node has; 0 = none, for CPU pools).
            version_aliases: Aliases of the new model version, e.g. ``["candidate"]``.
            teardown_policy: ``auto`` (keep, shrink or delete by cost), ``keep``, ``shrink``
                (GPU pools scaled to no nodes until the next run) or ``delete``.
            schedule_cron: Cron of the schedule running this pipeline ('' = none; ``vsp
                schedule`` sets it): predicts the next run for the teardown decision.
            failure_keep_minutes: After a failed run, keep the cluster this many minutes for a
                retry (0 = delete it at once); a cancelled run always deletes it.
            notify_topic: Pub/Sub topic ``projects/P/topics/T`` that the exit task sends one
                message to when the run ends (final state, cluster kept until when and its
                keep cost, the model version); '' = no notification.
            cluster_options: More create_cluster parameters by name, e.g.
                ``{"network": "projects/P/global/networks/N", "zone": "us-central1-b",
                "home_directory_storage": "...", "ondemand_max_nodes": 1}`` (see the
                component's reference).
            training_options: More train_on_cluster parameters by name, e.g.
                ``{"max_preemptions": 20, "checkpoint_dir": "/gcs/BUCKET/ckpt/{run}",
                "time_limit_minutes": 240}`` (``{run}``: a folder per run; a fixed folder
                makes each run resume from the one before); staged code goes here too:
                ``{"code_uri": "gs://BUCKET/code.tar.gz", "code_sha256": "..."}`` (``vsp
                submit --code DIR`` fills both). With an on-demand pool
                (``cluster_options.ondemand_max_nodes``), training falls back to it after 5
                preemptions or an hour without Spot capacity unless set here.
            model_options: More register_model parameters by name, e.g.
                ``{"display_name": "...", "labels": {"team": "ml"}, "data_version": "v3"}``.
            teardown_options: More decide_teardown parameters by name, e.g.
                ``{"interval_hours": 24, "price_file": "gs://BUCKET/prices.yaml"}``.
        """
        finalize = finalize_cluster(
            project=project,
            location=location,
            cluster_id=cluster_id,
            failure_keep_minutes=failure_keep_minutes,
            pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            notify_topic=notify_topic,
            model_id=model_id,
        )
        task_policy.apply(finalize, "finalize-cluster")
        with dsl.ExitHandler(finalize, name=EXIT_GROUP):
            check = check_run_parameters(
                model_id=model_id,
                serving_image=serving_image,
                model_dir=model_dir,
                version_aliases=version_aliases,
                check_teardown=True,
                teardown_policy=teardown_policy,
                schedule_cron=schedule_cron,
                failure_keep_minutes=failure_keep_minutes,
                check_checkpoint_dir=True,
                location=location,
                cluster_id=cluster_id,
                machine_type=machine_type,
                spot_max_nodes=spot_max_nodes,
                check_training=True,
                command=command,
                working_directory=working_directory,
                nodes=nodes,
                gpus_per_node=gpus_per_node,
                accelerator_type=accelerator_type,
                accelerator_count=accelerator_count,
                fallback_after_preemptions=FALLBACK_AFTER_PREEMPTIONS,
                capacity_wait_seconds=CAPACITY_WAIT_SECONDS,
                cluster_options=cluster_options,
                training_options=training_options,
                model_options=model_options,
                teardown_options=teardown_options,
                option_names=option_names,
                notify_topic=notify_topic,
            )
            task_policy.apply(check, "check-parameters")
            create = create_cluster(
                project=project,
                location=location,
                cluster_id=cluster_id,
                machine_type=machine_type,
                accelerator_type=accelerator_type,
                accelerator_count=accelerator_count,
                spot_max_nodes=spot_max_nodes,
                pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                options=cluster_options,
            )
            task_policy.apply(create, "create-cluster")
            create.after(check)
            # The cluster's name from create-cluster: a data dependency, so training waits
            # for the cluster without an .after().
            train = train_on_cluster(
                project=project,
                location=location,
                cluster_name=create.outputs["cluster_name"],
                command=command,
                working_directory=working_directory,
                model_dir=model_dir,
                spot_partition="spot",
                fallback_partition="ondemand",
                nodes=nodes,
                gpus_per_node=gpus_per_node,
                fallback_after_preemptions=FALLBACK_AFTER_PREEMPTIONS,
                capacity_wait_seconds=CAPACITY_WAIT_SECONDS,
                pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                task_id=dsl.PIPELINE_TASK_ID_PLACEHOLDER,
                options=training_options,
            )
            task_policy.apply(train, "train-on-cluster")
            register = register_model(
                project=project,
                location=location,
                model_id=model_id,
                serving_image=serving_image,
                version_aliases=version_aliases,
                model_dir=train.outputs["model_dir"],
                job_ids=train.outputs["job_ids"],
                preemptions=train.outputs["preemptions"],
                pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                code_sha256=train.outputs["code_sha256"],
                options=model_options,
            )
            task_policy.apply(register, "register-model")
            decide = decide_teardown(
                project=project,
                location=location,
                cluster_id=cluster_id,
                policy=teardown_policy,
                schedule_cron=schedule_cron,
                pipeline_name=NAME,
                pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                options=teardown_options,
            )
            decide.after(register)
            task_policy.apply(decide, "decide-teardown")
            with dsl.If(decide.outputs["action"] == "keep", name="keep-warm"):
                keep = keep_cluster(
                    project=project,
                    location=location,
                    cluster_id=cluster_id,
                    labels=decide.outputs["labels"],
                    pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                )
                task_policy.apply(keep, "keep-cluster")
            with dsl.Elif(decide.outputs["action"] == "shrink", name="shrink-gpu-pools"):
                shrink = shrink_cluster(
                    project=project,
                    location=location,
                    cluster_id=cluster_id,
                    labels=decide.outputs["labels"],
                    pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                )
                task_policy.apply(shrink, "shrink-cluster")
            with dsl.Else(name="delete-now"):
                cluster_tasks.delete_cluster(
                    components,
                    {"project": project, "location": location, "cluster_id": cluster_id},
                )

    return slurm_spot_training
