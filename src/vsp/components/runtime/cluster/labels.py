"""The labels this tool manages (keys starting with ``vsp-``) on an existing training cluster.

``update_managed_labels`` reads the cluster, computes the label map it should have (the current
labels with some ``vsp-`` keys set and others removed) and sends
``PATCH ...?updateMask=labels&updateMode=USER_ONLY`` with ``{"labels": <the whole new map>}``
only when that map differs from the current one. ``USER_ONLY``: a label change must not let the
service refresh the startup, prolog and epilog scripts of a warm cluster, as
``USER_AND_SERVICE`` does [R MANAGE]. ``mark_kept`` records a keep-or-delete decision of
``teardown``; ``claims.claim_for_run`` clears the expiry so that a reaper does not delete a
cluster a new run uses.

``labels`` is not in the manage-cluster doc's list of updatable fields (Terraform treats it as
mutable) [I]. A PATCH refused with INVALID_ARGUMENT naming ``labels`` or the update mask raises
``LabelsRefusedError``; ``cluster_in_use.keep_or_delete`` then deletes the cluster rather than
leave a kept cluster without an expiry.

Not blind: the PATCH is sent once, without automatic retries. When it gets no usable answer
(reset, timeout, 5xx) the change may or may not have been applied, so the cluster is read again
(waiting for any update it started) and the PATCH is sent again only when the labels still
differ. A cluster that is PROVISIONING or UPDATING is waited for first; a missing cluster, or
one being deleted, gets nothing sent.

Only ``vsp-`` keys may be set or removed here; every other label belongs to the cluster spec
(``create_cluster``) and is sent back unchanged. The request carries no precondition, so a label
written by someone else between the read and the PATCH would be overwritten: keep label writers
of one cluster sequential (one pipeline run at a time).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from vsp.components.runtime.cluster import resource, rules_base
from vsp.components.runtime.core import errors, gcp_labels, rest

log = logging.getLogger(__name__)

PATCH_PARAMS = {"updateMask": "labels", "updateMode": "USER_ONLY"}
_REFUSAL = re.compile(r"labels|update_?mask", re.IGNORECASE)


class LabelsRefusedError(errors.UserError):
    """The service refused to update a cluster's labels (the ``labels`` update mask)."""


def labels_refused(error: Exception) -> bool:
    """Whether ``error`` refuses a labels update: INVALID_ARGUMENT naming labels or the mask.

    Both shapes are read: a synchronous 400 (``errors.InvalidArgumentError``) and an operation
    that ends with code 3; the message and each BadRequest field violation are searched.
    """
    if not errors.is_invalid_argument(error):
        return False
    texts = [error.message if isinstance(error, errors.ApiError) else str(error)]
    for detail in error.details:
        found = detail.get("fieldViolations") if isinstance(detail, dict) else None
        texts += [
            f"{v.get('field')} {v.get('description')}" for v in found or [] if isinstance(v, dict)
        ]
    return any(_REFUSAL.search(str(text)) for text in texts)


def check_label_change(set_labels: Mapping[str, str], remove: Iterable[str]) -> list[str]:
    """Validates a label change before any request; returns the keys to remove as a list.

    Raises:
        errors.UserError: A key does not start with ``vsp-``, a key is both set and removed, or
            a key or value breaks the Google Cloud label rules.
    """
    prefix = gcp_labels.PREFIX
    removed = [remove] if isinstance(remove, str) else list(remove)
    foreign = sorted(str(k) for k in [*set_labels, *removed] if not str(k).startswith(prefix))
    if foreign:
        raise errors.UserError(
            f"label keys {foreign} are not managed by this tool: only keys starting with "
            f"{prefix!r} may be set or removed here. Fix: change other labels through the "
            f"cluster spec (the labels of create_cluster), or give the keys the {prefix!r} "
            "prefix."
        )
    both = sorted(set(set_labels) & set(removed))
    if both:
        raise errors.UserError(
            f"label keys {both} are both set and removed. Fix: pass each key in set_labels or "
            "in remove, not in both."
        )
    problems = rules_base.Problems()
    rules_base.check_labels(problems, "set_labels", dict(set_labels))
    problems.raise_if_any("the label change")
    return removed


