"""A run's claim on a training cluster: the ``vsp-lease-<hex of the run>`` label.

While a job of a run is unfinished, the job keeps every other run's delete, shrink and spec
update off the cluster (``teardown.in_use``). Between its jobs a run has none: from
``create_cluster`` to its first job, and from each training step to its next step or its
teardown. Its claim covers those gaps: a label whose value is its expiry, ``LEASE_MINUTES``
ahead, honoured like a job. ``claim_for_run`` records it on a cluster a run reuses (clearing
the expiry a reaper acts on); ``renew_claim`` sets it again (on a created cluster, and as a
training step ends). A run's teardown ends it (``labels.mark_kept``), and expired claims are
dropped at the next label update (``labels.desired_labels``).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import errors, gcp_labels, rest

log = logging.getLogger(__name__)


# How long a run's claim lasts, from when it is taken (created or reused cluster) or renewed
# (a training step's job ended): enough to reach the run's next Slurm job, which protects the
# cluster from then on (teardown.in_use), or its teardown. A run's teardown ends its claim
# (keep, shrink, or another run's use found at delete); one that ends otherwise leaves it to
# expire, and until then another run's delete only keeps the cluster for the reaper.
LEASE_MINUTES = 15.0


def lease_labels(pipeline_run: str, now: float | None = None) -> dict[str, str]:
    """The run's claim: ``vsp-lease-<hex of the run>`` = its expiry, ``LEASE_MINUTES`` after
    ``now`` (epoch seconds; default the current time). No run ('') has no claim: ``{}``."""
    if not pipeline_run:
        return {}
    moment = time.time() if now is None else now
    expires = gcp_labels.format_label_time(moment + LEASE_MINUTES * 60.0)
    return {gcp_labels.lease_key(pipeline_run): expires}


def claim_runs_short(cluster: dict[str, Any], pipeline_run: str) -> bool:
    """Whether the run's claim on the cluster (as read) is missing or has less than half its
    time left, e.g. after a create that took long (real provisioning takes minutes)."""
    if not pipeline_run:
        return False
    lease = (cluster.get("labels") or {}).get(gcp_labels.lease_key(pipeline_run))
    try:
        left = gcp_labels.parse_label_time(lease) - time.time() if lease else -math.inf
    except ValueError:
        return True
    return left < LEASE_MINUTES * 30.0


def usage_labels(pipeline_run: str, now: float | None = None) -> dict[str, str]:
    """The labels a run that reuses a cluster records on it: who, when, and its claim
    (``lease_labels``): no other run's teardown deletes or shrinks the cluster before it
    expires (``teardown.in_use``)."""
    moment = time.time() if now is None else now
    labels = {gcp_labels.LAST_USED_AT: gcp_labels.format_label_time(moment)}
    if pipeline_run:
        labels[gcp_labels.LAST_RUN] = gcp_labels.run_value(pipeline_run)
    return labels | lease_labels(pipeline_run, moment)


def claim_for_run(
    client: rest.VertexRestClient,
    ref: resource.ClusterRef,
    run_label: str,
    *,
    options: resource.ClusterOptions | None = None,
) -> dict[str, Any] | None:
    """Claims a kept cluster for a new run: removes ``vsp-expires-at`` and ``vsp-teardown`` and
    records the run (``vsp-last-run``, ``vsp-last-used-at``) and its claim (``vsp-lease-*``).

    A reaper deletes only clusters with a past ``vsp-expires-at``, so after this call it leaves
    the cluster alone. ``vsp-pipeline-run`` (the run that created the cluster) is not changed.

    Args:
        client: REST client for the cluster's location.
        ref: Which cluster.
        run_label: The claiming run (its pipeline run name).
        options: Waits, attempts, backoff and clock.

    Returns:
        As ``cluster_labels.update_managed_labels``.
    """
    log.info("run %s claims cluster %s", run_label or "(unnamed)", ref.cluster_id)
    remove = [gcp_labels.EXPIRES_AT, gcp_labels.TEARDOWN]
    return cluster_labels.update_managed_labels(
        client, ref, set_labels=usage_labels(run_label), remove=remove, options=options
    )


def renew_claim(
    client: rest.VertexRestClient,
    ref: resource.ClusterRef,
    pipeline_run: str,
    *,
    why: str,
    options: resource.ClusterOptions | None = None,
    settle: bool = True,
) -> None:
    """Sets the run's claim (``vsp-lease-*``) to ``LEASE_MINUTES`` from now; never raises.

    ``create_cluster`` calls it on a cluster it created, a training step when its job has
    ended: the claim covers the gap to the run's next job or its teardown, in which no job of
    the run protects the cluster from another run's delete or spec update. Best effort: a
    cluster gone, labels refused or an API that does not answer is logged, since the run's
    work so far is done and its next step finds out for itself.

    Args:
        client: REST client for the cluster's location.
        ref: Which cluster.
        pipeline_run: The claiming run ('' = none: nothing is sent).
        why: What the claim covers, for the log (e.g. 'until its first job').
        options: Waits, attempts, backoff and clock.
        settle: Wait for the update to finish (False: two calls, the read and the PATCH; the
            run's next step waits for the cluster anyway).
    """
    if not pipeline_run:
        return
    try:
        found = cluster_labels.update_managed_labels(
            client,
            ref,
            set_labels=lease_labels(pipeline_run),
            options=options,
            settle=settle,
        )
    except errors.VspError as exc:
        log.warning(
            "cluster %s: this run's claim was not renewed (%s): %s", ref.cluster_id, why, exc
        )
        return
    if found is None:
        log.warning("cluster %s is gone: no claim to renew (%s)", ref.cluster_id, why)
        return
    log.info(
        "cluster %s: claimed for this run for %.0f min (%s)", ref.cluster_id, LEASE_MINUTES, why
    )
