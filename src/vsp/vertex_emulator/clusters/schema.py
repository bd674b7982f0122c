"""The ModelDevelopmentCluster request schema: known fields, casing and output-only fields.

Field violations name fields by their snake_case path relative to the cluster, with list
indices, e.g. ``node_pools[1].machine_spec``.
"""

from __future__ import annotations

from typing import Any

from vsp.vertex_emulator import casing, errors

MAP = "map"  # user-keyed map: keys are data, values are not checked
ANY = "any"  # accepted without checking inside

_MACHINE_SPEC = {
    "machine_type": None,
    "accelerator_type": None,
    "accelerator_count": None,
    "tpu_topology": None,
    "reservation_affinity": {"reservation_affinity_type": None, "key": None, "values": None},
}
_NODE_POOL = {
    "id": None,
    "machine_spec": _MACHINE_SPEC,
    "provisioning_model": None,
    "flex_start_max_duration": None,
    "effective_flex_start_max_duration": None,
    "scaling_spec": {"min_node_count": None, "max_node_count": None},
    "zone": None,
    "enable_public_ips": None,
    "boot_disk": {"boot_disk_type": None, "boot_disk_size_gb": None},
    "startup_script": None,
    "node_image": None,
    "filestores": None,
    "lustres": None,
    "labels": MAP,
    "confidential_instance_config": {"confidential_instance_type": None},
}
_SLURM_SPEC = {
    "home_directory_storage": None,
    "login_node_pool_id": None,
    "partitions": [{"id": None, "node_pool_ids": None, "config": MAP}],
    "default_partition_id": None,
    "config": MAP,
    "node_sets": [{"node_pool_id": None, "config": MAP}],
    "prolog_bash_scripts": None,
    "epilog_bash_scripts": None,
    "scheduling": ANY,
    "accounting": ANY,
}
CLUSTER_SCHEMA: dict[str, Any] = {
    "name": None,
    "display_name": None,
    "labels": MAP,
    "network": {"network": None, "subnetwork": None},
    "node_pools": [_NODE_POOL],
    "orchestrator_spec": {"slurm_spec": _SLURM_SPEC},
    "runtime_spec": {"service_account": None},
    "lustre_export_config": {"destination_bucket": None, "days_of_week": None, "start_time": ANY},
    "create_time": None,
    "update_time": None,
    "start_time": None,
    "cluster_status": ANY,
    "cluster_events": ANY,
}

OUTPUT_ONLY = frozenset(
    {"name", "create_time", "update_time", "start_time", "cluster_status", "cluster_events"}
)
DEFAULT_FLEX_START_MAX_DURATION = "604800s"


def unknown_fields(body: Any, schema: Any = None, path: str = "") -> list[errors.FieldViolation]:
    """Violations for fields the schema does not know (either spelling) or of the wrong kind."""
    schema = CLUSTER_SCHEMA if schema is None and not path else schema
    out: list[errors.FieldViolation] = []
    _walk(body, schema, path, out)
    return out


def _walk(value: Any, schema: Any, path: str, out: list[errors.FieldViolation]) -> None:
    if value is None or schema is None or schema == ANY:
        return
    if schema == MAP:
        if not isinstance(value, dict):
            out.append(
                errors.FieldViolation(path, "Invalid value: expected a JSON object (a map).")
            )
        return
    if isinstance(schema, list):
        if not isinstance(value, list):
            out.append(errors.FieldViolation(path, "Invalid value: expected a JSON list."))
            return
        for index, item in enumerate(value):
            _walk(item, schema[0], f"{path}[{index}]", out)
        return
    if not isinstance(value, dict):
        out.append(errors.FieldViolation(path, "Invalid value: expected a JSON object."))
        return
    where = f"model_development_cluster.{path}" if path else "model_development_cluster"
    for key, item in value.items():
        name = casing.camel_to_snake(key)
        child = f"{path}.{name}" if path else name
        if name not in schema:
            description = f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}': "
            out.append(errors.FieldViolation(child, description + "Cannot find field."))
            continue
        _walk(item, schema[name], child, out)


def normalize(body: dict[str, Any], *, strict: bool) -> dict[str, Any]:
    """The request cluster in camelCase without output-only fields.

    Args:
        body: The request body as sent (snake_case and/or camelCase keys).
        strict: Reject unknown fields.

    Raises:
        errors.ApiException: INVALID_ARGUMENT for unknown fields or a field given twice.
    """
    if strict:
        violations = unknown_fields(body)
        if violations:
            message = " ".join(v.description for v in violations)
            raise errors.invalid_argument(message, violations)
    try:
        spec = casing.to_camel(_drop_nulls(body))
    except casing.CaseConflictError as exc:
        raise errors.invalid_argument(
            str(exc), [errors.FieldViolation(exc.path, str(exc))]
        ) from exc
    for name in OUTPUT_ONLY:
        spec.pop(casing.snake_to_camel(name), None)
    for pool in spec.get("nodePools") or []:
        if isinstance(pool, dict):
            pool.pop("effectiveFlexStartMaxDuration", None)
    return spec


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def add_output_fields(spec: dict[str, Any]) -> None:
    """Adds the output-only fields derived from the spec (``effectiveFlexStartMaxDuration``)."""
    for pool in spec.get("nodePools") or []:
        if isinstance(pool, dict) and pool.get("provisioningModel") == "FLEX_START":
            duration = pool.get("flexStartMaxDuration") or DEFAULT_FLEX_START_MAX_DURATION
            pool["effectiveFlexStartMaxDuration"] = duration


def is_known_path(path: str) -> bool:
    """Whether a snake_case dotted path names a field of the schema (map keys included)."""
    schema: Any = CLUSTER_SCHEMA
    for segment in path.split("."):
        if isinstance(schema, list):
            schema = schema[0]
        if schema in (MAP, ANY):
            return True
        if not isinstance(schema, dict) or segment not in schema:
            return False
        schema = schema[segment]
    return True


def get_path(value: Any, *keys: str) -> Any:
    """``value[k1][k2]...``, or None where a level is missing or not an object."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value
