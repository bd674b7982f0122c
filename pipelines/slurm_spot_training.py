"""The ``slurm-spot-training`` pipeline: create the cluster, train on Spot, delete the cluster.

The cluster is deleted by the exit task of a ``dsl.ExitHandler``, so it goes away when training
succeeds, fails or is cancelled. Registration and the keep-or-delete decision by run frequency
come later in the same graph.
"""

from kfp import dsl

from pipelines import cluster_tasks

# No postponed annotations here: kfp reads the pipeline signature types at definition time.
NAME = "slurm-spot-training"
EXIT_GROUP = "train"


def build(components: dict):
    """Builds the pipeline function from a component set (see ``components.catalog``)."""
    train_on_cluster = components["train_on_cluster"]

    @dsl.pipeline(
        name=NAME,
        description="Create a Vertex AI training cluster, train on its Spot partition with "
        "checkpoint resume through the Slurm Job API, then delete the cluster.",
    )
    def slurm_spot_training(
        project: str,
        command: list,
        working_directory: str,
        checkpoint_dir: str,
        model_dir: str,
        location: str = "us-central1",
        cluster_id: str = "vsptrain",
        network: str = "",
        subnetwork: str = "",
        zone: str = "",
        home_directory_storage: str = "",
        machine_type: str = "a3-highgpu-8g",
        accelerator_type: str = "NVIDIA_H100_80GB",
        accelerator_count: int = 8,
        spot_max_nodes: int = 2,
        ondemand_max_nodes: int = 1,
        cluster_spec: dict = {},  # noqa: B006 - a KFP default, never mutated
        environment: dict = {},  # noqa: B006
        nodes: int = 1,
        gpus_per_node: int = 0,
        time_limit_minutes: int = 0,
        max_preemptions: int = 10,
        max_user_failures: int = 0,
        fallback_after_preemptions: int = 5,
        capacity_wait_seconds: float = 3600.0,
        spot_price_per_node_hour: float = 0.0,
        ondemand_price_per_node_hour: float = 0.0,
        poll_seconds: float = 20.0,
    ):
        """Create a training cluster, train on Spot with resume, delete the cluster.

        Args:
            project: Google Cloud project id.
            command: Trainer argv, one list item per argument.
            working_directory: Absolute job directory on the cluster's shared storage.
            checkpoint_dir: Checkpoint directory shared by all attempts.
            model_dir: Directory the trainer writes the final model to.
            location: Vertex AI region.
            cluster_id: Cluster id (1-10 lowercase letters and digits).
            network: VPC network, ``projects/P/global/networks/N``.
            subnetwork: Subnetwork, ``projects/P/regions/R/subnetworks/S``.
            zone: Zone of the node pools.
            home_directory_storage: Filestore/Lustre instance mounted as /home.
            machine_type: GPU machine type of the training pools.
            accelerator_type: Accelerator type of the training pools.
            accelerator_count: Accelerators per training node.
            spot_max_nodes: Maximum nodes of the Spot pool (partition ``spot``).
            ondemand_max_nodes: Maximum nodes of the on-demand pool (partition ``ondemand``);
                0 disables the fallback.
            cluster_spec: Full cluster body; when non-empty it replaces the flat parameters.
            environment: Extra environment variables of the trainer.
            nodes: Nodes per training job.
            gpus_per_node: GPUs per node requested from Slurm (0 = none).
            time_limit_minutes: Slurm time limit per job, minutes (0 = partition default).
            max_preemptions: Preemptions survived before the run fails.
            max_user_failures: Restarts after the trainer itself failed.
            fallback_after_preemptions: Move to ``ondemand`` after this many preemptions.
            capacity_wait_seconds: Longest wait for Spot nodes before falling back, seconds.
            spot_price_per_node_hour: Spot price per node-hour (cost metrics).
            ondemand_price_per_node_hour: On-demand price per node-hour (saving estimate).
            poll_seconds: Longest interval between job state polls, seconds.
        """
        values = dict(locals())
        delete = cluster_tasks.delete_cluster(components, values)
        with dsl.ExitHandler(delete, name=EXIT_GROUP):
            create = cluster_tasks.create_cluster(components, values)
            train = train_on_cluster(
                project=project,
                location=location,
                cluster_id=cluster_id,
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
                max_preemptions=max_preemptions,
                max_user_failures=max_user_failures,
                fallback_after_preemptions=fallback_after_preemptions,
                capacity_wait_seconds=capacity_wait_seconds,
                spot_price_per_node_hour=spot_price_per_node_hour,
                ondemand_price_per_node_hour=ondemand_price_per_node_hour,
                poll_seconds=poll_seconds,
                pipeline_run=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
            )
            train.after(create)
            train.set_display_name("train-on-cluster")

    return slurm_spot_training
