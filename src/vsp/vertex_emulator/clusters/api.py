"""The ``modelDevelopmentClusters`` resource (Vertex AI training clusters, managed Slurm).

Routes (under ``/v1beta1/`` and ``/v1/``), ``P`` = ``projects/{p}/locations/{l}``:
``POST P/modelDevelopmentClusters?model_development_cluster_id=ID`` (create -> LRO),
``GET P/modelDevelopmentClusters`` (list), ``GET|PATCH|DELETE P/modelDevelopmentClusters/{id}``.

Lifecycle, each step an operation completed from its stored due time: create -> PROVISIONING
-> RUNNING (or ERROR when an ``lro_error`` fault fired: the cluster stays registered); PATCH ->
UPDATING -> RUNNING (``scale_up_delay_seconds`` when a node pool grows, as when a shrunk
cluster's GPU pools come back, else ``update_delay_seconds``; a failed update restores the
previous spec); DELETE -> STOPPING -> gone (a failed delete leaves the cluster in ERROR).
Stored as ``{"cluster": <public JSON>, "pending": <operation name or null>, "previous":
<cluster before an update or null>, "update_mode": <the updateMode of the last accepted
PATCH, or null when none was sent>}``.

Settings: ``cluster_fixed_size_pools`` refuses non-FLEX_START pools whose min and max node
counts differ (create, and PATCH with ``node_pools`` in the mask); ``cluster_labels_updatable``
false refuses the ``labels`` mask; ``cluster_empty_pools_allowed`` false refuses a non-FLEX_START
pool of no nodes. All answer INVALID_ARGUMENT with field violations.
"""

from __future__ import annotations

import functools
from typing import Any

from vsp.vertex_emulator import clock, errors, operations, paging, router
from vsp.vertex_emulator.clusters import checks as cluster_checks
from vsp.vertex_emulator.clusters import schema as cluster_schema

COLLECTION = "clusters"
CLUSTER_TYPE = operations.type_url("ModelDevelopmentCluster")
DETAILS = {
    "PROVISIONING": "The cluster is being provisioned.",
    "RUNNING": "The cluster is running.",
    "UPDATING": "The cluster is being updated.",
    "STOPPING": "The cluster is being deleted.",
}
DEFAULT_LRO_ERROR = (
    "The zone does not have enough resources available to fulfill the request (stockout). "
    "Try a different zone, or try again later."
)
UPDATE_MODES = frozenset({"", "UPDATE_MODE_UNSPECIFIED", "USER_ONLY", "USER_AND_SERVICE"})

_PARENT = r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
_LIST = _PARENT + r"/modelDevelopmentClusters"
_ITEM = _LIST + r"/(?P<cluster>[^/:]+)"


def register(app: Any) -> None:
    """Adds the cluster routes and operation completers to the app."""
    app.router.add_api("POST", _LIST, create_cluster, name="clusters.create")
    app.router.add_api("GET", _LIST, list_clusters, name="clusters.list")
    app.router.add_api("GET", _ITEM, get_cluster, name="clusters.get")
    app.router.add_api("PATCH", _ITEM, update_cluster, name="clusters.update")
    app.router.add_api("DELETE", _ITEM, delete_cluster, name="clusters.delete")
    for kind, completer in (
        ("cluster.create", _complete_create),
        ("cluster.update", _complete_update),
        ("cluster.delete", _complete_delete),
    ):
        app.operations.register_kind(kind, functools.partial(completer, app))


def cluster_name(params: dict[str, str], cluster_id: str | None = None) -> str:
    """The full resource name from route parameters."""
    parent = f"projects/{params['project']}/locations/{params['location']}"
    return f"{parent}/modelDevelopmentClusters/{cluster_id or params['cluster']}"


def create_cluster(request: router.Request) -> router.Response:
    """Validates and registers a cluster, and starts its provisioning operation."""
    app = request.app
    cluster_id = request.query_value("model_development_cluster_id", "modelDevelopmentClusterId")
    spec = cluster_schema.normalize(
        request.json_object(), strict=app.settings.reject_unknown_fields
    )
    violations = cluster_checks.check_cluster_id(cluster_id, spec)
    violations += cluster_checks.check_spec(spec)
    if app.settings.cluster_fixed_size_pools:
        violations += cluster_checks.check_pool_sizes(spec)
    if not app.settings.cluster_empty_pools_allowed:
        violations += cluster_checks.check_empty_pools(spec)
    if violations:
        raise errors.invalid_fields("Invalid ModelDevelopmentCluster", violations)
    name = cluster_name(request.params, cluster_id)
    if app.store.contains(COLLECTION, name):
        raise errors.already_exists(f'ModelDevelopmentCluster "{name}" already exists.')
    now = app.now()
    failure = request.take_fault("lro_error")
    override = request.take_fault("provisioning_delay")
    seconds = override.seconds if override else app.settings.provisioning_delay_seconds
    stamp = clock.rfc3339(now)
    cluster_schema.add_output_fields(spec)
    cluster = {
        **spec,
        "name": name,
        "createTime": stamp,
        "updateTime": stamp,
        "clusterStatus": _status("PROVISIONING"),
        "clusterEvents": [],
    }
    operation = app.operations.create(
        parent=_parent(request.params),
        kind="cluster.create",
        metadata={
            "@type": operations.type_url("CreateModelDevelopmentClusterOperationMetadata"),
            "progressMessage": "Create Model Development Cluster request received, provisioning...",
        },
        due=now + app.settings.scaled(seconds),
        target=name,
        payload={"failure": _failure(failure)},
        now=now,
    )
    app.store.put(
        COLLECTION, name, {"cluster": cluster, "pending": operation["name"], "previous": None}
    )
    return router.Response(operation)


