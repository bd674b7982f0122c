"""Entry points of the ``create_cluster`` and ``delete_cluster`` components.

The KFP components are thin declarations; they call these functions with their parameters.
"""

from __future__ import annotations

import datetime
import logging
import math
from typing import Any

from vsp.components.runtime.cluster import builder as cluster_builder
from vsp.components.runtime.cluster import in_use as cluster_in_use
from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.cluster import ops as cluster_ops
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.cluster import rules as cluster_rules
from vsp.components.runtime.core import errors, gcp_labels, rest

log = logging.getLogger(__name__)


def resolve_spec(cluster_spec: dict[str, Any] | None, spec_params: dict[str, Any]):
    """The desired cluster: the full ``cluster_spec`` when given, else built from flat params."""
    if cluster_spec:
        log.info("using the cluster_spec parameter; the flat cluster parameters are ignored")
        return cluster_rules.parse_cluster_spec(cluster_spec)
    return cluster_builder.build_cluster_spec(**spec_params)


def check_timeout(timeout_seconds: object) -> None:
    """Refuses a timeout that is not a finite number of seconds > 0, before any request.

    Raises:
        errors.UserError: It is not (a ``'abc'`` once failed only after the create POST).
    """
    if (
        isinstance(timeout_seconds, bool)
        or not isinstance(timeout_seconds, (int, float))
        or not math.isfinite(timeout_seconds)
        or timeout_seconds <= 0
    ):
        raise errors.UserError(
            f"timeout_seconds = {timeout_seconds!r:.40}: must be a number of seconds > 0. "
            "Fix: give how long to wait for the cluster, e.g. 7200."
        )


def managed_labels(pipeline_run: str, now: datetime.datetime | None = None) -> dict[str, str]:
    """Labels this tool puts on a cluster it creates."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    labels = {gcp_labels.MANAGED: "true", gcp_labels.CREATED_AT: gcp_labels.timestamp(now)}
    run = gcp_labels.value(pipeline_run)
    if run:
        labels[cluster_ops.RUN_LABEL] = run
    return labels


def create_cluster(
    *,
    project: str,
    location: str,
    cluster_id: str,
    cluster_spec: dict[str, Any] | None,
    spec_params: dict[str, Any],
    update_policy: str = "apply",
    timeout_seconds: float = 7200.0,
    pipeline_run: str = "",
    gcp_resources_path: str = "",
    options: cluster_resource.ClusterOptions | None = None,
) -> cluster_ops.EnsureResult:
    """Creates the cluster or reuses a matching one; see ``cluster_ops``.

    The spec is validated before any request is sent. A reused cluster that an earlier run
    kept warm is claimed: its expiry labels are removed, so a reaper leaves it alone.
    """
    check_timeout(timeout_seconds)
    spec = resolve_spec(cluster_spec, spec_params)
    ref = cluster_resource.ClusterRef(project, location, cluster_id)
    options = options or cluster_resource.ClusterOptions()
    options.timeout = timeout_seconds
    options.update_policy = update_policy
    client = rest.VertexRestClient(location)
    manager = cluster_ops.ClusterManager(
        cluster_resource.ClusterResource(
            client, ref, gcp_resources_path=gcp_resources_path, options=options
        )
    )
    result = manager.ensure(spec, managed_labels(pipeline_run))
    if result.reused and not _claim(client, ref, pipeline_run, options):
        # A reaper deleted the kept cluster between the reuse and the claim.
        log.warning("cluster %s went away while being reused; creating it again", ref.name)
        result = manager.ensure(spec, managed_labels(pipeline_run))
    log.info("cluster %s: %s in %.1f s", result.name, result.action, result.seconds)
    return result


def _claim(
    client: rest.VertexRestClient,
    ref: cluster_resource.ClusterRef,
    pipeline_run: str,
    options: cluster_resource.ClusterOptions,
) -> bool:
    """``claim_for_run``; returns False when the cluster has gone meanwhile.

    A refused labels update is logged, not fatal: when the service refuses label updates, no
    run could have put an expiry on the cluster (keeping deletes it instead), so there is no
    expiry a reaper could act on.
    """
    try:
        return cluster_labels.claim_for_run(client, ref, pipeline_run, options=options) is not None
    except cluster_labels.LabelsRefusedError as exc:
        log.warning("cluster %s is reused without recording this run: %s", ref.cluster_id, exc)
        return True


def delete_cluster(
    *,
    project: str,
    location: str,
    cluster_id: str,
    timeout_seconds: float = 3600.0,
    gcp_resources_path: str = "",
    options: cluster_resource.ClusterOptions | None = None,
    pipeline_run: str = "",
    recheck_minutes: float = cluster_in_use.DEFAULT_RECHECK_MINUTES,
) -> bool:
    """Deletes the cluster and waits until it is gone; a missing cluster is success.

    A cluster with unfinished Slurm jobs of another run is not deleted: it is kept with an
    expiry ``recheck_minutes`` ahead, for the reaper (see ``cluster_in_use``).

    Returns:
        True when the cluster existed and was deleted.
    """
    check_timeout(timeout_seconds)
    options = options or cluster_resource.ClusterOptions()
    options.timeout = timeout_seconds
    ref = cluster_resource.ClusterRef(project, location, cluster_id)
    resource = cluster_resource.ClusterResource(
        rest.VertexRestClient(location), ref, gcp_resources_path=gcp_resources_path, options=options
    )
    action = cluster_in_use.delete_unless_in_use(
        resource.client,
        ref,
        pipeline_run=pipeline_run,
        delete=resource.delete,
        recheck_minutes=recheck_minutes,
        options=options,
    )
    return action == "deleted"
