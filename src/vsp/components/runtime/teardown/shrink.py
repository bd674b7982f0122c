"""Shrink a kept training cluster: its compute pools go to no nodes, the rest stays.

A shrunk cluster keeps its controller, login pool and home storage, so the next run only waits
for the compute nodes to come back (``create_cluster`` sees the pools' node counts differ from
its spec and PATCHes ``node_pools`` back up, whatever its update policy: the
``vsp-teardown=shrink`` label says this tool made the difference).

Order, so that no shrunk cluster is ever left without an expiry:

1. the teardown labels (``vsp-teardown=shrink``, ``vsp-expires-at``) are set first, through
   ``cluster_in_use.keep_or_delete``: a refused labels update deletes the cluster instead;
2. if another run's Slurm jobs are active on the cluster, or another run's claim is live, it
   is kept whole (scaling its pools down would kill those jobs), labelled in use with the
   30-minute expiry of a delete that finds the cluster in use (``in_use.in_use_labels``): a
   cluster at full size must not carry the long expiry priced for a shrunk one; the run using
   it decides at its own end;
3. ``PATCH ...?updateMask=node_pools&updateMode=USER_ONLY`` with every compute pool's
   ``scaling_spec`` at ``min_node_count = max_node_count = 0`` (``node_pools`` is in the
   manage-cluster doc's list of updatable fields [R MANAGE]; the list is replaced whole, so the
   body carries every pool). ``USER_ONLY``: a scaling change must not refresh the service's
   startup, prolog and epilog scripts.

Whether the service accepts a pool of no nodes is not documented (the create-cluster reference
asks for min = max, and 0 = 0 meets it) [I]. Both readings are handled: an INVALID_ARGUMENT
answer deletes the cluster instead and says why, as for a refused labels update.

Not blind: the PATCH is sent without automatic retries; after a lost answer the cluster is read
again (waiting for any update it started) and the PATCH is resent only while pools still keep
nodes.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.core import errors, gcp_labels, rest
from vsp.components.runtime.teardown import in_use

log = logging.getLogger(__name__)

SHRUNK, KEPT_WHOLE = "shrunk", "kept whole"
PATCH_PARAMS = {"updateMask": "node_pools", "updateMode": "USER_ONLY"}


def is_shrunk(cluster: dict[str, Any] | None) -> bool:
    """Whether this tool shrank the cluster (its ``vsp-teardown`` label says ``shrink``)."""
    return gcp_labels.is_shrunk((cluster or {}).get("labels"))


def shrunk_pools(cluster: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The cluster's node pools with every compute pool at no nodes, and the ids changed.

    The login pool (``slurm_spec.login_node_pool_id``) is left as it is, and so is a pool that
    already keeps and allows no nodes.
    """
    spec = cluster_spec.ClusterSpec.from_api(cluster)
    login = spec.slurm.login_node_pool_id if spec.slurm else None
    pools = copy.deepcopy(spec.to_request_body().get("nodePools") or [])
    changed = []
    for pool in pools:
        if pool.get("id") == login:
            continue
        scaling = pool.setdefault("scalingSpec", {})
        if int(scaling.get("minNodeCount") or 0) or int(scaling.get("maxNodeCount") or 0):
            scaling["minNodeCount"] = 0
            scaling["maxNodeCount"] = 0
            changed.append(str(pool.get("id")))
    return pools, changed


def _scale_down(resource: cluster_resource.ClusterResource) -> str:
    """PATCHes the compute pools to no nodes; returns ``shrunk`` or ``absent``."""
    ref, options = resource.ref, resource.options
    for _attempt in range(options.max_attempts + 1):
        cluster = resource.wait_settled()
        if cluster is None or cluster_resource.cluster_state(cluster) == cluster_resource.STOPPING:
            log.info("cluster %s is gone or being deleted: nothing to shrink", ref.cluster_id)
            return in_use.ABSENT
        pools, changed = shrunk_pools(cluster)
        if not changed:
            log.info("cluster %s: compute pools already at no nodes", ref.cluster_id)
            return SHRUNK
        log.info("cluster %s: scaling pools %s to no nodes", ref.cluster_id, ", ".join(changed))
        try:
            operation = resource.client.patch(
                ref.path, {"nodePools": pools}, params=dict(PATCH_PARAMS), retry=False
            )
        except errors.NotFoundError:
            return in_use.ABSENT
        except errors.TransientError as exc:
            log.warning("shrink got no usable answer (%s): reading the cluster again", exc)
            options.clock.sleep(next(options.backoff.delays()))
            continue
        if operation.get("name"):
            resource.wait_operation(operation, f"shrink of cluster {ref.cluster_id}")
        resource.wait_settled()
        return SHRUNK
    raise errors.TransientError(
        f"could not shrink cluster {ref.name} after {options.max_attempts + 1} attempts. Fix: "
        "check that nothing else keeps updating the cluster, then retry the step."
    )


