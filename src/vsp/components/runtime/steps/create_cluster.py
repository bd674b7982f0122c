"""The ``create_cluster`` step: create a training cluster, or reuse a matching one.

``main`` is the component's entry (its parameters, as the component receives them);
``create_cluster`` is the same work from a parsed spec, for callers in Python.
"""

from __future__ import annotations

import datetime
import functools
import logging
import math
from typing import Any

from vsp.components.runtime.cluster import builder, claims, ops, rules
from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import errors, gcp_labels, rest, step
from vsp.components.runtime.teardown import in_use

log = logging.getLogger(__name__)

# The flat parameters that build the spec when no ``cluster_spec`` is given.
SPEC_PARAMETERS = (
    "project", "cluster_id", "display_name", "network", "subnetwork", "zone",
    "home_directory_storage", "login_machine_type", "login_node_count", "machine_type",
    "accelerator_type", "accelerator_count", "spot_max_nodes", "ondemand_max_nodes",
    "reservation", "boot_disk_size_gb", "slurm_config", "service_account", "labels",
)  # fmt: skip


@step.accepts_options
def main(
    *,
    project: str,
    location: str,
    cluster_id: str,
    gcp_resources: str,
    cluster_spec: dict[str, Any],
    update_policy: str,
    timeout_seconds: float,
    pipeline_run: str,
    **flat_spec: Any,
) -> tuple[str, bool, str, float]:
    """The component's entry: its parameters in, its outputs out (see the component).

    Returns:
        ``(cluster_name, reused, action, seconds)``.
    """
    unknown = sorted(set(flat_spec) - set(SPEC_PARAMETERS))
    if unknown:
        raise TypeError(f"create_cluster has no parameters {unknown}")
    spec_params = {"project": project, "cluster_id": cluster_id, **flat_spec}
    result = step.run_step(
        "create_cluster",
        lambda: create_cluster(
            project=project,
            location=location,
            cluster_id=cluster_id,
            cluster_spec=cluster_spec,
            spec_params=spec_params,
            update_policy=update_policy,
            timeout_seconds=timeout_seconds,
            pipeline_run=pipeline_run,
            gcp_resources_path=gcp_resources,
        ),
    )
    return (result.name, result.reused, result.action, result.seconds)


def resolve_spec(cluster_spec: dict[str, Any] | None, spec_params: dict[str, Any]):
    """The desired cluster: the full ``cluster_spec`` when given, else built from flat params."""
    if cluster_spec:
        log.info("using the cluster_spec parameter; the flat cluster parameters are ignored")
        return rules.parse_cluster_spec(cluster_spec)
    return builder.build_cluster_spec(**spec_params)


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
    """Labels this tool puts on a cluster it creates: with a run, its claim too (``claims``),
    sent with the create, so that claiming a created cluster costs no call of its own."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    labels = {gcp_labels.MANAGED: "true", gcp_labels.CREATED_AT: gcp_labels.timestamp(now)}
    run = gcp_labels.run_value(pipeline_run)
    if run:
        labels[gcp_labels.PIPELINE_RUN] = run
    return labels | claims.lease_labels(pipeline_run, now.timestamp())


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
) -> ops.EnsureResult:
    """Creates the cluster or reuses a matching one; see ``cluster_ops``.

    The spec is validated before any request is sent. A reused cluster that an earlier run
    kept warm is claimed: its expiry labels are removed, so a reaper leaves it alone. A created
    one carries this run's claim from its create request (renewed when the create took long),
    so that another run reusing it cannot delete it before this run's first job.
    """
    check_timeout(timeout_seconds)
    spec = resolve_spec(cluster_spec, spec_params)
    ref = cluster_resource.ClusterRef(project, location, cluster_id)
    options = options or cluster_resource.ClusterOptions()
    options.timeout = timeout_seconds
    options.update_policy = update_policy
    client = rest.VertexRestClient(location)
    if options.other_users is None:
        options.other_users = functools.partial(_other_users, client, ref, pipeline_run)
    manager = ops.ClusterManager(
        cluster_resource.ClusterResource(
            client, ref, gcp_resources_path=gcp_resources_path, options=options
        )
    )
    result = manager.ensure(spec, managed_labels(pipeline_run))
    if result.reused and not _claim(client, ref, pipeline_run, options):
        # A reaper deleted the kept cluster between the reuse and the claim.
        log.warning("cluster %s went away while being reused; creating it again", ref.name)
        result = manager.ensure(spec, managed_labels(pipeline_run))
    if not result.reused and claims.claim_runs_short(result.cluster, pipeline_run):
        # Created with its claim, but the create took long (or the cluster is this run's own,
        # re-attached): claimed again, to last until the run's first job.
        claims.renew_claim(client, ref, pipeline_run, why="until its first job", options=options)
    log.info("cluster %s: %s in %.1f s", result.name, result.action, result.seconds)
    return result


def _other_users(
    client: rest.VertexRestClient,
    ref: cluster_resource.ClusterRef,
    pipeline_run: str,
    cluster: dict[str, Any],
) -> str:
    """Who else uses the reused ``cluster``: other runs' live claims and unfinished jobs."""
    users = [
        *in_use.foreign_leases(cluster, pipeline_run),
        *in_use.active_foreign_jobs(client, ref, pipeline_run),
    ]
    return in_use.describe(users)


def _claim(
    client: rest.VertexRestClient,
    ref: cluster_resource.ClusterRef,
    pipeline_run: str,
    options: cluster_resource.ClusterOptions,
) -> bool:
    """``claims.claim_for_run``; returns False when the cluster has gone meanwhile.

    A refused labels update is logged, not fatal: when the service refuses label updates, no
    run could have put an expiry on the cluster (keeping deletes it instead), so there is no
    expiry a reaper could act on.
    """
    try:
        return claims.claim_for_run(client, ref, pipeline_run, options=options) is not None
    except cluster_labels.LabelsRefusedError as exc:
        log.warning("cluster %s is reused without recording this run: %s", ref.cluster_id, exc)
        return True