def get_cluster(request: router.Request) -> router.Response:
    """Returns one cluster."""
    return router.Response(_load(request)["cluster"])


def list_clusters(request: router.Request) -> router.Response:
    """Lists the clusters of a location by name, a page at a time."""
    prefix = f"{_parent(request.params)}/modelDevelopmentClusters/"
    names = sorted(k for k in request.app.store.keys(COLLECTION) if k.startswith(prefix))
    chosen, body = paging.page(request, names, str, prefix)
    if chosen:
        body["modelDevelopmentClusters"] = [
            request.app.store.get(COLLECTION, n)["cluster"] for n in chosen
        ]
    return router.Response(body)


def update_cluster(request: router.Request) -> router.Response:
    """Applies the masked fields of the body and starts an update operation."""
    app = request.app
    record = _load(request)
    paths = cluster_checks.parse_update_mask(request.query_value("updateMask", "update_mask"))
    violations = cluster_checks.check_update_mask(
        paths, labels_updatable=app.settings.cluster_labels_updatable
    )
    mode = request.query_value("updateMode", "update_mode") or ""
    if mode not in UPDATE_MODES:
        allowed = ", ".join(sorted(m for m in UPDATE_MODES if m))
        violations.append(errors.FieldViolation("update_mode", f'Invalid "{mode}"; use {allowed}.'))
    if violations:
        raise errors.invalid_fields("Invalid update request", violations)
    incoming = cluster_schema.normalize(
        request.json_object(), strict=app.settings.reject_unknown_fields
    )
    current = record["cluster"]
    state = current["clusterStatus"]["state"]
    if state != "RUNNING":
        raise errors.failed_precondition(
            f'ModelDevelopmentCluster "{current["name"]}" is {state}; only a RUNNING cluster '
            "can be updated."
        )
    updated = cluster_checks.apply_update_mask(current, incoming, paths)
    violations = cluster_checks.check_pool_changes(current, updated)
    violations += cluster_checks.check_spec(updated)
    if app.settings.cluster_fixed_size_pools and "node_pools" in paths:
        violations += cluster_checks.check_pool_sizes(updated)
    if not app.settings.cluster_empty_pools_allowed and "node_pools" in paths:
        violations += cluster_checks.check_empty_pools(updated)
    if violations:
        raise errors.invalid_fields("Invalid ModelDevelopmentCluster", violations)
    now = app.now()
    failure = request.take_fault("lro_error")
    for pool in updated.get("nodePools") or []:
        pool.pop("effectiveFlexStartMaxDuration", None)
    cluster_schema.add_output_fields(updated)
    updated["updateTime"] = clock.rfc3339(now)
    updated["clusterStatus"] = _status("UPDATING")
    operation = app.operations.create(
        parent=_parent(request.params),
        kind="cluster.update",
        metadata={"@type": operations.type_url("UpdateModelDevelopmentClusterOperationMetadata")},
        due=now + app.settings.scaled(_update_seconds(app.settings, current, updated, paths)),
        target=current["name"],
        payload={"failure": _failure(failure)},
        now=now,
    )
    record.update(
        cluster=updated, pending=operation["name"], previous=current, update_mode=mode or None
    )
    app.store.put(COLLECTION, current["name"], record)
    return router.Response(operation)


def _node_counts(cluster: dict[str, Any]) -> dict[str, int]:
    counts = {}
    for pool in cluster.get("nodePools") or []:
        scaling = pool.get("scalingSpec") or {}
        counts[str(pool.get("id"))] = max(
            int(scaling.get("minNodeCount") or 0), int(scaling.get("maxNodeCount") or 0)
        )
    return counts


def _update_seconds(
    settings: Any, current: dict[str, Any], updated: dict[str, Any], paths: list[str]
) -> float:
    """How long an update takes: a scale-up (new nodes boot) or any other change."""
    if "node_pools" in paths:
        before, after = _node_counts(current), _node_counts(updated)
        if any(count > before.get(pool, 0) for pool, count in after.items()):
            return settings.scale_up_delay_seconds
    return settings.update_delay_seconds