def desired_labels(
    current: Mapping[str, str],
    set_labels: Mapping[str, str],
    remove: Iterable[str],
    now: float | None = None,
) -> dict[str, str]:
    """``current`` with ``set_labels`` applied, the ``remove`` keys and expired claims dropped.

    Every update drops the claims (``vsp-lease-*``) whose expiry has passed (or is unreadable),
    so claims of runs that ended never pile up towards the 64-label limit.
    """
    dropped = set(remove) | set(expired_leases(current, now))
    labels = {k: v for k, v in current.items() if k not in dropped}
    labels.update(set_labels)
    return labels


def expired_leases(labels: Mapping[str, str], now: float | None = None) -> list[str]:
    """The claim labels (``vsp-lease-*``) whose expiry has passed or cannot be read."""
    moment = time.time() if now is None else now
    expired = []
    for key, value in labels.items():
        if not key.startswith(gcp_labels.LEASE_PREFIX):
            continue
        try:
            if gcp_labels.parse_label_time(value) <= moment:
                expired.append(key)
        except ValueError:
            expired.append(key)
    return expired


class _LabelUpdate:
    """Updates one cluster's managed labels without blind resends."""

    def __init__(self, cluster: resource.ClusterResource):
        self.cluster = cluster
        self.client, self.ref, self.options = cluster.client, cluster.ref, cluster.options

    def update_labels(
        self, set_labels: Mapping[str, str], remove: list[str], settle: bool = True
    ) -> dict[str, Any] | None:
        for _attempt in range(self.options.max_attempts + 1):
            cluster = self._read_settled()
            if cluster is None:
                return None
            current = dict(cluster.get("labels") or {})
            wanted = desired_labels(current, set_labels, remove)
            if wanted == current:
                log.info("cluster %s: labels already up to date", self.ref.cluster_id)
                return cluster
            log.info(
                "cluster %s: updating labels (set %s, remove %s)",
                self.ref.cluster_id,
                dict(set_labels),
                sorted(k for k in remove if k in current),
            )
            try:
                operation = self.client.patch(
                    self.ref.path, {"labels": wanted}, params=dict(PATCH_PARAMS), retry=False
                )
            except errors.NotFoundError:
                log.info("cluster %s disappeared: no labels to update", self.ref.cluster_id)
                return None
            except errors.TransientError as exc:
                log.warning(
                    "label update got no usable answer (%s): reading the cluster again", exc
                )
                self._pause()
                continue
            except errors.InvalidArgumentError as exc:
                if labels_refused(exc):
                    raise self._refused(exc) from exc
                if exc.status != "FAILED_PRECONDITION":
                    raise
                log.info("cluster %s is busy (%s): waiting", self.ref.cluster_id, exc.message)
                self._pause()
                continue
            if not settle:  # accepted: the cluster as read, with the labels sent
                return {**cluster, "labels": wanted}
            if operation.get("name"):
                try:
                    self.cluster.wait_operation(
                        operation, f"label update of cluster {self.ref.cluster_id}"
                    )
                except errors.OperationFailedError as exc:
                    if labels_refused(exc):
                        raise self._refused(exc) from exc
                    raise
            return self.cluster.wait_settled()
        raise errors.TransientError(
            f"could not update the labels of cluster {self.ref.name} after "
            f"{self.options.max_attempts + 1} attempts. Fix: check that nothing else keeps "
            "updating the cluster, then retry."
        )

    def _refused(self, exc: Exception) -> LabelsRefusedError:
        detail = getattr(exc, "message", None) or str(exc)
        return LabelsRefusedError(
            f"the service refused to update the labels of cluster {self.ref.name} (PATCH "
            f"updateMask=labels, updateMode=USER_ONLY): {detail}. The labels field is not in "
            "the documented list of updatable fields, so a cluster cannot be kept with an "
            "expiry label here. Fix: delete the cluster instead of keeping it (as "
            "cluster_in_use.keep_or_delete does), or set the teardown policy to delete."
        )

    def _pause(self) -> None:
        self.options.clock.sleep(next(self.options.backoff.delays()))

    def _read_settled(self) -> dict[str, Any] | None:
        """The cluster once RUNNING; None when it is absent or being deleted."""
        cluster = self.cluster.get()
        if cluster is not None and resource.cluster_state(cluster) in (
            resource.PROVISIONING,
            resource.UPDATING,
        ):
            log.info(
                "cluster %s is %s: waiting before changing its labels",
                self.ref.cluster_id,
                resource.cluster_state(cluster),
            )
            cluster = self.cluster.wait_settled()
        if cluster is None:
            log.info("cluster %s does not exist: no labels to update", self.ref.cluster_id)
            return None
        state = resource.cluster_state(cluster)
        if state == resource.STOPPING:
            log.info("cluster %s is being deleted: no labels to update", self.ref.cluster_id)
            return None
        if state != resource.RUNNING:
            raise errors.UserError(
                f"cluster {self.ref.name} is {resource.describe_cluster(cluster)}: its "
                "labels cannot be changed. Fix: delete it (`vsp clusters delete --project "
                f"{self.ref.project} --location {self.ref.location} {self.ref.cluster_id}`); "
                "create_cluster creates it again on the next run."
            )
        return cluster


