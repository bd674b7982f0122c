"""A training cluster as a remote resource: reads, waits and delete.

``ClusterResource`` knows how to read a cluster, wait for it to settle or disappear, wait on its
operations and delete it (deleting something already gone is success). The create-or-reuse
decisions built on it live in ``cluster_ops``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import Any

from vsp.components.runtime.cluster import rules_base
from vsp.components.runtime.core import errors, gcp_resources, operations, polling, rest

log = logging.getLogger(__name__)

PROVISIONING, RUNNING, UPDATING, STOPPING, ERROR = (
    "PROVISIONING",
    "RUNNING",
    "UPDATING",
    "STOPPING",
    "ERROR",
)
UPDATE_POLICIES = ("apply", "report")


@dataclasses.dataclass(frozen=True)
class ClusterRef:
    """Where a cluster lives.

    Attributes:
        project: Google Cloud project id or number.
        location: Vertex region, e.g. ``us-central1``.
        cluster_id: The cluster id (1-10 lowercase letters and digits with a Slurm orchestrator).
        api_version: REST version of the resource (training clusters are ``v1beta1``).
    """

    project: str
    location: str
    cluster_id: str
    api_version: str = "v1beta1"

    def __post_init__(self) -> None:
        # An id that no cluster can have is a mistake, not an absent cluster: a delete would
        # answer "nothing to delete" while the cluster meant keeps running. "-" is the
        # collection's wildcard (the parent of a list).
        cluster_id = self.cluster_id
        if cluster_id == "-" or (
            isinstance(cluster_id, str) and rules_base.CLUSTER_ID.match(cluster_id)
        ):
            return
        named = (
            rules_base.CLUSTER_NAME_TAIL.search(cluster_id) if isinstance(cluster_id, str) else None
        )
        fix = (
            f"pass the id alone, {named[1]!r} (the last part of the cluster's name)"
            if named
            else "pass the cluster's id: 1-10 lowercase letters and digits, starting with a "
            "letter, as create_cluster was given it"
        )
        raise errors.UserError(
            f"cluster_id {errors.shown(cluster_id, 160)} is not a cluster id. Fix: {fix}."
        )

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.location}"

    @property
    def name(self) -> str:
        return f"{self.parent}/modelDevelopmentClusters/{self.cluster_id}"

    @property
    def path(self) -> str:
        return f"{self.api_version}/{self.name}"

    @property
    def collection_path(self) -> str:
        return f"{self.api_version}/{self.parent}/modelDevelopmentClusters"

    @classmethod
    def from_name(cls, name: str, api_version: str = "v1beta1") -> ClusterRef:
        """The reference of ``projects/P/locations/L/modelDevelopmentClusters/ID``.

        Raises:
            errors.InternalError: ``name`` is not such a name (it came from the API or from
                this tool's own records).
        """
        parts = name.split("/")
        if len(parts) != 6 or parts[0] != "projects" or parts[4] != "modelDevelopmentClusters":
            raise errors.InternalError(f"unexpected cluster name {name!r}")
        return cls(parts[1], parts[3], parts[5], api_version)


@dataclasses.dataclass
class ClusterOptions:
    """How cluster operations wait and react.

    Attributes:
        timeout: Seconds to wait for the cluster to become RUNNING (per wait).
        update_policy: ``apply`` PATCHes mutable differences; ``report`` only logs them.
        max_attempts: How many create/recreate rounds before giving up.
        backoff: Delay schedule of the waits.
        clock: Time source (tests inject ``polling.FakeClock``).
        other_users: Given a reused cluster, who else uses it ('' = nobody; None: not
            asked): an update is not applied under another run's jobs.
    """

    timeout: float = 7200.0
    update_policy: str = "apply"
    max_attempts: int = 3
    backoff: polling.Backoff = polling.Backoff(initial=2.0, maximum=30.0)
    clock: polling.Clock = dataclasses.field(default_factory=polling.RealClock)
    other_users: Callable[[dict[str, Any]], str] | None = None


def cluster_state(cluster: dict[str, Any]) -> str:
    """The ``clusterStatus.state`` of an API cluster (either key spelling)."""
    status = cluster.get("clusterStatus") or cluster.get("cluster_status") or {}
    return str(status.get("state") or "STATE_UNSPECIFIED")


def describe_cluster(cluster: dict[str, Any] | None) -> str:
    if cluster is None:
        return "gone"
    status = cluster.get("clusterStatus") or {}
    detail = status.get("detail")
    return f"{cluster_state(cluster)} ({detail})" if detail else cluster_state(cluster)


def list_clusters(
    client: rest.VertexRestClient, parent: str, api_version: str = "v1beta1"
) -> Iterator[dict[str, Any]]:
    """Yields every cluster under ``projects/P/locations/L``, following page tokens."""
    path = f"{api_version}/{parent}/modelDevelopmentClusters"
    return client.list_all(path, ("modelDevelopmentClusters", "clusters"), {"pageSize": 100})


class ClusterResource:
    """One cluster, driven through the REST client.

    Args:
        client: REST client for the cluster's location.
        ref: Which cluster.
        gcp_resources_path: Where to record the LRO and the cluster ('' to skip).
        options: Waiting and update behaviour.
    """

    def __init__(
        self,
        client: rest.VertexRestClient,
        ref: ClusterRef,
        *,
        gcp_resources_path: str = "",
        options: ClusterOptions | None = None,
    ):
        self.client = client
        self.ref = ref
        self.gcp_resources_path = gcp_resources_path
        self.options = options or ClusterOptions()
        if self.options.update_policy not in UPDATE_POLICIES:
            raise errors.UserError(
                f"update_policy = {self.options.update_policy!r} is not one of {UPDATE_POLICIES}. "
                "Fix: use 'apply' to PATCH mutable differences or 'report' to only log them."
            )

    # ----- reads and waits -------------------------------------------------------------------

    def get(self) -> dict[str, Any] | None:
        """The cluster, or None when it does not exist."""
        try:
            return self.client.get(self.ref.path)
        except errors.NotFoundError:
            return None

    def _wait(self, done, what: str) -> dict[str, Any] | None:
        result = polling.poll_until(
            self.get,
            done,
            what=what,
            timeout=self.options.timeout,
            backoff=self.options.backoff,
            clock=self.options.clock,
            describe=describe_cluster,
        )
        return result.value

    def wait_settled(self) -> dict[str, Any] | None:
        """The cluster once it is neither PROVISIONING nor UPDATING (None once it is gone)."""
        return self._wait(
            lambda c: c is None or cluster_state(c) not in (PROVISIONING, UPDATING),
            f"cluster {self.ref.cluster_id}",
        )

    def wait_not_stopping(self) -> dict[str, Any] | None:
        """The cluster once it is not STOPPING: a delete in flight ended, by deleting it (None)
        or by failing (the cluster as the service left it)."""
        return self._wait(
            lambda c: c is None or cluster_state(c) != STOPPING,
            f"the delete in flight of cluster {self.ref.cluster_id}",
        )

    def wait_gone(self) -> None:
        """Returns once the cluster no longer exists."""
        self._wait(lambda c: c is None, f"deletion of cluster {self.ref.cluster_id}")

    def wait_operation(self, operation: dict[str, Any], what: str) -> dict[str, Any]:
        """Polls a long-running operation on the cluster to its end; returns its response.

        ``operation`` is the call's answer (its first look) or, re-attaching, just its name.
        """
        return operations.wait_for_operation(
            self.client,
            operation["name"],
            api_version=self.ref.api_version,
            timeout=self.options.timeout,
            backoff=self.options.backoff,
            clock=self.options.clock,
            what=what,
            latest=operation if "done" in operation else None,
        )

    def record(self, *resources: gcp_resources.Resource) -> None:
        """Writes ``gcp_resources`` (nothing when no path was given)."""
        gcp_resources.write(self.gcp_resources_path, list(resources))

    def resource_entry(self, resource_type: str, name: str) -> gcp_resources.Resource:
        """A ``gcp_resources`` entry for a resource of this cluster's API."""
        return gcp_resources.Resource(
            resource_type, self.client.url(f"{self.ref.api_version}/{name}")
        )

    # ----- delete ----------------------------------------------------------------------------

    def delete(self) -> bool:
        """Deletes the cluster and waits until it is gone.

        The DELETE is not retried blindly either: after a failure without an answer the cluster
        is read again, and a deletion already in progress (STOPPING) is waited for.

        Returns:
            True when this call deleted it (or waited for a deletion in progress); False when it
            did not exist. Deleting something already gone is success.
        """
        for _attempt in range(self.options.max_attempts + 2):
            cluster = self.get()
            if cluster is None:
                if _attempt == 0:
                    log.info("cluster %s does not exist: nothing to delete", self.ref.cluster_id)
                    return False
                break
            if cluster_state(cluster) == STOPPING:
                break
            try:
                operation = self.client.delete(self.ref.path, retry=False)
            except errors.NotFoundError:
                break
            except errors.TransientError as exc:
                log.warning("delete got no usable answer (%s): reading the cluster again", exc)
                self.options.clock.sleep(next(self.options.backoff.delays()))
                continue
            except errors.InvalidArgumentError as exc:
                if exc.status != "FAILED_PRECONDITION":
                    raise
                log.info("cluster %s cannot be deleted yet (%s)", self.ref.cluster_id, exc.message)
                self.options.clock.sleep(next(self.options.backoff.delays()))
                continue
            if operation.get("name"):
                self.record(self.resource_entry(gcp_resources.LRO, operation["name"]))
                try:
                    self.wait_operation(operation, f"deletion of cluster {self.ref.cluster_id}")
                except errors.OperationFailedError as exc:
                    if exc.code != 5:  # NOT_FOUND: already gone
                        raise
            break
        else:
            raise errors.TransientError(
                f"could not delete cluster {self.ref.name} after repeated attempts; retry the step"
            )
        self.wait_gone()
        log.info("cluster %s deleted", self.ref.cluster_id)
        return True