def delete_cluster(request: router.Request) -> router.Response:
    """Starts deleting a cluster; a pending create or update operation is cancelled."""
    app = request.app
    record = _load(request)
    cluster = record["cluster"]
    if cluster["clusterStatus"]["state"] == "STOPPING":
        raise errors.failed_precondition(
            f'ModelDevelopmentCluster "{cluster["name"]}" is already being deleted.'
        )
    now = app.now()
    if record["pending"]:
        cancelled = errors.rpc_status("CANCELLED", "Cancelled: the cluster is being deleted.")
        app.operations.finish(record["pending"], at=now, error=cancelled)
    failure = request.take_fault("lro_error")
    cluster["updateTime"] = clock.rfc3339(now)
    cluster["clusterStatus"] = _status("STOPPING")
    operation = app.operations.create(
        parent=_parent(request.params),
        kind="cluster.delete",
        metadata={"@type": operations.type_url("DeleteOperationMetadata")},
        due=now + app.settings.scaled(app.settings.delete_delay_seconds),
        target=cluster["name"],
        payload={"failure": _failure(failure)},
        now=now,
    )
    record.update(cluster=cluster, pending=operation["name"], previous=None)
    app.store.put(COLLECTION, cluster["name"], record)
    return router.Response(operation)


def _complete_create(app: Any, operation: dict[str, Any], at: float) -> tuple[Any, Any]:
    record = app.store.get(COLLECTION, operation["target"])
    if record is None:
        return None, errors.rpc_status("NOT_FOUND", "The cluster no longer exists.")
    cluster = record["cluster"]
    failure = operation["payload"].get("failure")
    cluster["updateTime"] = clock.rfc3339(at)
    if failure:
        error = errors.rpc_status(failure["code"], failure["message"])
        cluster["clusterStatus"] = _status(failure["cluster_state"] or "ERROR", error)
    else:
        error = None
        cluster["clusterStatus"] = _status("RUNNING")
        cluster.setdefault("startTime", clock.rfc3339(at))
    _save(app, record, cluster)
    return (None, error) if error else ({"@type": CLUSTER_TYPE, **cluster}, None)


def _complete_update(app: Any, operation: dict[str, Any], at: float) -> tuple[Any, Any]:
    record = app.store.get(COLLECTION, operation["target"])
    if record is None:
        return None, errors.rpc_status("NOT_FOUND", "The cluster no longer exists.")
    failure = operation["payload"].get("failure")
    if failure:
        cluster = record["previous"] or record["cluster"]
        error = errors.rpc_status(failure["code"], failure["message"])
        cluster["clusterStatus"] = _status(failure["cluster_state"] or "RUNNING", error)
    else:
        cluster, error = record["cluster"], None
        cluster["clusterStatus"] = _status("RUNNING")
    cluster["updateTime"] = clock.rfc3339(at)
    _save(app, record, cluster)
    return (None, error) if error else ({"@type": CLUSTER_TYPE, **cluster}, None)


def _complete_delete(app: Any, operation: dict[str, Any], at: float) -> tuple[Any, Any]:
    record = app.store.get(COLLECTION, operation["target"])
    failure = operation["payload"].get("failure")
    if record is not None and failure:
        cluster = record["cluster"]
        error = errors.rpc_status(failure["code"], failure["message"])
        cluster["clusterStatus"] = _status(failure["cluster_state"] or "ERROR", error)
        cluster["updateTime"] = clock.rfc3339(at)
        _save(app, record, cluster)
        return None, error
    app.store.delete(COLLECTION, operation["target"])
    return operations.empty_response(), None


def _save(app: Any, record: dict[str, Any], cluster: dict[str, Any]) -> None:
    record.update(cluster=cluster, pending=None, previous=None)
    app.store.put(COLLECTION, cluster["name"], record)


def _status(state: str, error: dict[str, Any] | None = None) -> dict[str, Any]:
    if error is None:
        return {"state": state, "detail": DETAILS.get(state, state)}
    return {"state": state, "detail": error["message"], "error": error}


def _failure(rule: Any) -> dict[str, Any] | None:
    if rule is None:
        return None
    return {
        "code": rule.code,
        "message": rule.message or DEFAULT_LRO_ERROR,
        "cluster_state": rule.cluster_state,
    }


def _parent(params: dict[str, str]) -> str:
    return f"projects/{params['project']}/locations/{params['location']}"


def _load(request: router.Request) -> dict[str, Any]:
    name = cluster_name(request.params)
    record = request.app.store.get(COLLECTION, name)
    if record is None:
        raise errors.not_found(f'ModelDevelopmentCluster "{name}" not found.')
    return record
