"""What the emulated Slurm of one cluster looks like, derived from the cluster's spec.

Nodes are ``{cluster}-{pool}-{i}`` for ``i < max(1, scalingSpec.maxNodeCount)``, at most
``MAX_POOL_NODES`` per pool (a valid int64 count is far more than one process can emulate);
the login pool runs no jobs. Partitions map to the nodes of their ``nodePoolIds``;
``config.PriorityTier`` (int, default 1) orders them for ``preempt/partition_prio``. slurm.conf
keys are compared case- and underscore-insensitively, and the legacy ``scheduling``/``accounting``
fields count as keys.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

MAX_POOL_NODES = 1024
ENFORCE_IMPLYING_ASSOCIATIONS = ("associations", "limits", "qos", "safe", "wckeys")
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def norm_key(key: str) -> str:
    """The comparison form of a slurm.conf key: lower case without underscores."""
    return key.replace("_", "").lower()


def normalized_config(config: Any) -> dict[str, str]:
    """A slurm.conf map keyed by ``norm_key`` with string values."""
    if not isinstance(config, dict):
        return {}
    return {norm_key(str(k)): str(v) for k, v in config.items() if v is not None}


def parse_slurm_time(text: str | None) -> float | None:
    """Seconds of a Slurm time string, or None for empty/UNLIMITED/INFINITE.

    Accepts ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M`` and ``D-H:M:S``.

    Raises:
        ValueError: The text is not a Slurm time.
    """
    value = (text or "").strip()
    if not value or value.upper() in ("UNLIMITED", "INFINITE"):
        return None
    found = _TIME.match(value)
    if not found:
        raise ValueError(f"invalid Slurm time {text!r}")
    days, first, second, third = found.groups()
    numbers = [int(x) for x in (first, second, third) if x is not None]
    if days is not None:
        hours, minutes, seconds = (numbers + [0, 0])[:3]
        return ((int(days) * 24 + hours) * 60 + minutes) * 60.0 + seconds
    if len(numbers) == 1:
        return numbers[0] * 60.0
    if len(numbers) == 2:
        return numbers[0] * 60.0 + numbers[1]
    return (numbers[0] * 60 + numbers[1]) * 60.0 + numbers[2]


def _minutes(text: str | None) -> int | None:
    try:
        seconds = parse_slurm_time(text)
    except ValueError:
        return None
    return None if seconds is None else max(1, int(seconds // 60))


@dataclasses.dataclass(frozen=True)
class Partition:
    """One Slurm partition.

    Attributes:
        id: Partition name.
        nodes: Node names, in order.
        tier: ``PriorityTier``.
        preempt_mode: The partition's ``PreemptMode`` (upper case), or the cluster's.
        max_time: ``MaxTime`` in minutes; None = unlimited.
        default_time: ``DefaultTime`` in minutes, else ``max_time``.
    """

    id: str
    nodes: tuple[str, ...]
    tier: int
    preempt_mode: str
    max_time: int | None
    default_time: int | None


@dataclasses.dataclass(frozen=True)
class Topology:
    """The emulated Slurm of one cluster.

    Attributes:
        name: Cluster resource name.
        cluster_id: Cluster id (also the Slurm ClusterName).
        partitions: Partitions by id.
        default_partition: The default partition id, or None without partitions.
        nodes: Every compute node name.
        spot_nodes: Nodes of SPOT pools.
        gpus: Accelerators per node, by node name.
        config: Cluster-scope slurm.conf, keys normalized.
        prolog: ``prolog_bash_scripts`` in order.
        epilog: ``epilog_bash_scripts`` in order.
    """

    name: str
    cluster_id: str
    partitions: dict[str, Partition]
    default_partition: str | None
    nodes: tuple[str, ...]
    spot_nodes: frozenset[str]
    gpus: dict[str, int]
    config: dict[str, str]
    prolog: tuple[str, ...]
    epilog: tuple[str, ...]

    @property
    def enforce_associations(self) -> bool:
        """Whether ``AccountingStorageEnforce`` makes submits need an association."""
        flags = self.config.get("accountingstorageenforce", "").lower().replace(" ", "")
        return any(flag in ENFORCE_IMPLYING_ASSOCIATIONS for flag in flags.split(","))

    @property
    def preemption_enabled(self) -> bool:
        """Partition-priority preemption: ``PreemptType=preempt/partition_prio``, or no
        ``PreemptType`` but a ``PreemptMode`` other than OFF."""
        kind = self.config.get("preempttype", "").lower()
        if kind:
            return "partition_prio" in kind
        mode = self.config.get("preemptmode", "").upper()
        return bool(mode) and not mode.startswith("OFF")

    @property
    def preempt_exempt_seconds(self) -> float:
        """``PreemptExemptTime`` in seconds (0 when unset or invalid)."""
        try:
            return parse_slurm_time(self.config.get("preemptexempttime")) or 0.0
        except ValueError:
            return 0.0

    @property
    def job_requeue_default(self) -> bool:
        """``JobRequeue`` (default 1): whether jobs that do not say are requeue-able."""
        return self.config.get("jobrequeue", "1").strip() != "0"

    @property
    def enforce_part_limits(self) -> bool:
        """``EnforcePartLimits`` set to ALL/ANY/YES: a job over MaxTime is rejected."""
        return self.config.get("enforcepartlimits", "NO").upper() in ("ALL", "ANY", "YES")


def from_cluster(cluster: dict[str, Any]) -> Topology:
    """Builds the topology of a (camelCase, as stored) cluster."""
    name = cluster["name"]
    cluster_id = name.rsplit("/", 1)[-1]
    slurm = (cluster.get("orchestratorSpec") or {}).get("slurmSpec") or {}
    config = _merged_config(slurm)
    login = slurm.get("loginNodePoolId")
    pool_nodes: dict[str, list[str]] = {}
    spot: set[str] = set()
    gpus: dict[str, int] = {}
    for pool in cluster.get("nodePools") or []:
        pool_id = pool.get("id")
        if not pool_id or pool_id == login:
            continue
        count = max(1, int((pool.get("scalingSpec") or {}).get("maxNodeCount") or 0))
        count = min(count, MAX_POOL_NODES)
        names = [f"{cluster_id}-{pool_id}-{i}" for i in range(count)]
        pool_nodes[pool_id] = names
        accelerators = int((pool.get("machineSpec") or {}).get("acceleratorCount") or 0)
        for node in names:
            gpus[node] = accelerators
        if pool.get("provisioningModel") == "SPOT":
            spot.update(names)
    cluster_mode = config.get("preemptmode", "OFF").upper()
    partitions: dict[str, Partition] = {}
    for spec in slurm.get("partitions") or []:
        part_config = normalized_config(spec.get("config"))
        nodes: list[str] = []
        for pool_id in spec.get("nodePoolIds") or []:
            nodes.extend(n for n in pool_nodes.get(pool_id, []) if n not in nodes)
        try:
            tier = int(part_config.get("prioritytier", "1"))
        except ValueError:
            tier = 1
        max_time = _minutes(part_config.get("maxtime"))
        partitions[spec["id"]] = Partition(
            id=spec["id"],
            nodes=tuple(nodes),
            tier=tier,
            preempt_mode=part_config.get("preemptmode", cluster_mode).upper(),
            max_time=max_time,
            default_time=_minutes(part_config.get("defaulttime")) or max_time,
        )
    default = slurm.get("defaultPartitionId") or next(iter(partitions), None)
    every = tuple(n for names in pool_nodes.values() for n in names)
    return Topology(
        name=name,
        cluster_id=cluster_id,
        partitions=partitions,
        default_partition=default,
        nodes=every,
        spot_nodes=frozenset(spot),
        gpus=gpus,
        config=config,
        prolog=tuple(s for s in slurm.get("prologBashScripts") or [] if isinstance(s, str)),
        epilog=tuple(s for s in slurm.get("epilogBashScripts") or [] if isinstance(s, str)),
    )


def _merged_config(slurm: dict[str, Any]) -> dict[str, str]:
    merged = normalized_config(slurm.get("scheduling"))
    accounting = normalized_config(slurm.get("accounting"))
    merged.update(accounting)
    merged.update(normalized_config(slurm.get("config")))
    return merged
