"""The ``cluster-lifecycle`` pipeline: create a training cluster, delete it in an exit handler.

The delete task is the exit task of a ``dsl.ExitHandler`` so it runs whether the steps inside
succeed, fail or are cancelled. An exit task may not consume another task's output (kfp raises
``exit_task cannot depend on any other tasks``), so the cluster id is a pipeline parameter that
both tasks receive.
"""

from kfp import dsl

from vsp.pipelines.definitions import cluster_tasks, parameters

# No postponed annotations here: kfp reads the pipeline signature types at definition time.
NAME = "cluster-lifecycle"
EXIT_GROUP = "create-and-use"


def build(components: dict):
    """Builds the pipeline function from a component set (see ``components.catalog``)."""
    cluster = parameters.defaults(components["create_cluster"])

    @dsl.pipeline(
        name=NAME,
        description="Create a Vertex AI training cluster (managed Slurm), then delete it, "
        "also when a step fails.",
    )
    def cluster_lifecycle(
        project: str,
        location: str = "us-central1",
        cluster_id: str = cluster_tasks.default_cluster_id(NAME),
        network: str = cluster["network"],
        subnetwork: str = cluster["subnetwork"],
        zone: str = cluster["zone"],
        home_directory_storage: str = cluster["home_directory_storage"],
        machine_type: str = cluster["machine_type"],
        accelerator_type: str = cluster["accelerator_type"],
        accelerator_count: int = cluster["accelerator_count"],
        spot_max_nodes: int = cluster["spot_max_nodes"],
        ondemand_max_nodes: int = cluster["ondemand_max_nodes"],
        cluster_spec: dict = cluster["cluster_spec"],
        timeout_seconds: float = cluster["timeout_seconds"],
    ):
        """Create a training cluster, then delete it.

        Args:
            project: Google Cloud project id.
            location: Vertex AI region.
            cluster_id: Cluster id (1-10 lowercase letters and digits); the default is derived
                from the pipeline name, so different pipelines never share a cluster.
            network: VPC network, ``projects/P/global/networks/N`` (or a bare name).
            subnetwork: Subnetwork, ``projects/P/regions/R/subnetworks/S`` (or a bare name).
            zone: Zone of the node pools, e.g. ``us-central1-b``.
            home_directory_storage: Filestore/Lustre instance mounted as /home,
                ``projects/P/locations/ZONE/instances/NAME``.
            machine_type: GPU machine type of the training pools.
            accelerator_type: Accelerator type of the training pools.
            accelerator_count: Accelerators per training node.
            spot_max_nodes: Maximum nodes of the Spot pool (0: none).
            ondemand_max_nodes: Maximum nodes of the on-demand fallback pool (0: none).
            cluster_spec: Full cluster body; when non-empty it replaces the flat parameters.
            timeout_seconds: Seconds to wait for the cluster to be RUNNING.
        """
        values = dict(locals())
        delete = cluster_tasks.delete_cluster(components, values)
        with dsl.ExitHandler(delete, name=EXIT_GROUP):
            cluster_tasks.create_cluster(components, values)

    return cluster_lifecycle
