"""The ``cluster-lifecycle`` pipeline: create a training cluster, delete it in an exit handler.

The delete task is the exit task of a ``dsl.ExitHandler`` so it runs whether the steps inside
succeed, fail or are cancelled. An exit task may not consume another task's output (kfp raises
``exit_task cannot depend on any other tasks``), so the cluster id is a pipeline parameter that
both tasks receive.
"""

from __future__ import annotations

from kfp import dsl

NAME = "cluster-lifecycle"


def build(components: dict):
    """Builds the pipeline function from a component set (see ``components.catalog``)."""
    create_cluster = components["create_cluster"]
    delete_cluster = components["delete_cluster"]

    @dsl.pipeline(
        name=NAME,
        description="Create a Vertex AI training cluster (managed Slurm), then delete it, "
        "also when a step fails.",
    )
    def cluster_lifecycle(
        project: str,
        location: str = "us-central1",
        cluster_id: str = "vspcluster",
        cluster_spec: dict = {},  # noqa: B006 - a KFP default, never mutated
        timeout_seconds: float = 7200.0,
    ):
        """Create a training cluster, then delete it.

        Args:
            project: Google Cloud project id.
            location: Vertex AI region.
            cluster_id: Cluster id (1-10 lowercase letters and digits).
            cluster_spec: Full cluster body (see docs/cluster-spec.md); empty for the defaults.
            timeout_seconds: Seconds to wait for the cluster to be RUNNING.
        """
        delete = delete_cluster(project=project, location=location, cluster_id=cluster_id)
        delete.set_display_name("delete-cluster")
        with dsl.ExitHandler(delete, name="create-and-use"):
            create = create_cluster(
                project=project,
                location=location,
                cluster_id=cluster_id,
                cluster_spec=cluster_spec,
                timeout_seconds=timeout_seconds,
                pipeline_run=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
            )
            create.set_display_name("create-cluster")

    return cluster_lifecycle
