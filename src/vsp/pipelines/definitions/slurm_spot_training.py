"""The ``slurm-spot-training`` pipeline: create, train on Spot, register, then keep or delete.

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

from vsp.pipelines.definitions import cluster_tasks, model_tasks, task_policy

# No postponed annotations here: kfp reads the pipeline signature types at definition time.
NAME = "slurm-spot-training"
EXIT_GROUP = "train-register-teardown"


def build(components: dict):
    """Builds the pipeline function from a component set (see ``components.catalog``)."""
    train_on_cluster = components["train_on_cluster"]
    decide_teardown = components["decide_teardown"]
    keep_cluster = components["keep_cluster"]
    shrink_cluster = components["shrink_cluster"]
    finalize_cluster = components["finalize_cluster"]

    @dsl.pipeline(
        name=NAME,
        description="Create (or reuse) a Vertex AI training cluster, train on its Spot partition "
        "with checkpoint resume through the Slurm Job API, register the model as a new Model "
        "Registry version, then keep the cluster warm or delete it depending on how often the "
        "pipeline runs.",
    )
    def slurm_spot_training(
        project: str,
        command: list,
        working_directory: str,
        model_dir: str,
        model_id: str,
        serving_image: str,
        checkpoint_dir: str = "",
        location: str = "us-central1",
        cluster_id: str = cluster_tasks.default_cluster_id(NAME),
        network: str = "",
        subnetwork: str = "",
        zone: str = "",
        home_directory_storage: str = "",
        machine_type: str = "a3-highgpu-8g",
        accelerator_type: str = "NVIDIA_H100_80GB",
        accelerator_count: int = 8,
        spot_max_nodes: int = 2,
        ondemand_max_nodes: int = 0,
        cluster_spec: dict = {},  # noqa: B006 - a KFP default, never mutated
        environment: dict = {},  # noqa: B006
        nodes: int = 1,
        gpus_per_node: int = 8,
        time_limit_minutes: int = 0,
        log_directory: str = "",
        max_preemptions: int = 10,
        max_user_failures: int = 0,
        fallback_after_preemptions: int = 5,
        capacity_wait_seconds: float = 3600.0,
        spot_price_per_node_hour: float = 0.0,
        ondemand_price_per_node_hour: float = 0.0,
        poll_seconds: float = 20.0,
        model_display_name: str = "",
        version_aliases: list = [],  # noqa: B006
        model_labels: dict = {},  # noqa: B006
        data_version: str = "",
        code_version: str = "",
        teardown_policy: str = "auto",
        schedule_cron: str = "",
        interval_hours: float = 0.0,
        idle_price_per_hour: float = 0.0,
        provisioning_minutes: float = 20.0,
        provisioning_price_per_hour: float = 0.0,
        delay_penalty_per_hour: float = 10.0,
        failure_keep_minutes: float = 60.0,
        price_file: str = "",
        storage_price_per_hour: float = 0.0,
        shrunk_price_per_hour: float = 0.0,
        scale_up_minutes: float = 10.0,
    ):
        """Create a cluster, train on Spot with resume, register the model, keep, shrink or delete.

        Args:
            project: Google Cloud project id.
            command: Trainer argv, one list item per argument.
            working_directory: Absolute job directory on the cluster's shared storage.
            model_dir: Directory the trainer writes the final model to, on Cloud Storage as
                seen from the cluster: ``/gcs/BUCKET/PATH`` (GCS FUSE) or ``gs://BUCKET/PATH``.
            model_id: Model Registry id; a new version is added when the model exists.
            serving_image: Serving container image of the registered model.
            checkpoint_dir: Checkpoint directory shared by all attempts ('' = on Cloud Storage,
                ``checkpoints/RUN_KEY`` in the folder holding model_dir, where the training step
                can read when each checkpoint was written to measure work lost and goodput).
            location: Vertex AI region.
            cluster_id: Cluster id (1-10 lowercase letters and digits); the default is derived
                from the pipeline name, so different pipelines never share a cluster.
            network: VPC network, ``projects/P/global/networks/N``.
            subnetwork: Subnetwork, ``projects/P/regions/R/subnetworks/S``.
            zone: Zone of the node pools.
            home_directory_storage: Filestore/Lustre instance mounted as /home.
            machine_type: GPU machine type of the training pools (default: 8 x H100 80 GB).
            accelerator_type: Accelerator type of the training pools.
            accelerator_count: Accelerators per training node; keep gpus_per_node equal to it.
            spot_max_nodes: Maximum nodes of the Spot pool (partition ``spot``).
            ondemand_max_nodes: Nodes of an on-demand fallback pool (partition ``ondemand``),
                billed at the on-demand price whenever they exist; 0 (the default) = no
                fallback pool, training stays on Spot.
            cluster_spec: Full cluster body; when non-empty it replaces the flat parameters.
            environment: Extra environment variables of the trainer.
            nodes: Nodes per training job.
            gpus_per_node: GPUs per node each Slurm job asks for (``gres/gpu:N``); the default
                8 is every GPU of the default machine, so keep it equal to accelerator_count
                (the first step refuses more than a node has; 0 = none, for CPU pools).
            time_limit_minutes: Slurm time limit per job, minutes (0 = partition default).
            log_directory: Folder of the jobs' stdout as the cluster sees it ('' = the working
                directory); on Cloud Storage (``/gcs/BUCKET/PATH``) the training step shows
                the trainer's log lines while it runs.
            max_preemptions: Preemptions survived before the run fails.
            max_user_failures: Restarts after the trainer itself failed.
            fallback_after_preemptions: Move to ``ondemand`` after this many preemptions (only
                with an on-demand pool, see ondemand_max_nodes).
            capacity_wait_seconds: Longest wait for Spot nodes before falling back to
                ``ondemand`` (with an on-demand pool), seconds.
            spot_price_per_node_hour: Spot price per node-hour (cost metrics).
            ondemand_price_per_node_hour: On-demand price per node-hour (saving estimate).
            poll_seconds: Interval of Vertex polls of the job's state, seconds, when the job's
                progress beacon is not visible; with the beacon (checkpoints on Cloud Storage) the
                step reads it every poll_seconds / 4 and calls Vertex on its changes and at least
                every 12 x poll_seconds.
            model_display_name: Display name of the model ('' = model_id).
            version_aliases: Aliases of the new model version, e.g. ``["candidate"]``.
            model_labels: Labels of the model version.
            data_version: Training data version, stored on the model version.
            code_version: Training code version (e.g. a commit), stored on the model version.
            teardown_policy: ``auto`` (keep, shrink or delete by cost), ``keep``, ``shrink``
                (GPU pools scaled to no nodes until the next run) or ``delete``.
            schedule_cron: Cron of the schedule running this pipeline ('' = none; ``vsp
                schedule`` sets it): predicts the next run for the teardown decision.
            interval_hours: Expected hours between runs when there is no cron (0 = measure
                the cadence of earlier runs).
            idle_price_per_hour: Cost per hour of the idle cluster, USD/hour (0 = its node
                pools priced from the price table and price_file).
            provisioning_minutes: Minutes a new cluster takes to provision.
            provisioning_price_per_hour: Cost per hour while provisioning, USD/hour (0 = the
                same pools' price).
            delay_penalty_per_hour: Cost per hour the next run waits for a new cluster.
            failure_keep_minutes: After a failed run, keep the cluster this long for a retry
                (0 = delete it at once); a cancelled run always deletes it.
            price_file: JSON or YAML prices (USD per node-hour by machine type and
                provisioning model) over the price table: a path or gs:// URI ('' = none).
            storage_price_per_hour: Home storage cost added to a derived idle price, USD/hour.
            shrunk_price_per_hour: Cost per hour of the cluster with its GPU pools at no nodes,
                USD/hour (0 = the login pool's price plus storage_price_per_hour when the idle
                price is derived; with an explicit idle price, 0 = shrinking not weighed).
            scale_up_minutes: Minutes a shrunk cluster's GPU pools take to come back.
        """
        values = dict(locals())
        finalize = finalize_cluster(
            project=project,
            location=location,
            cluster_id=cluster_id,
            failure_keep_minutes=failure_keep_minutes,
            pipeline_run=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
        )
        task_policy.apply(finalize, "finalize-cluster")
        with dsl.ExitHandler(finalize, name=EXIT_GROUP):
            check = model_tasks.check_parameters(components, values, model_dir)
            create = cluster_tasks.create_cluster(components, values)
            create.after(check)
            # The cluster's name from create-cluster: a data dependency, so training waits
            # for the cluster without an .after().
            train = train_on_cluster(
                project=project,
                location=location,
                cluster_name=create.outputs["cluster_name"],
                command=command,
                working_directory=working_directory,
                checkpoint_dir=checkpoint_dir,
                model_dir=model_dir,
                spot_partition="spot",
                fallback_partition="ondemand",
                environment=environment,
                nodes=nodes,
                gpus_per_node=gpus_per_node,
                time_limit_minutes=time_limit_minutes,
                log_directory=log_directory,
                max_preemptions=max_preemptions,
                max_user_failures=max_user_failures,
                fallback_after_preemptions=fallback_after_preemptions,
                capacity_wait_seconds=capacity_wait_seconds,
                spot_price_per_node_hour=spot_price_per_node_hour,
                ondemand_price_per_node_hour=ondemand_price_per_node_hour,
                poll_seconds=poll_seconds,
                pipeline_run=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
                task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
            )
            task_policy.apply(train, "train-on-cluster")
            register = model_tasks.register_model(components, values, train)
            decide = decide_teardown(
                project=project,
                location=location,
                cluster_id=cluster_id,
                policy=teardown_policy,
                schedule_cron=schedule_cron,
                interval_hours=interval_hours,
                idle_price_per_hour=idle_price_per_hour,
                provisioning_minutes=provisioning_minutes,
                provisioning_price_per_hour=provisioning_price_per_hour,
                delay_penalty_per_hour=delay_penalty_per_hour,
                pipeline_name=NAME,
                price_file=price_file,
                storage_price_per_hour=storage_price_per_hour,
                shrunk_price_per_hour=shrunk_price_per_hour,
                scale_up_minutes=scale_up_minutes,
            )
            decide.after(register)
            task_policy.apply(decide, "decide-teardown")
            with dsl.If(decide.outputs["action"] == "keep", name="keep-warm"):
                keep = keep_cluster(
                    project=project,
                    location=location,
                    cluster_id=cluster_id,
                    labels=decide.outputs["labels"],
                )
                task_policy.apply(keep, "keep-cluster")
            with dsl.Elif(decide.outputs["action"] == "shrink", name="shrink-gpu-pools"):
                shrink = shrink_cluster(
                    project=project,
                    location=location,
                    cluster_id=cluster_id,
                    labels=decide.outputs["labels"],
                    pipeline_run=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
                )
                task_policy.apply(shrink, "shrink-cluster")
            with dsl.Else(name="delete-now"):
                cluster_tasks.delete_cluster(components, values)

    return slurm_spot_training
