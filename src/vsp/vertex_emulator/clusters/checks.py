"""Service-side checks on ModelDevelopmentCluster requests: ids, references, update masks.

Field violations name fields by their snake_case path relative to the cluster, with list
indices, e.g. ``orchestrator_spec.slurm_spec.login_node_pool_id`` or ``node_pools[1].id``; the
cluster id is ``model_development_cluster_id`` and update-mask problems are on ``update_mask``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from vsp.vertex_emulator import casing, errors
from vsp.vertex_emulator.clusters import fields as cluster_fields
from vsp.vertex_emulator.clusters import schema as cluster_schema

_SLURM = "orchestrator_spec.slurm_spec"
UPDATABLE = frozenset(
    {"display_name", "labels", "node_pools", "lustre_export_config"}
    | {
        f"{_SLURM}.{name}"
        for name in (
            "partitions",
            "login_node_pool_id",
            "prolog_bash_scripts",
            "epilog_bash_scripts",
            "config",
            "node_sets",
            "default_partition_id",
            "scheduling",
            "accounting",
        )
    }
)
IMMUTABLE_POOL_FIELDS = ("machineSpec", "provisioningModel", "confidentialInstanceConfig")
PROVISIONING_MODELS = frozenset({"ON_DEMAND", "SPOT", "RESERVATION", "FLEX_START"})
CLUSTER_ID_PATTERN = re.compile(r"^[a-z]([a-z0-9-]{0,8}[a-z0-9])?$")
ID_FIELD = "model_development_cluster_id"


def check_pool_sizes(spec: dict[str, Any]) -> list[errors.FieldViolation]:
    """Violations of the create-cluster reference's "MIN_NODE_COUNT must equal MAX_NODE_COUNT".

    FLEX_START pools are exempt: they scale from 0 (min 0 / max N). Unset counts are 0, as in
    proto3 JSON; int64 counts may come as strings; invalid counts are ``check_spec``'s.
    """
    out = []
    for index, pool in enumerate(spec.get("nodePools") or []):
        if not isinstance(pool, dict) or pool.get("provisioningModel") == "FLEX_START":
            continue
        scaling = pool.get("scalingSpec") if isinstance(pool.get("scalingSpec"), dict) else {}
        low, high = (
            cluster_fields.node_count(scaling.get(k)) for k in ("minNodeCount", "maxNodeCount")
        )
        if low is not None and high is not None and low != high:
            out.append(
                errors.FieldViolation(
                    f"node_pools[{index}].scaling_spec.min_node_count",
                    f'Node pool "{pool.get("id")}": min_node_count ({low}) must equal '
                    f"max_node_count ({high}); only FLEX_START pools may scale from 0.",
                )
            )
    return out


def check_empty_pools(spec: dict[str, Any]) -> list[errors.FieldViolation]:
    """Violations of the stricter reading of pool sizes: a pool needs at least one node.

    Whether the service accepts ``max_node_count`` 0 (a pool scaled to no nodes) is not
    documented; ``cluster_empty_pools_allowed`` false plays a service that refuses it.
    """
    out = []
    for index, pool in enumerate(spec.get("nodePools") or []):
        if not isinstance(pool, dict) or pool.get("provisioningModel") == "FLEX_START":
            continue
        scaling = pool.get("scalingSpec") if isinstance(pool.get("scalingSpec"), dict) else {}
        if cluster_fields.node_count(scaling.get("maxNodeCount")) == 0:
            out.append(
                errors.FieldViolation(
                    f"node_pools[{index}].scaling_spec.max_node_count",
                    f'Node pool "{pool.get("id")}": max_node_count must be at least 1.',
                )
            )
    return out


def check_cluster_id(cluster_id: str | None, spec: dict[str, Any]) -> list[errors.FieldViolation]:
    """Violations of the cluster id rules (pattern; no hyphen with a Slurm spec)."""
    if not cluster_id:
        return [
            errors.FieldViolation(
                ID_FIELD, f"A cluster id is required (query parameter {ID_FIELD})."
            )
        ]
    if not CLUSTER_ID_PATTERN.fullmatch(cluster_id):
        return [
            errors.FieldViolation(
                ID_FIELD,
                f'"{cluster_id}" is not a valid cluster id: use 1-10 characters, a lowercase '
                "letter first, then lowercase letters, digits or hyphens, not ending in a hyphen.",
            )
        ]
    if "-" in cluster_id and isinstance(
        cluster_schema.get_path(spec, "orchestratorSpec", "slurmSpec"), dict
    ):
        return [
            errors.FieldViolation(
                ID_FIELD,
                f'"{cluster_id}" is not a valid Slurm cluster id: hyphens are not allowed.',
            )
        ]
    return []


def check_spec(spec: dict[str, Any]) -> list[errors.FieldViolation]:
    """Violations of the service-side rules on a (camelCase) cluster spec."""
    out: list[errors.FieldViolation] = []
    pools = spec.get("nodePools")
    pool_ids: list[str] = []
    if not isinstance(pools, list) or not pools:
        out.append(errors.FieldViolation("node_pools", "At least one node pool is required."))
    else:
        for index, pool in enumerate(pools):
            where = f"node_pools[{index}]"
            if not isinstance(pool, dict):
                out.append(errors.FieldViolation(where, "A node pool must be an object."))
                continue
            pool_id = pool.get("id")
            if not pool_id:
                out.append(errors.FieldViolation(f"{where}.id", "A node pool id is required."))
            elif pool_id in pool_ids:
                out.append(
                    errors.FieldViolation(f"{where}.id", f'Duplicate node pool id "{pool_id}".')
                )
            else:
                pool_ids.append(pool_id)
            model = pool.get("provisioningModel")
            if model is not None and model not in PROVISIONING_MODELS:
                allowed = ", ".join(sorted(PROVISIONING_MODELS))
                out.append(
                    errors.FieldViolation(
                        f"{where}.provisioning_model",
                        f'Invalid value "{model}"; use one of {allowed}.',
                    )
                )
    out.extend(cluster_fields.check(spec))
    slurm = cluster_schema.get_path(spec, "orchestratorSpec", "slurmSpec")
    if not isinstance(slurm, dict):
        out.append(errors.FieldViolation(_SLURM, "orchestrator_spec.slurm_spec is required."))
        return out
    out.extend(_check_slurm(slurm, pool_ids))
    return out


def _check_slurm(slurm: dict[str, Any], pool_ids: list[str]) -> list[errors.FieldViolation]:
    out: list[errors.FieldViolation] = []

    def missing_pool(field: str, ref: Any) -> None:
        if pool_ids and ref not in pool_ids:
            out.append(
                errors.FieldViolation(field, f'Node pool "{ref}" does not exist in node_pools.')
            )

    if not slurm.get("homeDirectoryStorage"):
        out.append(
            errors.FieldViolation(
                f"{_SLURM}.home_directory_storage",
                "A home directory storage (Filestore or Lustre instance) is required.",
            )
        )
    login = slurm.get("loginNodePoolId")
    if not login:
        out.append(
            errors.FieldViolation(f"{_SLURM}.login_node_pool_id", "A login node pool is required.")
        )
    else:
        missing_pool(f"{_SLURM}.login_node_pool_id", login)
    partition_ids = []
    for index, partition in enumerate(slurm.get("partitions") or []):
        where = f"{_SLURM}.partitions[{index}]"
        if not isinstance(partition, dict):
            out.append(errors.FieldViolation(where, "A partition must be an object."))
            continue
        if not partition.get("id"):
            out.append(errors.FieldViolation(f"{where}.id", "A partition id is required."))
        partition_ids.append(partition.get("id"))
        refs = partition.get("nodePoolIds") or []
        if not refs:
            out.append(
                errors.FieldViolation(f"{where}.node_pool_ids", "A partition needs a node pool.")
            )
        for ref_index, ref in enumerate(refs):
            missing_pool(f"{where}.node_pool_ids[{ref_index}]", ref)
    default = slurm.get("defaultPartitionId")
    if default and default not in partition_ids:
        out.append(
            errors.FieldViolation(
                f"{_SLURM}.default_partition_id", f'Partition "{default}" does not exist.'
            )
        )
    for index, node_set in enumerate(slurm.get("nodeSets") or []):
        field = f"{_SLURM}.node_sets[{index}].node_pool_id"
        ref = node_set.get("nodePoolId") if isinstance(node_set, dict) else None
        if ref is not None and ref == login:
            out.append(errors.FieldViolation(field, "The login node pool cannot have a node set."))
        else:
            missing_pool(field, ref)
    if slurm.get("config") and (slurm.get("scheduling") or slurm.get("accounting")):
        out.append(
            errors.FieldViolation(
                f"{_SLURM}.config",
                "config cannot be combined with the older scheduling/accounting fields.",
            )
        )
    return out


def parse_update_mask(text: str | None) -> list[str]:
    """Splits ``updateMask`` into snake_case dotted paths (either spelling accepted)."""
    paths = []
    for raw in (text or "").split(","):
        if raw.strip():
            paths.append(".".join(casing.camel_to_snake(s) for s in raw.strip().split(".")))
    return paths


def check_update_mask(
    paths: list[str], *, labels_updatable: bool = True
) -> list[errors.FieldViolation]:
    """Violations for a missing mask and for unknown, output-only or immutable paths.

    Args:
        paths: The snake_case mask paths.
        labels_updatable: Whether ``labels`` may be updated (the manage-cluster doc does not
            list it; Terraform treats it as mutable).
    """
    if not paths:
        return [errors.FieldViolation("update_mask", "update_mask must list the fields to update.")]
    updatable = UPDATABLE if labels_updatable else UPDATABLE - {"labels"}
    out = []
    for path in paths:
        if path in updatable:
            continue
        if path == "labels":
            out.append(errors.FieldViolation("update_mask", '"labels" cannot be updated.'))
            continue
        parent = next((u for u in sorted(updatable) if path.startswith(u + ".")), None)
        if parent:
            description = f'"{path}" cannot be updated on its own; update "{parent}" instead.'
        elif path.split(".")[0] in cluster_schema.OUTPUT_ONLY:
            description = f'"{path}" is output only and cannot be updated.'
        elif cluster_schema.is_known_path(path):
            description = f'"{path}" is immutable and cannot be updated.'
        else:
            description = f'"{path}" is not a field of ModelDevelopmentCluster.'
        out.append(errors.FieldViolation("update_mask", description))
    return out


def apply_update_mask(
    current: dict[str, Any], incoming: dict[str, Any], paths: list[str]
) -> dict[str, Any]:
    """A copy of ``current`` whose masked paths take their values from ``incoming``.

    A masked path absent from ``incoming`` is cleared. Lists and maps are replaced whole.
    """
    result = copy.deepcopy(current)
    for path in paths:
        segments = [casing.snake_to_camel(s) for s in path.split(".")]
        source: Any = incoming
        for segment in segments:
            source = source.get(segment) if isinstance(source, dict) else None
        target = result
        for segment in segments[:-1]:
            if not isinstance(target.get(segment), dict):
                target[segment] = {}
            target = target[segment]
        if source is None:
            target.pop(segments[-1], None)
        else:
            target[segments[-1]] = copy.deepcopy(source)
    return result


def check_pool_changes(
    before: dict[str, Any], after: dict[str, Any]
) -> list[errors.FieldViolation]:
    """Violations for changes to immutable fields of node pools kept by an update."""
    old = {p.get("id"): p for p in before.get("nodePools") or [] if isinstance(p, dict)}
    out = []
    for index, pool in enumerate(after.get("nodePools") or []):
        previous = old.get(pool.get("id")) if isinstance(pool, dict) else None
        if previous is None:
            continue
        for field in IMMUTABLE_POOL_FIELDS:
            if pool.get(field) != previous.get(field):
                out.append(
                    errors.FieldViolation(
                        f"node_pools[{index}].{casing.camel_to_snake(field)}",
                        f'is immutable: node pool "{pool["id"]}" cannot change it '
                        "(add a new node pool instead).",
                    )
                )
    return out