def shrink_or_delete(
    client: rest.VertexRestClient,
    ref: cluster_resource.ClusterRef,
    labels_from_decision: dict[str, str],
    *,
    pipeline_run: str = "",
    options: cluster_resource.ClusterOptions | None = None,
) -> str:
    """Shrinks the cluster (see the module docstring), or deletes it when it cannot be shrunk.

    Args:
        client: REST client for the cluster's location.
        ref: Which cluster.
        labels_from_decision: The decision's labels (``vsp-teardown=shrink``, expiry).
        pipeline_run: This run, whose own finished jobs do not count as use.
        options: Waits, attempts, backoff and clock.

    Returns:
        ``shrunk``; ``kept whole`` (another run's jobs use it); ``absent``; ``deleted`` (the
        labels or the scaling were refused); or ``in-use`` (refused, and in use).
    """
    resource = cluster_resource.ClusterResource(client, ref, options=options)
    action = in_use.keep_or_delete(
        client, ref, labels_from_decision, options=options, pipeline_run=pipeline_run
    )
    if action != in_use.KEPT:
        return action
    cluster = resource.get()
    if cluster is None:
        return in_use.ABSENT
    users = [
        *in_use.foreign_leases(cluster, pipeline_run),
        *in_use.active_foreign_jobs(client, ref, pipeline_run),
    ]
    # This run is done with the cluster: its own claim ends here, whatever follows, so that a
    # later run's teardown does not take it for a run still using the cluster.
    own = [gcp_labels.lease_key(pipeline_run)] if pipeline_run else []
    if users:
        log.warning(
            "cluster %s is kept whole, not shrunk: in use by %s; it is labelled in use and "
            "looked at again after %s minutes (the run using it decides at its end)",
            ref.cluster_id,
            in_use.describe(users),
            in_use.DEFAULT_RECHECK_MINUTES,
        )
        labels = in_use.in_use_labels(time.time(), in_use.DEFAULT_RECHECK_MINUTES)
        try:
            cluster_labels.update_managed_labels(
                client, ref, set_labels=labels, remove=own, options=options
            )
        except cluster_labels.LabelsRefusedError as exc:  # the shrink's expiry stays on it
            log.warning("cluster %s keeps the shrink's expiry (%s)", ref.cluster_id, exc)
        return KEPT_WHOLE
    if own and own[0] in (cluster.get("labels") or {}):
        try:
            cluster_labels.update_managed_labels(client, ref, remove=own, options=options)
        except cluster_labels.LabelsRefusedError as exc:  # it expires on its own
            log.warning(
                "cluster %s keeps this run's claim until it expires (%s)", ref.cluster_id, exc
            )
    try:
        return _scale_down(resource)
    except (errors.InvalidArgumentError, errors.OperationFailedError) as exc:
        if not errors.is_invalid_argument(exc):
            raise
        log.warning(
            "the service refused to scale the compute pools of cluster %s to no nodes (%s); "
            "it is deleted instead, so that it does not stay up at full size",
            ref.cluster_id,
            getattr(exc, "message", None) or exc,
        )
        return in_use.delete_unless_in_use(
            client, ref, pipeline_run=pipeline_run, delete=resource.delete, options=options
        )


def shrink(
    client: rest.VertexRestClient,
    ref: cluster_resource.ClusterRef,
    labels: dict[str, str],
    *,
    pipeline_run: str = "",
) -> str:
    """Entry point of ``shrink_cluster``: checks the decision's labels, then ``shrink_or_delete``.

    Raises:
        errors.UserError: The labels are not a shrink decision's (before any request).
    """
    if labels.get(gcp_labels.TEARDOWN) != gcp_labels.SHRUNK:
        raise errors.UserError(
            f"shrink labels {labels!r} do not say {gcp_labels.TEARDOWN}={gcp_labels.SHRUNK}. "
            "Fix: pass the labels of a decision whose action is shrink."
        )
    unknown = sorted(set(labels) - {gcp_labels.TEARDOWN, gcp_labels.EXPIRES_AT})
    if unknown:
        raise errors.UserError(
            f"shrink labels {unknown} are not teardown labels. Fix: pass the decision's labels."
        )
    return shrink_or_delete(client, ref, labels, pipeline_run=pipeline_run)
