"""CustomJob request validation and what the local replica runs (argv and environment).

``validate`` turns a create body (camelCase or snake_case) into the stored camelCase resource
fields or raises 400 INVALID_ARGUMENT listing every ``google.rpc.BadRequest`` field violation
(dotted snake_case paths such as ``job_spec.worker_pool_specs[0].container_spec.image_uri``).

Only replica 0 of the first worker pool runs, locally: ``containerSpec.command + args`` (the
image is ignored) or ``sys.executable -m pythonModule args`` for a ``pythonPackageSpec``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from vsp.components.runtime.core import gcs_paths
from vsp.vertex_emulator import casing, clock, errors, field_rules

STRATEGIES = ("STRATEGY_UNSPECIFIED", "STANDARD", "SPOT", "FLEX_START", "ON_DEMAND", "LOW_COST")
CREATE_FIELDS = frozenset(
    {"displayName", "jobSpec", "labels", "encryptionSpec", "name", "state", "createTime"}
)
JOB_SPEC_FIELDS = frozenset(
    {"workerPoolSpecs", "scheduling", "baseOutputDirectory", "serviceAccount", "network"}
    | {"tensorboard", "enableWebAccess", "enableDashboardAccess", "experiment", "models"}
    | {"reservedIpRanges", "protectedArtifactLocationId", "pscInterfaceConfig"}
    | {"experimentRun", "persistentResourceId"}
)
DEFAULT_DISK = {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}


def _v(field: str, description: str) -> errors.FieldViolation:
    return errors.FieldViolation(field, description)


def _get(holder: Any, key: str) -> Any:
    return holder.get(key) if isinstance(holder, dict) else None


def _check_duration(value: Any, field: str, out: list[errors.FieldViolation]) -> None:
    if value is not None and clock.duration_seconds(value) is None:
        out.append(_v(field, f'Invalid duration {value!r}: use seconds with an "s" suffix.'))


def _check_pool(pool: Any, where: str, first: bool, out: list[errors.FieldViolation]) -> None:
    if not isinstance(pool, dict):
        out.append(_v(where, "A worker pool spec must be an object."))
        return
    machine = pool.get("machineSpec")
    if not isinstance(machine, dict) or not machine.get("machineType"):
        out.append(_v(f"{where}.machine_spec.machine_type", "Machine type must be specified."))
    out += field_rules.integer_violations(
        [
            (_get(machine, "acceleratorCount"), f"{where}.machine_spec.accelerator_count"),
            (_get(pool.get("diskSpec"), "bootDiskSizeGb"), f"{where}.disk_spec.boot_disk_size_gb"),
        ],
        maximum=field_rules.INT32_MAX,
    )
    count = pool.get("replicaCount", "1")
    replicas = 0 if count is None else field_rules.integer(count)
    if replicas is None:
        out += field_rules.integer_violations([(count, f"{where}.replica_count")])
    elif first and replicas != 1:
        out.append(_v(f"{where}.replica_count", "The first worker pool must have 1 replica."))
    container, package = pool.get("containerSpec"), pool.get("pythonPackageSpec")
    if (container is None) == (package is None):
        out.append(_v(where, "Exactly one of container_spec and python_package_spec must be set."))
        return
    if container is not None:
        spec, name = container, "container_spec"
        if not isinstance(spec, dict) or not spec.get("imageUri"):
            out.append(_v(f"{where}.{name}.image_uri", "Image URI must be specified."))
            return
        uri = field_rules.image_uri_violation(spec["imageUri"], f"{where}.{name}.image_uri")
        out += [uri] if uri else []
    else:
        spec, name = package, "python_package_spec"
        if not isinstance(spec, dict):
            out.append(_v(f"{where}.{name}", "Python package spec must be an object."))
            return
        for field, snake in (("executorImageUri", "executor_image_uri"), ("pythonModule", "")):
            if not spec.get(field):
                path = f"{where}.{name}.{snake or 'python_module'}"
                out.append(_v(path, f"{field} must be specified."))
        uris = spec.get("packageUris")
        if not isinstance(uris, list) or not uris or len(uris) > 100:
            out.append(_v(f"{where}.{name}.package_uris", "Give 1 to 100 package URIs."))
    for key in ("command", "args"):
        items = spec.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            out.append(_v(f"{where}.{name}.{key}", f"{key} must be a list of strings."))
    env = spec.get("env", [])
    if not isinstance(env, list):
        out.append(_v(f"{where}.{name}.env", "env must be a list of {name, value}."))
        return
    for i, item in enumerate(env):
        if not isinstance(item, dict) or not item.get("name"):
            out.append(_v(f"{where}.{name}.env[{i}].name", "Environment variable needs a name."))


def _check_scheduling(scheduling: Any, out: list[errors.FieldViolation]) -> None:
    where = "job_spec.scheduling"
    if not isinstance(scheduling, dict):
        out.append(_v(where, "scheduling must be an object."))
        return
    strategy = scheduling.get("strategy", "STRATEGY_UNSPECIFIED")
    if strategy not in STRATEGIES:
        out.append(_v(f"{where}.strategy", f"Invalid strategy {strategy!r}; use {STRATEGIES}."))
    _check_duration(scheduling.get("timeout"), f"{where}.timeout", out)
    _check_duration(scheduling.get("maxWaitDuration"), f"{where}.max_wait_duration", out)
    for flag in ("restartJobOnWorkerRestart", "disableRetries"):
        if not isinstance(scheduling.get(flag, False), bool):
            out.append(_v(f"{where}.{casing.camel_to_snake(flag)}", f"{flag} must be a bool."))


def validate(body: dict[str, Any], *, reject_unknown: bool) -> dict[str, Any]:
    """Validates a create body and returns ``{"displayName", "jobSpec", "labels"}`` (camelCase).

    Raises:
        errors.ApiException: 400 INVALID_ARGUMENT with every field violation.
    """
    try:
        body = casing.to_camel(body)
    except casing.CaseConflictError as exc:
        raise errors.invalid_argument(str(exc), [_v(exc.path, str(exc))]) from exc
    out: list[errors.FieldViolation] = []
    unknown = sorted(set(body) - CREATE_FIELDS)
    spec = body.get("jobSpec")
    if isinstance(spec, dict):
        unknown += [f"jobSpec.{k}" for k in sorted(set(spec) - JOB_SPEC_FIELDS)]
    if unknown and reject_unknown:
        message = f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.'
        raise errors.invalid_argument(message, [_v(casing.camel_to_snake(unknown[0]), message)])
    if not isinstance(body.get("displayName"), str) or not body["displayName"].strip():
        out.append(_v("display_name", "Display name must be specified."))
    elif name := field_rules.display_name_violation(body["displayName"], "display_name"):
        out.append(name)
    labels = body.get("labels") or {}
    out += field_rules.label_violations(labels, "labels")
    if not isinstance(spec, dict):
        out.append(_v("job_spec", "Job spec must be specified."))
        raise errors.invalid_fields("Invalid CustomJob", out)
    pools = spec.get("workerPoolSpecs")
    if not isinstance(pools, list) or not pools or not pools[0]:
        out.append(_v("job_spec.worker_pool_specs", "At least one worker pool must be set."))
        pools = []
    for i, pool in enumerate(pools):
        if pool or i == 0:  # An empty pool spec (placeholder) is allowed after the first.
            _check_pool(pool, f"job_spec.worker_pool_specs[{i}]", i == 0, out)
    if "scheduling" in spec:
        _check_scheduling(spec["scheduling"], out)
    base = spec.get("baseOutputDirectory")
    if base is not None and not (isinstance(base, dict) and base.get("outputUriPrefix")):
        out.append(_v("job_spec.base_output_directory.output_uri_prefix", "Must be set."))
    if out:
        raise errors.invalid_fields("Invalid CustomJob", out)
    spec = {k: v for k, v in spec.items()}
    spec["workerPoolSpecs"] = [_normalize_pool(p) for p in pools]
    return {"displayName": body["displayName"], "jobSpec": spec, "labels": dict(labels)}


def _normalize_pool(pool: dict[str, Any]) -> dict[str, Any]:
    if not pool:
        return {}
    pool = dict(pool)
    count = pool.get("replicaCount", "1")
    pool["replicaCount"] = str(0 if count is None else field_rules.integer(count))
    pool.setdefault("diskSpec", dict(DEFAULT_DISK))
    return pool


def strategy(job_spec: dict[str, Any]) -> str:
    """The scheduling strategy (STRATEGY_UNSPECIFIED counts as STANDARD)."""
    value = (job_spec.get("scheduling") or {}).get("strategy") or "STANDARD"
    return "STANDARD" if value == "STRATEGY_UNSPECIFIED" else value


def local_path(uri: str, gcs_root: str) -> str:
    """``gs://b/x`` -> ``{gcs_root}/b/x``; other URIs are returned unchanged."""
    return os.path.join(gcs_root, uri[5:]) if uri.startswith("gs://") else uri


