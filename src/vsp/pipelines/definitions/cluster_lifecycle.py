"""The ``cluster-lifecycle`` pipeline: create a training cluster, delete it in an exit handler.

The delete task is the exit task of a ``dsl.ExitHandler`` so it runs whether the steps inside
succeed, fail or are cancelled. An exit task may not consume another task's output (kfp raises
``exit_task cannot depend on any other tasks``), so the cluster id is a pipeline parameter that
both tasks receive.
"""

from kfp import dsl

from vsp.pipelines.definitions import cluster_tasks

# No postponed annotations here: kfp reads the pipeline signature types at definition time.
NAME = "cluster-lifecycle"
EXIT_GROUP = "create-and-use"


def build(components: dict):
    """Builds the pipeline function from a component set (see ``components.catalog``)."""

    @dsl.pipeline(
        name=NAME,
        description="Create a Vertex AI training cluster (managed Slurm), then delete it, "
        "also when a step fails.",
    )
    def cluster_lifecycle(
        project: str,
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
        timeout_seconds: float = 7200.0,
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
