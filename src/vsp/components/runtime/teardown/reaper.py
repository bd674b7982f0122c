"""The reaper: deletes kept training clusters whose ``vsp-expires-at`` has passed.

A cluster kept warm for the next run (``teardown``) carries ``vsp-expires-at``; when no run came
in time, ``reap_expired`` deletes it. Clusters without the label (or with an unreadable one) are
never touched, so the reaper deletes only what this tool marked.

Every expired cluster is read again right before its DELETE: when a new run claimed it meanwhile
(``claims.claim_for_run`` cleared the label, or a new decision moved it into the future)
it is kept. Only RUNNING and ERROR clusters are deleted; a PROVISIONING or UPDATING cluster is
busy (the next reap looks at it again) and a STOPPING one is already being deleted. A RUNNING
cluster with unfinished Slurm jobs is in use: it is kept with a new expiry (``cluster_in_use``).
The delete is ``ClusterResource.delete``: not resent blindly after a lost answer, and waited
for until gone.
A claim that lands between the re-read and the DELETE cannot be seen; the window is one request.

With ``prewarm_dir`` it then creates the clusters a teardown decision deleted to have them
re-created before their next run (``teardown.prewarm_reaper``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import errors, gcp_labels, readable_time, rest
from vsp.components.runtime.teardown import in_use, prewarm_reaper

log = logging.getLogger(__name__)

DELETED, WOULD_DELETE, KEPT, FAILED = "deleted", "would delete", "kept", "failed"
DELETABLE_STATES = (cluster_resource.RUNNING, cluster_resource.ERROR)


@dataclasses.dataclass(frozen=True)
class ReapEntry:
    """What the reaper did with one cluster.

    Attributes:
        name: Full resource name of the cluster.
        action: ``deleted``, ``would delete`` (dry run), ``kept`` or ``failed``.
        reason: Why, for the user (the expiry, the state, or the error).
    """

    name: str
    action: str
    reason: str

    @property
    def cluster_id(self) -> str:
        """The last segment of the name."""
        return self.name.rsplit("/", 1)[-1]


@dataclasses.dataclass
class ReapReport:
    """The outcome of one reap, one entry per cluster in listing order.

    Attributes:
        entries: One entry per cluster.
        dry_run: Whether deletions were only reported.
        prewarm: One entry per pre-warm request handled (``teardown.prewarm_reaper``).
    """

    entries: list[ReapEntry] = dataclasses.field(default_factory=list)
    dry_run: bool = False
    prewarm: list[prewarm_reaper.PrewarmEntry] = dataclasses.field(default_factory=list)

    def _names(self, action: str) -> list[str]:
        return [e.name for e in self.entries if e.action == action]

    @property
    def deleted(self) -> list[str]:
        """Names of the clusters deleted."""
        return self._names(DELETED)

    @property
    def would_delete(self) -> list[str]:
        """Names of the clusters a dry run would delete."""
        return self._names(WOULD_DELETE)

    @property
    def kept(self) -> dict[str, str]:
        """Names of the clusters left alone, with the reason."""
        return {e.name: e.reason for e in self.entries if e.action == KEPT}

    @property
    def failed(self) -> dict[str, str]:
        """Names of the expired clusters whose deletion failed, with the error."""
        return {e.name: e.reason for e in self.entries if e.action == FAILED}

    def summary(self) -> str:
        """The counts, e.g. ``3 clusters: 1 deleted, 2 kept`` (``1 to delete`` in a dry run)."""
        counts: dict[str, int] = {}
        for entry in self.entries:
            counts[entry.action] = counts.get(entry.action, 0) + 1
        noun = "cluster" if len(self.entries) == 1 else "clusters"
        words = {DELETED: "deleted", WOULD_DELETE: "to delete", KEPT: "kept", FAILED: "failed"}
        parts = [f"{counts[a]} {word}" for a, word in words.items() if counts.get(a)]
        text = f"{len(self.entries)} {noun}" + (f": {', '.join(parts)}" if parts else "")
        warmed: dict[str, int] = {}
        for item in self.prewarm:
            warmed[item.action] = warmed.get(item.action, 0) + 1
        if warmed:
            text += "; pre-warm requests: " + ", ".join(f"{n} {a}" for a, n in warmed.items())
        return text


def expiry_verdict(cluster: dict[str, Any], now: float) -> tuple[bool, str]:
    """Whether a cluster may be deleted now, and why (or why not)."""
    value = (cluster.get("labels") or {}).get(gcp_labels.EXPIRES_AT)
    if not value:
        return False, f"no {gcp_labels.EXPIRES_AT} label"
    try:
        expires_at = gcp_labels.parse_label_time(value)
    except ValueError:
        return False, f"unreadable {gcp_labels.EXPIRES_AT} {value!r}"
    if not gcp_labels.expired(cluster.get("labels"), now):
        return False, f"expires at {readable_time.rfc3339(expires_at)}"
    state = cluster_resource.cluster_state(cluster)
    if state == cluster_resource.STOPPING:
        return False, "already being deleted"
    if state not in DELETABLE_STATES:
        return (
            False,
            f"expired at {readable_time.rfc3339(expires_at)} but {state}: busy, not deleted",
        )
    return True, f"expired at {readable_time.rfc3339(expires_at)}"


def _reap_one(
    client: rest.VertexRestClient,
    listed: dict[str, Any],
    now: float,
    dry_run: bool,
    options: cluster_resource.ClusterOptions,
    api_version: str,
) -> ReapEntry:
    name = str(listed.get("name", ""))
    expired, reason = expiry_verdict(listed, now)
    if not expired:
        return ReapEntry(name, KEPT, reason)
    resource = cluster_resource.ClusterResource(
        client, cluster_resource.ClusterRef.from_name(name, api_version), options=options
    )
    current = resource.get()  # right before deleting: a new run may have claimed it
    if current is None:
        return ReapEntry(name, KEPT, "already gone")
    expired, reason = expiry_verdict(current, now)
    if not expired:
        return ReapEntry(name, KEPT, f"claimed meanwhile: {reason}")
    try:  # the last look before deleting: is anyone training on it? (see cluster_in_use)
        users = in_use.keep_if_in_use(
            client, resource.ref, current, pipeline_run="", options=options, now=now,
            dry_run=dry_run,
        )  # fmt: skip
    except errors.VspError as exc:
        log.error("could not read the Slurm queue of %s: %s", name, exc)
        return ReapEntry(name, FAILED, f"Slurm queue unreadable, not deleted: {exc}")
    if users:
        return ReapEntry(name, KEPT, f"expired but in use by {in_use.describe(users)}")
    if dry_run:
        return ReapEntry(name, WOULD_DELETE, reason)
    try:
        deleted = resource.delete()
    except errors.VspError as exc:
        log.error("could not delete expired cluster %s: %s", name, exc)
        return ReapEntry(name, FAILED, str(exc))
    return ReapEntry(name, DELETED if deleted else KEPT, reason if deleted else "already gone")


def reap_expired(
    client: rest.VertexRestClient,
    parent: str,
    *,
    now: float | None = None,
    dry_run: bool = False,
    delete_timeout: float = 3600.0,
    options: cluster_resource.ClusterOptions | None = None,
    api_version: str = "v1beta1",
    prewarm_dir: str = "",
) -> ReapReport:
    """Deletes the clusters under ``parent`` whose ``vsp-expires-at`` has passed, then creates
    the ones whose pre-warm is due.

    Args:
        client: REST client for the location.
        parent: ``projects/P/locations/L``.
        now: Epoch seconds to compare expiries with; None means ``time.time()`` at the start.
        dry_run: Only report what would be deleted; nothing is sent but reads.
        delete_timeout: Seconds to wait for each deletion to finish.
        options: Waits, backoff and clock of the deletions (``timeout`` is set from
            ``delete_timeout``).
        api_version: REST version of the resource.
        prewarm_dir: The folder of pre-warm requests (``teardown.prewarm_intents``; '' = none).

    Returns:
        One entry per listed cluster (and per pre-warm request handled). A failed deletion is
        reported (``failed``) and the other clusters are still handled.
    """
    now = time.time() if now is None else float(now)
    options = dataclasses.replace(options or cluster_resource.ClusterOptions())
    options.timeout = delete_timeout
    report = ReapReport(dry_run=dry_run)
    log.info(
        "reaping clusters under %s whose %s is before %s%s",
        parent,
        gcp_labels.EXPIRES_AT,
        readable_time.rfc3339(now),
        " (dry run)" if dry_run else "",
    )
    for listed in cluster_resource.list_clusters(client, parent, api_version):
        entry = _reap_one(client, listed, now, dry_run, options, api_version)
        log.info("cluster %s: %s (%s)", entry.cluster_id, entry.action, entry.reason)
        report.entries.append(entry)
    if prewarm_dir:
        report.prewarm = prewarm_reaper.create_due(
            client, parent, prewarm_dir, now=now, dry_run=dry_run, api_version=api_version
        )
    log.info("reap done: %s", report.summary())
    return report
