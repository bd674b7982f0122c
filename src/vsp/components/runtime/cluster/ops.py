"""Create-or-reuse and delete of a Vertex AI training cluster (``modelDevelopmentClusters``).

``ClusterManager.ensure`` decides by the state of the cluster with the requested id:

============== ==============================================================================
not found      create it (``POST ...?model_development_cluster_id=ID``), record the LRO in
               ``gcp_resources``, wait for it
PROVISIONING   wait (a retried step lands here: it re-attaches instead of creating again)
UPDATING       wait, then treat as RUNNING
RUNNING        compare with the desired spec: immutable differences fail, naming the fields;
               mutable differences are applied with PATCH (``update_policy="apply"``, the
               default) or only reported (``"report"``); a cluster an earlier run shrank
               (``cluster_shrink``) is scaled back up under either policy
ERROR          delete it (a failed create leaves the cluster registered), then create
STOPPING       wait until it is gone, then create
============== ==============================================================================

A create is never retried blindly: when the POST fails without an answer (reset, timeout, 5xx),
the cluster is looked up first and only created again when it does not exist. When a create's LRO
ends in error, the cluster it left behind is deleted before the error is raised, so no failed
cluster is left holding capacity; a retried step starts clean.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from vsp.components.runtime.cluster import diff as cluster_diff
from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.cluster import rules
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.cluster.resource import (
    ERROR,
    PROVISIONING,
    RUNNING,
    STOPPING,
    UPDATING,
    ClusterResource,
    cluster_state,
    describe_cluster,
)
from vsp.components.runtime.core import errors, gcp_labels, gcp_resources

log = logging.getLogger(__name__)


def update_mode(mask: list[str]) -> str:
    """``USER_ONLY`` for a labels-only update, else ``USER_AND_SERVICE`` [R MANAGE].

    ``USER_AND_SERVICE`` also refreshes the service-managed startup, prolog and epilog scripts,
    which a spec change wants and a label change must not trigger on a warm cluster.
    """
    return "USER_ONLY" if set(mask) == {"labels"} else "USER_AND_SERVICE"


@dataclasses.dataclass
class EnsureResult:
    """What ``ensure`` did.

    Attributes:
        name: Full resource name of the cluster.
        action: ``created``, ``recreated``, ``reused``, ``updated``, ``scaled_up`` (a cluster
            an earlier run shrank, its pools PATCHed back up) or ``attached`` (a cluster this
            run had already started creating).
        seconds: Seconds spent in ``ensure``.
        cluster: The cluster as last read.
        update_mask: The mutable paths that differed (applied or reported).
    """

    name: str
    action: str
    seconds: float
    cluster: dict[str, Any]
    update_mask: list[str] = dataclasses.field(default_factory=list)

    @property
    def reused(self) -> bool:
        """True when an existing cluster served this run instead of a new one."""
        return self.action in ("reused", "updated", "scaled_up")


class ClusterManager:
    """Create-or-reuse of one cluster, driving its ``ClusterResource``; see the module docstring.

    Args:
        cluster: The cluster (client, reference, ``gcp_resources`` path and options).
    """

    def __init__(self, cluster: ClusterResource):
        self.cluster = cluster
        self.client, self.ref, self.options = cluster.client, cluster.ref, cluster.options

    def get(self) -> dict[str, Any] | None:
        """The cluster, or None when it does not exist."""
        return self.cluster.get()

    def delete(self) -> bool:
        """Deletes the cluster (see ``ClusterResource.delete``)."""
        return self.cluster.delete()

    # ----- ensure ----------------------------------------------------------------------------

    def ensure(self, spec: cluster_spec.ClusterSpec, labels: dict[str, str]) -> EnsureResult:
        """Makes the cluster exist and be RUNNING with ``spec``; see the module docstring.

        Args:
            spec: The desired cluster.
            labels: Labels this tool manages (keys starting with ``vsp-``), added at creation.

        Returns:
            What was done.

        Raises:
            errors.SpecValidationError: The spec is invalid (raised before any request).
            errors.UserError: The existing cluster differs in immutable fields.
            errors.OperationFailedError: Creating the cluster failed.
        """
        rules.validate_cluster(spec, self.ref.cluster_id)
        clock = self.options.clock
        start = clock.now()
        body = spec.to_request_body()
        body["labels"] = {**body.get("labels", {}), **labels}
        run = labels.get(gcp_labels.PIPELINE_RUN, "")
        self._reattach_recorded_create()
        action = "created"
        for _attempt in range(self.options.max_attempts):
            cluster = self.get()
            if cluster is None:
                cluster = self._create(body)
                if cluster is None:
                    continue
                return EnsureResult(self.ref.name, action, clock.now() - start, cluster)
            state = cluster_state(cluster)
            if state in (PROVISIONING, UPDATING):
                log.info("cluster %s is %s: waiting for it", self.ref.cluster_id, state)
                cluster = self.cluster.wait_settled()
                if cluster is None:
                    continue
                state = cluster_state(cluster)
            if state == STOPPING:
                log.info("cluster %s is being deleted: waiting, then creating", self.ref.cluster_id)
                self.cluster.wait_gone()
                continue
            if state == ERROR:
                log.warning(
                    "cluster %s is in ERROR (%s): deleting it, then creating it again",
                    self.ref.cluster_id,
                    describe_cluster(cluster),
                )
                self.delete()
                action = "recreated"
                continue
            if state != RUNNING:
                raise errors.InternalError(
                    f"cluster {self.ref.name} is in unexpected state {state}"
                )
            mine = run and (cluster.get("labels") or {}).get(gcp_labels.PIPELINE_RUN) == run
            reuse_action = "attached" if mine else "reused"
            mask = self._reconcile(spec, cluster)
            shrunk = gcp_labels.is_shrunk(cluster.get("labels"))
            users = ""
            if mask and not shrunk and self.options.update_policy == "apply":
                users = self.options.other_users(cluster) if self.options.other_users else ""
            if users:
                log.warning(
                    "cluster %s differs from the spec in %s, but another run uses it (%s): not "
                    "updating it, as a smaller or changed pool would take nodes from under that "
                    "run's jobs; this run uses the cluster as it is. Fix: apply the change when "
                    "the cluster is idle (a later run, or update_policy apply then)",
                    self.ref.cluster_id,
                    ", ".join(mask),
                    users,
                )
            elif mask and (self.options.update_policy == "apply" or shrunk):
                if shrunk:
                    log.info("cluster %s was shrunk: scaling it back up", self.ref.cluster_id)
                cluster = self._update(spec, body, cluster, mask)
                reuse_action = "attached" if mine else ("scaled_up" if shrunk else "updated")
            return EnsureResult(self.ref.name, reuse_action, clock.now() - start, cluster, mask)
        raise errors.TransientError(
            f"cluster {self.ref.name} did not become RUNNING after "
            f"{self.options.max_attempts} attempts. Fix: check quota and capacity in the zone, "
            "then retry the step."
        )

    def _reattach_recorded_create(self) -> None:
        recorded = gcp_resources.find(
            gcp_resources.read(self.cluster.gcp_resources_path), gcp_resources.LRO
        )
        if recorded is None or not recorded.name.startswith(f"{self.ref.parent}/operations/"):
            return
        log.info("re-attaching to recorded operation %s", recorded.name)
        try:
            self.cluster.wait_operation({"name": recorded.name}, f"create of {self.ref.cluster_id}")
        except errors.NotFoundError:
            log.info("recorded operation %s no longer exists", recorded.name)
        except errors.OperationFailedError as exc:
            log.warning("recorded operation failed: %s", exc)

    def _create(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """Creates and waits; None means "look again" (the state is not known)."""
        log.info("creating cluster %s", self.ref.name)
        try:
            operation = self.client.post(
                self.ref.collection_path,
                body,
                params={"model_development_cluster_id": self.ref.cluster_id},
            )
        except errors.AlreadyExistsError:
            log.info("cluster %s already exists: looking at it", self.ref.cluster_id)
            return None
        except errors.TransientError as exc:
            log.warning("create got no usable answer (%s): looking the cluster up first", exc)
            self.options.clock.sleep(next(self.options.backoff.delays()))
            return None
        self.cluster.record(self.cluster.resource_entry(gcp_resources.LRO, operation["name"]))
        try:
            response = self.cluster.wait_operation(
                operation, f"create of cluster {self.ref.cluster_id}"
            )
        except errors.OperationFailedError:
            log.warning("create failed: deleting what it left behind")
            self.delete()
            raise
        self.cluster.record(
            self.cluster.resource_entry(gcp_resources.LRO, operation["name"]),
            self.cluster.resource_entry(gcp_resources.CLUSTER, self.ref.name),
        )
        cluster = self.get() or response
        if cluster_state(cluster) != RUNNING:
            cluster = self.cluster.wait_settled() or cluster
        return cluster

    def _reconcile(self, spec: cluster_spec.ClusterSpec, cluster: dict[str, Any]) -> list[str]:
        actual = cluster_spec.ClusterSpec.from_api(cluster)
        diff = cluster_diff.diff_cluster(spec, actual)
        if diff.immutable:
            listed = "; ".join(diff.immutable)
            raise errors.UserError(
                f"cluster {self.ref.name} exists with different immutable fields: {listed}. Fix: "
                "use another cluster_id, or delete the cluster (`vsp clusters delete`) first."
            )
        if diff.update_mask:
            log.info(
                "cluster %s differs in mutable fields %s (update_policy=%s)",
                self.ref.cluster_id,
                ",".join(diff.update_mask),
                self.options.update_policy,
            )
        return list(diff.update_mask)

    def _update(
        self,
        spec: cluster_spec.ClusterSpec,
        body: dict[str, Any],
        cluster: dict[str, Any],
        mask: list[str],
    ) -> dict[str, Any]:
        """PATCHes the masked fields; a lost answer is followed by a re-read, not a resend."""
        for _attempt in range(self.options.max_attempts):
            current_labels = cluster.get("labels") or {}
            managed = {k: v for k, v in current_labels.items() if gcp_labels.is_managed(k)}
            user = {k: v for k, v in body.get("labels", {}).items() if not gcp_labels.is_managed(k)}
            patch_body = {**body, "labels": {**user, **managed}}
            try:
                operation = self.client.patch(
                    self.ref.path,
                    patch_body,
                    params={"updateMask": ",".join(mask), "updateMode": update_mode(mask)},
                    retry=False,
                )
            except errors.InvalidArgumentError as exc:
                if "labels" in mask and cluster_labels.labels_refused(exc):
                    raise cluster_labels.LabelsRefusedError(
                        f"the service refused to update cluster {self.ref.name} (mask "
                        f"{','.join(mask)}): {exc.message}. The labels field is not in the "
                        "documented list of updatable fields. Fix: leave the cluster's labels "
                        "as they are, or delete the cluster (`vsp clusters delete`) so that "
                        "create_cluster creates it with the new labels."
                    ) from exc
                raise
            except errors.TransientError as exc:
                log.warning("update got no usable answer (%s): reading the cluster again", exc)
                self.options.clock.sleep(next(self.options.backoff.delays()))
                cluster = self.cluster.wait_settled() or cluster
                mask = self._reconcile(spec, cluster)
                if not mask:
                    return cluster
                continue
            self.cluster.wait_operation(operation, f"update of cluster {self.ref.cluster_id}")
            return self.cluster.wait_settled() or cluster
        raise errors.TransientError(
            f"could not update cluster {self.ref.name} after {self.options.max_attempts} attempts"
        )