def update_managed_labels(
    client: rest.VertexRestClient,
    ref: resource.ClusterRef,
    *,
    set_labels: Mapping[str, str] | None = None,
    remove: Iterable[str] = (),
    options: resource.ClusterOptions | None = None,
    settle: bool = True,
) -> dict[str, Any] | None:
    """Sets and removes ``vsp-`` labels of a cluster; see the module docstring.

    Args:
        client: REST client for the cluster's location.
        ref: Which cluster.
        set_labels: Labels to set (keys starting with ``vsp-``).
        remove: Label keys to remove (starting with ``vsp-``); absent keys are ignored.
        options: Waits, attempts, backoff and clock (``update_policy`` is not used).
        settle: Wait for the update to finish (False: return once the PATCH is accepted).

    Returns:
        The cluster as last read (after the update, when one was sent and ``settle``), or None
        when it does not exist or is being deleted (nothing is sent then).

    Raises:
        errors.UserError: A key is not a ``vsp-`` key, is both set and removed, or is invalid
            (raised before any request); or the cluster is in ERROR.
        LabelsRefusedError: The service refused the ``labels`` update mask.
        errors.OperationFailedError: The update operation failed.
        errors.TransientError: No attempt got an answer.
    """
    set_labels = dict(set_labels or {})
    removed = check_label_change(set_labels, remove)
    update = _LabelUpdate(resource.ClusterResource(client, ref, options=options))
    return update.update_labels(set_labels, removed, settle)


def mark_kept(
    client: rest.VertexRestClient,
    ref: resource.ClusterRef,
    labels_from_decision: Mapping[str, str],
    *,
    options: resource.ClusterOptions | None = None,
    pipeline_run: str = "",
) -> dict[str, Any] | None:
    """Records a teardown decision on the cluster (``TeardownDecision.as_labels()``).

    Sets ``vsp-teardown`` and ``vsp-expires-at``; when the decision has no expiry, a stale
    ``vsp-expires-at`` left by an earlier run is removed, so a reaper never acts on it. The
    keeping run's own claim (``vsp-lease-*``) is removed with it: that run is done.

    Args:
        client: REST client for the cluster's location.
        ref: Which cluster.
        labels_from_decision: The decision's labels; must hold ``vsp-teardown``.
        options: Waits, attempts, backoff and clock.
        pipeline_run: The keeping run ('' = none: no claim is removed).

    Returns:
        As ``update_managed_labels``.

    Raises:
        errors.UserError: ``vsp-teardown`` is missing, or a key is not a ``vsp-`` key.
    """
    labels = dict(labels_from_decision)
    if gcp_labels.TEARDOWN not in labels:
        raise errors.UserError(
            f"labels_from_decision = {labels!r} has no {gcp_labels.TEARDOWN!r}. Fix: pass "
            "the labels of the teardown decision (TeardownDecision.as_labels())."
        )
    remove = [] if gcp_labels.EXPIRES_AT in labels else [gcp_labels.EXPIRES_AT]
    if pipeline_run:
        remove.append(gcp_labels.lease_key(pipeline_run))
    return update_managed_labels(client, ref, set_labels=labels, remove=remove, options=options)
