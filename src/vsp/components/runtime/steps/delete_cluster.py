"""The ``delete_cluster`` step: delete a training cluster unless another run is using it.

``main`` is the component's entry; ``delete_cluster`` the same work for callers in Python.
"""

from __future__ import annotations

from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import errors, rest, step
from vsp.components.runtime.steps.create_cluster import check_timeout
from vsp.components.runtime.teardown import in_use


def main(
    *,
    project: str,
    location: str,
    cluster_id: str,
    gcp_resources: str,
    timeout_seconds: float,
    pipeline_run: str,
    in_use_recheck_minutes: float,
) -> bool:
    """The component's entry: its parameters in, its output out (see the component)."""
    return step.run_step(
        "delete_cluster",
        lambda: delete_cluster(
            project=project,
            location=location,
            cluster_id=cluster_id,
            timeout_seconds=timeout_seconds,
            gcp_resources_path=gcp_resources,
            pipeline_run=pipeline_run,
            recheck_minutes=in_use_recheck_minutes,
        ),
    )


def delete_cluster(
    *,
    project: str,
    location: str,
    cluster_id: str,
    timeout_seconds: float = 3600.0,
    gcp_resources_path: str = "",
    options: cluster_resource.ClusterOptions | None = None,
    pipeline_run: str = "",
    recheck_minutes: float = in_use.DEFAULT_RECHECK_MINUTES,
    client: rest.VertexRestClient | None = None,
) -> bool:
    """Deletes the cluster and waits until it is gone; a missing cluster is success.

    A cluster with unfinished Slurm jobs of another run is not deleted: it is kept with an
    expiry ``recheck_minutes`` ahead, for the reaper (see ``cluster_in_use``).

    Args:
        client: The REST client to use (None: a new one); the exit task passes its own, whose
            requests are bounded by its deadline.

    Returns:
        True when the cluster existed and was deleted.
    """
    check_timeout(timeout_seconds)
    if isinstance(recheck_minutes, bool) or not (
        isinstance(recheck_minutes, (int, float)) and 1 <= recheck_minutes <= 7 * 24 * 60
    ):
        raise errors.UserError(
            f"in_use_recheck_minutes = {recheck_minutes!r:.40}: not between 1 and 10080 (a "
            "week). Fix: give the minutes a cluster another run uses is kept before it is "
            "looked at again, e.g. 30."
        )
    options = options or cluster_resource.ClusterOptions()
    options.timeout = timeout_seconds
    ref = cluster_resource.ClusterRef(project, location, cluster_id)
    resource = cluster_resource.ClusterResource(
        client or rest.VertexRestClient(location),
        ref,
        gcp_resources_path=gcp_resources_path,
        options=options,
    )
    action = in_use.delete_unless_in_use(
        resource.client,
        ref,
        pipeline_run=pipeline_run,
        delete=resource.delete,
        recheck_minutes=recheck_minutes,
        options=options,
    )
    return action == "deleted"
