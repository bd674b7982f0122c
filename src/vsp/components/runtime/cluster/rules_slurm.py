"""Rules for ``orchestrator_spec.slurm_spec`` (see ``cluster_rules.validate_cluster``).

Sources (tags as in ``cluster/__init__``): [R MM, R CREATE] for the structure,
the refused config keys and "legacy ``accounting``/``scheduling`` and ``config`` not both"; the
value sets (PreemptMode, PreemptType, PriorityType, AccountingStorageEnforce) are Slurm's
slurm.conf documentation. The service validates config only key by key, so a bad combination
can leave slurmctld down while the create operation reports success [R CREATE]; that is why
the few combinations we know (SUSPEND needs GANG) are checked here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from vsp.components.runtime.cluster import rules_base, slurm_values
from vsp.components.runtime.cluster import spec as cluster_spec

SLURM = "orchestrator_spec.slurm_spec"


def check_slurm(problems: rules_base.Problems, spec: cluster_spec.ClusterSpec) -> None:
    """Checks the Slurm orchestrator: storage, login pool, partitions, node sets and knobs."""
    if spec.orchestrator_spec is None or spec.orchestrator_spec.slurm_spec is None:
        problems.missing(
            SLURM,
            "Add orchestrator_spec.slurm_spec with home_directory_storage, login_node_pool_id "
            "and partitions.",
        )
        return
    slurm = spec.orchestrator_spec.slurm_spec
    pool_ids = list(dict.fromkeys(p.id for p in spec.node_pools or [] if p.id))
    home = slurm.home_directory_storage
    if not home:
        problems.missing(
            f"{SLURM}.home_directory_storage",
            f"Set a Filestore or Lustre instance, {rules_base.INSTANCE_FORM}.",
        )
    else:
        rules_base.check_pattern(
            problems,
            f"{SLURM}.home_directory_storage",
            home,
            rules_base.INSTANCE,
            rules_base.INSTANCE_FORM,
        )
    login = slurm.login_node_pool_id
    if not login:
        problems.missing(
            f"{SLURM}.login_node_pool_id", "Name the node pool of the login nodes, e.g. 'login'."
        )
    elif login not in pool_ids:
        problems.add(
            f"{SLURM}.login_node_pool_id", login, "No node pool has this id.",
            f"Use one of the node pool ids: {', '.join(pool_ids) or '(none defined)'}.",
        )  # fmt: skip
    else:
        _check_login_scaling(problems, spec, login)
    _check_partitions(problems, slurm, pool_ids)
    _check_node_sets(problems, slurm, pool_ids)
    _check_knobs(problems, slurm)
    for name in ("prolog_bash_scripts", "epilog_bash_scripts"):
        for index, script in enumerate(getattr(slurm, name) or []):
            if not isinstance(script, str) or not script.strip().startswith("#!"):
                shown = script[:40] if isinstance(script, str) else script
                problems.add(
                    f"{SLURM}.{name}[{index}]", shown,
                    "Each script must be the full non-empty script text starting with '#!'.",
                    "Start the script with a shebang line such as '#!/bin/bash'.",
                )  # fmt: skip


def _check_login_scaling(
    problems: rules_base.Problems, spec: cluster_spec.ClusterSpec, login: str
) -> None:
    index = next(i for i, p in enumerate(spec.node_pools or []) if p.id == login)
    scaling = spec.node_pools[index].scaling_spec
    if scaling is None or scaling.min_node_count == scaling.max_node_count:
        return
    problems.add(
        f"node_pools[{index}].scaling_spec.min_node_count", scaling.min_node_count,
        f"The login pool must be static: min_node_count must equal max_node_count "
        f"({scaling.max_node_count}).",
        "Set min_node_count and max_node_count of the login pool to the same value, e.g. 1.",
    )  # fmt: skip


def _check_partitions(
    problems: rules_base.Problems, slurm: cluster_spec.SlurmSpec, pool_ids: list[str]
) -> None:
    if not slurm.partitions:
        problems.missing(
            f"{SLURM}.partitions", "Add a partition, e.g. {id: gpu, node_pool_ids: [gpu]}."
        )
    seen: set[str] = set()
    for index, partition in enumerate(slurm.partitions or []):
        field = f"{SLURM}.partitions[{index}]"
        if not partition.id:
            problems.missing(f"{field}.id", "Name the partition, e.g. 'gpu'.")
        elif not rules_base.POOL_ID.fullmatch(partition.id):
            problems.add(
                f"{field}.id",
                partition.id,
                f"Partition id is invalid ({rules_base.POOL_ID_RULE}).",
                "Use an id like 'spot'.",
            )
        elif partition.id in seen:
            problems.add(
                f"{field}.id",
                partition.id,
                "Partition id is used twice.",
                "Give every partition a distinct id.",
            )
        seen.add(partition.id or "")
        if not partition.node_pool_ids:
            problems.missing(f"{field}.node_pool_ids", "List the node pools of this partition.")
        _check_pool_refs(
            problems,
            f"{field}.node_pool_ids",
            partition.node_pool_ids or [],
            pool_ids,
            slurm.login_node_pool_id,
        )
        check_config(problems, f"{field}.config", partition.config, "partition")
    default = slurm.default_partition_id
    if default is not None and default not in seen:
        problems.add(
            f"{SLURM}.default_partition_id", default, "No partition has this id.",
            f"Use one of the partition ids: {', '.join(sorted(seen - {''})) or '(none defined)'}.",
        )  # fmt: skip


def _check_pool_refs(
    problems: rules_base.Problems,
    field: str,
    refs: list[str],
    pool_ids: list[str],
    login: str | None,
) -> None:
    compute = [p for p in pool_ids if p != login]
    for index, ref in enumerate(refs):
        if ref not in pool_ids:
            problems.add(
                f"{field}[{index}]", ref, "No node pool has this id.",
                f"Use one of the compute pool ids: {', '.join(compute) or '(none defined)'}.",
            )  # fmt: skip
        elif ref == login:
            problems.add(
                f"{field}[{index}]", ref, "The login pool cannot run jobs in a partition.",
                "Remove the login pool from the partition; use a compute pool.",
            )  # fmt: skip
        elif ref in refs[:index]:
            problems.add(f"{field}[{index}]", ref, "Pool listed twice.", "Remove the duplicate.")


def _check_node_sets(
    problems: rules_base.Problems, slurm: cluster_spec.SlurmSpec, pool_ids: list[str]
) -> None:
    seen: set[str] = set()
    compute = [p for p in pool_ids if p != slurm.login_node_pool_id]
    for index, node_set in enumerate(slurm.node_sets or []):
        field = f"{SLURM}.node_sets[{index}]"
        ref = node_set.node_pool_id
        if not ref:
            problems.missing(f"{field}.node_pool_id", "Name the node pool these settings apply to.")
        elif ref not in pool_ids:
            problems.add(
                f"{field}.node_pool_id", ref, "No node pool has this id.",
                f"Use one of the compute pool ids: {', '.join(compute) or '(none defined)'}.",
            )  # fmt: skip
        elif ref == slurm.login_node_pool_id:
            problems.add(
                f"{field}.node_pool_id",
                ref,
                "Node sets cannot target the login pool.",
                "Remove this node set.",
            )
        elif ref in seen:
            problems.add(
                f"{field}.node_pool_id", ref, "At most one node set per node pool.",
                "Merge the config maps of the node sets of this pool into one entry.",
            )  # fmt: skip
        seen.add(ref or "")
        check_config(problems, f"{field}.config", node_set.config, "node")


def _check_knobs(problems: rules_base.Problems, slurm: cluster_spec.SlurmSpec) -> None:
    check_config(problems, f"{SLURM}.config", slurm.config, "cluster")
    maps = [slurm.config] + [p.config for p in slurm.partitions or []]
    maps += [n.config for n in slurm.node_sets or []]
    has_config = any(maps)
    for block_name in ("scheduling", "accounting"):
        block = getattr(slurm, block_name)
        if block is None:
            continue
        set_fields = block.model_dump(exclude_none=True)
        if has_config and set_fields:
            moves = ", ".join(f"{k} -> {slurm_values.LEGACY_TO_CONFIG[k]}" for k in set_fields)
            problems.add(
                f"{SLURM}.{block_name}", "<set>",
                f"The legacy {block_name} block cannot be combined with the config maps.",
                f"Keep config (the current API) and move these settings into "
                f"{SLURM}.config: {moves}; then delete {block_name}.",
            )  # fmt: skip
        for key, value in set_fields.items():
            error = slurm_values.check_value(slurm_values.LEGACY_TO_CONFIG[key], value, "cluster")
            if error:
                problems.add(f"{SLURM}.{block_name}.{key}", value, *error)


def check_config(
    problems: rules_base.Problems, field: str, config: Mapping[str, object] | None, scope: str
) -> None:
    """Checks one slurm.conf map: key names, refused keys, string values, known value sets.

    Args:
        problems: Where to record problems.
        field: Path of the map, e.g. ``orchestrator_spec.slurm_spec.config``.
        config: The map (None or empty is fine).
        scope: ``cluster``, ``partition`` or ``node``.
    """
    seen: dict[str, str] = {}
    for key, value in (config or {}).items():
        key_field = f"{field}.{key}"
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", str(key)):
            problems.add(
                key_field,
                key,
                "Not a slurm.conf parameter name.",
                "Use the name as in slurm.conf, e.g. PreemptMode.",
            )
            continue
        norm = slurm_values.normalize_key(key)
        if norm in seen:
            problems.add(
                key_field, key, f"Same parameter as '{seen[norm]}' (names ignore case and '_').",
                "Keep only one of the two keys.",
            )  # fmt: skip
        seen[norm] = key
        refusal = slurm_values.refused_key(norm, scope)
        if refusal:
            problems.add(key_field, key, *refusal)
            continue
        if not isinstance(value, str):
            problems.add(
                key_field,
                value,
                "Config values must be strings.",
                f'Quote the value, e.g. "{value}".',
            )
            continue
        if any(c in value for c in "\n\r\0"):
            problems.add(
                key_field, value[:80],
                "The value holds a line break (or NUL): each key is one slurm.conf line, so "
                "the rest would be read as another parameter (e.g. a refused Prolog).",
                "Put the value on one line; give other parameters as their own keys.",
            )  # fmt: skip
            continue
        error = slurm_values.check_value(norm, value, scope)
        if error:
            problems.add(key_field, value, *error)
