"""Service-side checks on the values inside a ModelDevelopmentCluster: numbers, labels, slurm.conf.

* Counts (``scaling_spec.{min,max}_node_count``, ``machine_spec.accelerator_count``) are
  whole numbers from 0 to 2^31-1 and ``boot_disk.boot_disk_size_gb`` from 0 to 65,536, as a
  JSON number or a decimal string (proto3 JSON; the sources and what is inferred are given at
  ``_POOL_NUMBERS``).
* ``display_name`` is a string of at most 128 characters (``field_rules``).
* ``labels`` and ``node_pools[].labels`` follow Google Cloud's label rules (``field_rules``).
* The slurm.conf maps (``orchestrator_spec.slurm_spec.config``, ``partitions[].config`` and
  ``node_sets[].config``) map parameter names to string values. Refused, as the create-cluster
  reference lists: ``HealthCheck*`` and ``RequeueExit*`` (the service owns health checks and
  requeueing), ``Prolog``/``Epilog`` (use the script lists), slurmdbd.conf parameters (the
  accounting database is managed) and, in a partition, ``Default``. Names compare case- and
  underscore-insensitively. A name that is not a slurm.conf parameter name, and a value
  holding a line break (it would add another line to slurm.conf), are refused too; other
  names and values are accepted (the service's full list is not published).
"""

from __future__ import annotations

import re
from typing import Any

from vsp.vertex_emulator import errors, field_rules
from vsp.vertex_emulator.clusters import schema as cluster_schema

_SLURM = "orchestrator_spec.slurm_spec"
# (section, field, snake_case path, largest value). Vertex AI's discovery document gives
# ``MachineSpec.acceleratorCount`` and ``DiskSpec.bootDiskSizeGb`` the format int32; the
# training cluster's node counts are inferred to be int32 as well (their proto types are not
# published). A boot disk is at most 65,536 GB, Compute Engine's largest persistent disk
# (64 TiB, https://cloud.google.com/compute/docs/disks/persistent-disks); that the cluster's
# boot disks follow it is inferred.
MAX_BOOT_DISK_GB = 65536
_POOL_NUMBERS = (
    ("scalingSpec", "minNodeCount", "scaling_spec.min_node_count", field_rules.INT32_MAX),
    ("scalingSpec", "maxNodeCount", "scaling_spec.max_node_count", field_rules.INT32_MAX),
    ("machineSpec", "acceleratorCount", "machine_spec.accelerator_count", field_rules.INT32_MAX),
    ("bootDisk", "bootDiskSizeGb", "boot_disk.boot_disk_size_gb", MAX_BOOT_DISK_GB),
)
PARAMETER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# Parameters of slurmdbd.conf only (the names it shares with slurm.conf are not refused).
SLURMDBD_PREFIXES = ("archive", "purge", "storage", "dbd")
SLURMDBD_NAMES = frozenset(
    {"allownodefacct", "commitdelay", "debuglevel", "debuglevelsyslog", "defaultqos"}
    | {"logfile", "maxquerytimerange", "pidfile", "trackslurmctlddown"}
)


def check(spec: dict[str, Any]) -> list[errors.FieldViolation]:
    """The violations of the numbers, labels and slurm.conf maps of a (camelCase) cluster."""
    out = field_rules.label_violations(spec.get("labels"), "labels")
    display_name = field_rules.display_name_violation(spec.get("displayName"), "display_name")
    out += [display_name] if display_name else []
    for index, pool in enumerate(spec.get("nodePools") or []):
        if not isinstance(pool, dict):
            continue
        where = f"node_pools[{index}]"
        for parent, name, field, largest in _POOL_NUMBERS:
            holder = pool.get(parent)
            if isinstance(holder, dict):
                violation = field_rules.integer_violation(
                    holder.get(name), f"{where}.{field}", maximum=largest
                )
                out += [violation] if violation else []
        out += field_rules.label_violations(pool.get("labels"), f"{where}.labels")
    slurm = cluster_schema.get_path(spec, "orchestratorSpec", "slurmSpec")
    if not isinstance(slurm, dict):
        return out
    out += config_violations(slurm.get("config"), f"{_SLURM}.config", "cluster")
    for key, scope in (("partitions", "partition"), ("nodeSets", "node")):
        items = slurm.get(key)
        for index, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict):
                field = f"{_SLURM}.{'partitions' if key == 'partitions' else 'node_sets'}"
                out += config_violations(item.get("config"), f"{field}[{index}].config", scope)
    return out


def node_count(value: Any) -> int | None:
    """A valid node count (an unset count is 0), or None when the value is not one."""
    return 0 if value is None else field_rules.integer(value)


def refused_parameter(name: str, scope: str) -> str | None:
    """Why the service refuses a slurm.conf parameter at this scope, or None.

    Args:
        name: The parameter name as written.
        scope: ``cluster``, ``partition`` or ``node``.
    """
    norm = name.replace("_", "").lower()
    if norm in ("prolog", "epilog"):
        return f"{name} is set by the service; put scripts in prolog/epilog_bash_scripts."
    if norm.startswith("healthcheck"):
        return f"{name} is refused: the service runs its own node health checks."
    if norm.startswith("requeueexit"):
        return f"{name} is refused: the service owns requeueing."
    if norm.startswith(SLURMDBD_PREFIXES) or norm in SLURMDBD_NAMES:
        return f"{name} is a slurmdbd.conf parameter: the accounting database is managed."
    if scope == "partition" and norm == "default":
        return "Default is refused in a partition config; set default_partition_id instead."
    return None


def config_violations(config: Any, field: str, scope: str) -> list[errors.FieldViolation]:
    """The violations of one slurm.conf map, each naming ``field[name]``.

    Args:
        config: The map as sent (None is fine).
        field: Its field path, e.g. ``orchestrator_spec.slurm_spec.config``.
        scope: ``cluster``, ``partition`` or ``node``.
    """
    if config is None:
        return []
    if not isinstance(config, dict):
        return [errors.FieldViolation(field, "Must be a map of slurm.conf parameters to strings.")]
    out = []
    for name, value in config.items():
        where = f"{field}[{name}]"
        if not PARAMETER_NAME.fullmatch(name):
            description = f"{field_rules.shown(name)} is not a slurm.conf parameter name."
        elif refused := refused_parameter(name, scope):
            description = refused
        elif not isinstance(value, str):
            description = (
                f"Invalid value {field_rules.shown(value)}: slurm.conf values must be strings."
            )
        elif "\n" in value or "\r" in value:
            description = (
                f"Invalid value {field_rules.shown(value)}: a value cannot hold a line break."
            )
        else:
            continue
        out.append(errors.FieldViolation(where, description))
    return out
