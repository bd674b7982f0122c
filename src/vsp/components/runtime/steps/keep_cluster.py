"""The ``keep_cluster`` step: label the kept cluster with the decision and its expiry.

``main`` is the component's entry; ``keep`` the same work for callers in Python.
"""

from __future__ import annotations

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import errors, gcp_labels, rest, step
from vsp.components.runtime.teardown import in_use


def main(
    *, project: str, location: str, cluster_id: str, labels: dict, pipeline_run: str = ""
) -> bool:
    """The component's entry: its parameters in, its output out (see the component)."""
    return step.run_step(
        "keep_cluster",
        lambda: keep(
            rest.VertexRestClient(location),
            resource.ClusterRef(project, location, cluster_id),
            {str(k): str(v) for k, v in labels.items()},
            pipeline_run=pipeline_run,
        ),
    )


def keep(
    client: rest.VertexRestClient,
    ref: resource.ClusterRef,
    labels: dict[str, str],
    *,
    pipeline_run: str = "",
) -> bool:
    """Labels the kept cluster (``vsp-teardown``, ``vsp-expires-at``) and ends the run's claim.

    The run is done with the cluster: its claim (``vsp-lease-*``, set when it reused the
    cluster) is removed with the same update, so a run right after it may delete the cluster.

    A kept cluster must carry its expiry: if the service refuses the labels update, the cluster
    is deleted instead (unless another run's jobs use it) and the log says why
    (``cluster.in_use.keep_or_delete``).

    Returns:
        False when the cluster no longer exists or was deleted instead (nothing kept).
    """
    unknown = sorted(set(labels) - {gcp_labels.TEARDOWN, gcp_labels.EXPIRES_AT})
    if unknown:
        raise errors.UserError(
            f"keep labels {unknown} are not teardown labels. Fix: pass the decision's labels."
        )
    kept = in_use.keep_or_delete(client, ref, labels, pipeline_run=pipeline_run)
    return kept == in_use.KEPT