def command(job_spec: dict[str, Any]) -> list[str]:
    """The argv replica 0 of the first worker pool runs (may be empty: nothing to run)."""
    pool = job_spec["workerPoolSpecs"][0]
    if "containerSpec" in pool:
        spec = pool["containerSpec"]
        return [*spec.get("command", []), *spec.get("args", [])]
    spec = pool["pythonPackageSpec"]
    return [sys.executable, "-m", spec["pythonModule"], *spec.get("args", [])]


def environment(
    job_spec: dict[str, Any], *, project: str, job_id: str, gcs_root: str, home: str
) -> dict[str, str]:
    """The whole environment of the replica (no emulator PYTHONPATH or VIRTUAL_ENV).

    Args:
        job_spec: The stored (camelCase) job spec.
        project: Project of the job (``CLOUD_ML_PROJECT_ID``; Vertex sets the number).
        job_id: Numeric job id (``CLOUD_ML_JOB_ID``).
        gcs_root: Local directory emulating Cloud Storage (``VSP_GCS_FUSE_ROOT``).
        home: ``HOME`` of the replica.
    """
    pool = job_spec["workerPoolSpecs"][0]
    spec = pool.get("containerSpec") or pool.get("pythonPackageSpec") or {}
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": home,
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "CLOUD_ML_PROJECT_ID": project,
        "CLOUD_ML_JOB_ID": job_id,
        gcs_paths.GCS_FUSE_ROOT_ENV: gcs_root,
    }
    base = (job_spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if base:
        base = base.rstrip("/")
        env["AIP_MODEL_DIR"] = f"{base}/model/"
        env["AIP_CHECKPOINT_DIR"] = f"{base}/checkpoints/"
        env["AIP_TENSORBOARD_LOG_DIR"] = f"{base}/logs/"
    if "pythonPackageSpec" in pool:
        paths = [local_path(u, gcs_root) for u in spec.get("packageUris", [])]
        found = [p for p in paths if os.path.isdir(p) or p.endswith((".whl", ".zip"))]
        if found:
            env["PYTHONPATH"] = os.pathsep.join(found)
    for item in spec.get("env", []):
        env[item["name"]] = str(item.get("value", ""))
    return env
