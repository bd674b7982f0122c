"""In-use protection: a cluster that another run claimed or trains on is never deleted under it.

Several pipelines (or a manual ``vsp submit`` next to a scheduled run) may name the same
cluster. Before any teardown deletes a cluster (``delete_cluster``, the exit task, the reaper),
``delete_unless_in_use`` reads the cluster's live Slurm queue through the Slurm Job API. Jobs
that are not finished and were not submitted by the deleting run (each job's comment records
its pipeline run as ``vsp-pipeline-run=``) mean the cluster is in use: it is kept, labelled
``vsp-teardown=in-use`` with ``vsp-expires-at`` a short while ahead, the users are logged, and
the reaper looks at it again after that expiry. A run that reuses a cluster also records itself
on it (``vsp-last-run``, ``vsp-last-used-at``, set by ``claims.claim_for_run``), which
``vsp clusters list`` shows.

``keep_or_delete`` is the keep path of a teardown decision: it labels the cluster with its
expiry, or deletes it (unless in use) when the service refuses the labels update, so that no
kept cluster is left without an expiry.

The race: a job submitted after the queue is read and before the DELETE lands is lost with the
cluster. The Slurm Job API has no lock the two could share, so the window is narrowed to one
request: the queue is read right before the DELETE, with nothing in between.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections.abc import Callable, Sequence

from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import gcp_labels, rest
from vsp.components.runtime.slurm import api, job

log = logging.getLogger(__name__)

IN_USE = "in-use"
KEPT, DELETED, ABSENT = "kept", "deleted", "absent"
DEFAULT_RECHECK_MINUTES = 30.0


def active_foreign_jobs(
    client: rest.VertexRestClient, ref: cluster_resource.ClusterRef, pipeline_run: str
) -> list[job.JobInfo]:
    """Jobs in the cluster's live queue that are not finished and not the deleting run's.

    Args:
        client: REST client for the cluster's location.
        ref: The cluster (RUNNING: its Slurm answers).
        pipeline_run: The deleting run ('' = none: every unfinished job counts, as for the
            reaper).
    """
    own = gcp_labels.run_value(pipeline_run)
    jobs = api.SlurmClient(client, ref).list_jobs()
    return [j for j in jobs if not j.is_terminal and not (own and j.pipeline_run == own)]


@dataclasses.dataclass(frozen=True)
class Lease:
    """Another run's live claim on the cluster (a ``vsp-lease-*`` label).

    Attributes:
        key: The label key.
        expires_at: Epoch seconds the claim ends.
    """

    key: str
    expires_at: float

    def describe(self) -> str:
        """``claim vsp-lease-0a1b... of another run until 2026-12-05T05:00:00Z``."""
        moment = datetime.datetime.fromtimestamp(self.expires_at, tz=datetime.timezone.utc)
        return f"claim {self.key} of another run until {moment:%Y-%m-%dT%H:%M:%SZ}"


def foreign_leases(cluster: dict, pipeline_run: str, now: float | None = None) -> list[Lease]:
    """The live claims on ``cluster`` (its labels as just read) of runs other than this one.

    Args:
        cluster: The cluster's REST JSON.
        pipeline_run: The deleting run ('' = none: every live claim counts, as for the reaper).
        now: Epoch seconds (default: the clock).
    """
    moment = time.time() if now is None else now
    own = gcp_labels.lease_key(pipeline_run) if pipeline_run else ""
    labels = dict(cluster.get("labels") or {})
    expired = set(cluster_labels.expired_leases(labels, moment))
    return [
        Lease(key, gcp_labels.parse_label_time(value))
        for key, value in sorted(labels.items())
        if key.startswith(gcp_labels.LEASE_PREFIX) and key not in expired and key != own
    ]


def describe(users: Sequence[job.JobInfo | Lease]) -> str:
    """Who uses the cluster, e.g. ``job 12 (RUNNING, user root, run r1, key vsp-x)``."""
    return ", ".join(
        u.describe()
        if isinstance(u, Lease)
        else f"job {u.job_id} ({u.base_state}, user {u.user_name or '?'}, run "
        f"{u.pipeline_run or '?'}, key {u.comment_value('vsp-run-key') or u.name or '?'})"
        for u in users
    )


def in_use_labels(now: float, recheck_minutes: float) -> dict[str, str]:
    """The labels of a cluster kept because it is in use: look again after ``recheck_minutes``."""
    expires = now + max(1.0, recheck_minutes) * 60.0
    return {
        gcp_labels.TEARDOWN: IN_USE,
        gcp_labels.EXPIRES_AT: gcp_labels.format_label_time(expires),
    }


def keep_if_in_use(
    client: rest.VertexRestClient,
    ref: cluster_resource.ClusterRef,
    cluster: dict,
    *,
    pipeline_run: str,
    recheck_minutes: float = DEFAULT_RECHECK_MINUTES,
    options: cluster_resource.ClusterOptions | None = None,
    now: float | None = None,
    dry_run: bool = False,
) -> list[job.JobInfo | Lease]:
    """The check every teardown makes right before a DELETE, on the cluster as just read.

    A cluster with a live claim of another run (``vsp-lease-*``, unless it is in ERROR), or a
    RUNNING one with unfinished jobs of another run, is labelled in use with an expiry
    ``recheck_minutes`` ahead (unless ``dry_run``) and its users are logged.

    Returns:
        The claims and jobs that keep it (empty: it may be deleted).
    """
    state = cluster_resource.cluster_state(cluster)
    users: list[job.JobInfo | Lease] = []
    if state != cluster_resource.ERROR:
        users += foreign_leases(cluster, pipeline_run, now)
    if state == cluster_resource.RUNNING:
        users += active_foreign_jobs(client, ref, pipeline_run)
    if users:
        log.warning(
            "not deleting cluster %s: in use by %s; it is kept and looked at again after "
            "%s minutes (the reaper deletes it once it is idle and expired)",
            ref.cluster_id,
            describe(users),
            recheck_minutes,
        )
        if not dry_run:
            labels = in_use_labels(time.time() if now is None else now, recheck_minutes)
            # This run is done with the cluster: its own claim, if any, ends here, so that the
            # run still using it can delete it when it ends.
            own = [gcp_labels.lease_key(pipeline_run)] if pipeline_run else []
            try:
                cluster_labels.update_managed_labels(
                    client, ref, set_labels=labels, remove=own, options=options
                )
            except cluster_labels.LabelsRefusedError as exc:
                log.warning(
                    "cluster %s is kept without an expiry label (%s); the teardown of the run "
                    "using it deletes or keeps it",
                    ref.cluster_id,
                    exc,
                )
    return users


def delete_unless_in_use(
    client: rest.VertexRestClient,
    ref: cluster_resource.ClusterRef,
    *,
    pipeline_run: str,
    delete: Callable[[], bool],
    recheck_minutes: float = DEFAULT_RECHECK_MINUTES,
    options: cluster_resource.ClusterOptions | None = None,
    now: float | None = None,
) -> str:
    """Deletes the cluster unless another run's jobs are active on it.

    Returns:
        ``deleted``, ``absent`` (nothing to delete) or ``in-use`` (kept with an expiry).
    """
    cluster = cluster_resource.ClusterResource(client, ref, options=options).get()
    if cluster is None:
        log.info("cluster %s does not exist in %s: nothing to delete", ref.cluster_id, ref.parent)
        return ABSENT
    if keep_if_in_use(
        client,
        ref,
        cluster,
        pipeline_run=pipeline_run,
        recheck_minutes=recheck_minutes,
        options=options,
        now=now,
    ):
        return IN_USE
    return DELETED if delete() else ABSENT


def keep_or_delete(
    client: rest.VertexRestClient,
    ref: cluster_resource.ClusterRef,
    labels_from_decision: dict[str, str],
    *,
    delete: Callable[[], bool] | None = None,
    options: cluster_resource.ClusterOptions | None = None,
    pipeline_run: str = "",
) -> str:
    """Keeps the cluster (``cluster_labels.mark_kept``), or deletes it if labels are refused.

    A kept cluster must carry its expiry, or no reaper ever deletes it: when the service
    refuses the labels update (``cluster_labels.LabelsRefusedError``), the cluster is deleted
    instead and the reason is logged.

    Args:
        client: REST client for the cluster's location.
        ref: Which cluster.
        labels_from_decision: The decision's labels; must hold ``vsp-teardown``.
        delete: Deletes the cluster and returns whether it existed; default: delete it unless
            another run's Slurm jobs use it (``delete_unless_in_use``).
        options: Waits, attempts, backoff and clock.

    Returns:
        ``kept``; ``absent`` (no cluster); ``deleted`` (labels refused); or ``in-use`` (labels
        refused and another run's jobs use the cluster: that run's teardown decides).
    """
    try:
        kept = cluster_labels.mark_kept(
            client, ref, labels_from_decision, options=options, pipeline_run=pipeline_run
        )
    except cluster_labels.LabelsRefusedError as exc:
        log.warning("cluster %s cannot be kept, so it is deleted: %s", ref.cluster_id, exc)
        if delete is not None:
            return DELETED if delete() else ABSENT
        resource = cluster_resource.ClusterResource(client, ref, options=options)
        return delete_unless_in_use(
            client, ref, pipeline_run=pipeline_run, delete=resource.delete, options=options
        )
    return KEPT if kept is not None else ABSENT
