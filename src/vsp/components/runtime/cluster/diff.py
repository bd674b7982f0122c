"""Desired-versus-actual comparison of a training cluster: what differs, and whether it can change.

Mutability (sources, listed in ``cluster/__init__``: [R MM] = magic-modules
``ModelDevelopmentCluster.yaml``, [R MANAGE] = the manage-cluster page):

* Immutable [R MM]: ``network`` (network, subnetwork), ``node_pools[].id``,
  ``node_pools[].machine_spec`` (machine type, accelerators, reservation affinity),
  ``node_pools[].provisioning_model``, ``node_pools[].confidential_instance_config``,
  ``orchestrator_spec.slurm_spec.home_directory_storage``, ``runtime_spec``.
* Mutable: everything else in a pool (scaling, zone, boot disk, public IPs, startup script, node
  image, filestores, lustres, labels, flex-start duration) under the mask path ``node_pools``
  [R MANAGE: the list is replaced whole]; a pool added or removed is also a ``node_pools``
  change [I: the list is mutable and nothing marks membership immutable; the service rejects
  the PATCH if it disagrees, which is safer than recreating the cluster]. Slurm fields use
  ``orchestrator_spec.slurm_spec.{partitions, login_node_pool_id, prolog_bash_scripts,
  epilog_bash_scripts}`` [R MANAGE] and ``.config``, ``.node_sets``, ``.default_partition_id``,
  ``.scheduling``, ``.accounting`` [R MM]. ``display_name`` (changed by MM's own update test),
  ``labels`` and ``lustre_export_config`` are not immutable in MM [R MM]; their mask paths are
  the field names [I].

Tolerance (the API fills defaults and omits zero values):

* Only fields the desired spec sets (not None) are compared; e.g. an unset boot disk, runtime
  spec or provisioning model never differs from what the service chose.
* Missing equals empty/zero: None == [] == {} == 0 == False == "" on the actual side.
* Labels whose key starts with ``vsp-`` are managed by this tool and ignored on both sides.
* slurm.conf keys compare case- and underscore-insensitively; durations by their seconds;
  resource names ignore a ``https://.../v1/`` prefix and a project id-vs-number difference.
* Pools match by id (order ignored), node sets by pool id; filestore, lustre and reservation
  lists ignore order; partitions and prolog/epilog scripts keep order (it is meaningful).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from vsp.components.runtime.cluster import rules_base, slurm_values, spec
from vsp.components.runtime.core import gcp_labels

SLURM = "orchestrator_spec.slurm_spec"
_SLURM_MUTABLE = (
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
_POOL_IMMUTABLE = ("machine_spec", "provisioning_model", "confidential_instance_config")
_UNORDERED = ("filestores", "lustres", "values", "days_of_week")


@dataclasses.dataclass(frozen=True)
class FieldChange:
    """One difference between the desired and the actual cluster.

    Attributes:
        path: Dotted path, pools named by id, e.g. ``node_pools[gpu].machine_spec.machine_type``.
        actual: The cluster's value (None when missing).
        desired: The desired value (None when the desired spec drops it).
        mask: The update-mask path that applies the change; None when the field is immutable.
    """

    path: str
    actual: Any
    desired: Any
    mask: str | None

    def __str__(self) -> str:
        return f"{self.path}: {self.actual!r} -> {self.desired!r}"


@dataclasses.dataclass
class ClusterDiff:
    """What differs between a desired and an actual cluster.

    Attributes:
        immutable: One ``"path: actual -> desired"`` string per immutable difference; any entry
            means the cluster cannot be updated into the desired one.
        update_mask: The update-mask paths of the mutable differences, without duplicates.
        changes: Every difference, structured.
    """

    immutable: list[str] = dataclasses.field(default_factory=list)
    update_mask: list[str] = dataclasses.field(default_factory=list)
    changes: list[FieldChange] = dataclasses.field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        """True when the clusters match on every compared field."""
        return not self.changes

    def add(self, path: str, actual: Any, desired: Any, mask: str | None) -> None:
        """Records one difference."""
        change = FieldChange(path, actual, desired, mask)
        self.changes.append(change)
        if mask is None:
            self.immutable.append(str(change))
        elif mask not in self.update_mask:
            self.update_mask.append(mask)


def diff_cluster(desired: spec.ClusterSpec, actual: spec.ClusterSpec) -> ClusterDiff:
    """Compares a desired spec with a cluster's current spec (see the module docstring).

    Args:
        desired: The spec the caller wants.
        actual: The cluster as read from the API (``ClusterSpec.from_api``).

    Returns:
        The differences, split into immutable ones and the update mask of the mutable ones.
    """
    diff = ClusterDiff()
    want = desired.model_dump(exclude_none=True)
    have = actual.model_dump(exclude_none=True)
    _compare(
        diff, "display_name", want.get("display_name"), have.get("display_name"), "display_name"
    )
    if "labels" in want:
        _compare(
            diff, "labels", user_labels(want["labels"]), user_labels(have.get("labels")), "labels"
        )
    for key in ("network", "runtime_spec"):
        _compare(diff, key, want.get(key), have.get(key), None)
    export = "lustre_export_config"
    _compare(diff, export, want.get(export), have.get(export), export)
    _diff_pools(diff, want.get("node_pools") or [], have.get("node_pools") or [])
    want_slurm = want.get("orchestrator_spec", {}).get("slurm_spec")
    have_slurm = have.get("orchestrator_spec", {}).get("slurm_spec") or {}
    if want_slurm:
        _diff_slurm(diff, want_slurm, have_slurm)
    return diff


def user_labels(labels: dict[str, str] | None) -> dict[str, str]:
    """The labels without the ones this tool manages (keys starting with ``vsp-``)."""
    return {k: v for k, v in (labels or {}).items() if not gcp_labels.is_managed(k)}


def _diff_pools(diff: ClusterDiff, want: list[dict], have: list[dict]) -> None:
    want_by_id = {p.get("id"): p for p in want}
    have_by_id = {p.get("id"): p for p in have}
    for pool_id, pool in want_by_id.items():
        path = f"node_pools[{pool_id}]"
        if pool_id not in have_by_id:
            diff.add(path, None, "<added>", "node_pools")
            continue
        current = have_by_id[pool_id]
        for key, value in pool.items():
            if key == "id":
                continue
            mask = None if key in _POOL_IMMUTABLE else "node_pools"
            if key == "labels":
                value, current_value = user_labels(value), user_labels(current.get(key))
            else:
                current_value = current.get(key)
            _compare(diff, f"{path}.{key}", value, current_value, mask)
    for pool_id in sorted(have_by_id.keys() - want_by_id.keys(), key=str):
        diff.add(f"node_pools[{pool_id}]", "<present>", None, "node_pools")


def _diff_slurm(diff: ClusterDiff, want: dict[str, Any], have: dict[str, Any]) -> None:
    if "home_directory_storage" in want:
        _compare(
            diff, f"{SLURM}.home_directory_storage", want["home_directory_storage"],
            have.get("home_directory_storage"), None,
        )  # fmt: skip
    for key in _SLURM_MUTABLE:
        if key not in want:
            continue
        mine, theirs = want[key], have.get(key)
        if key == "config":
            mine, theirs = _norm_config(mine), _norm_config(theirs)
        elif key == "partitions":
            mine, theirs = _norm_partitions(mine), _norm_partitions(theirs)
        elif key == "node_sets":
            mine, theirs = _norm_node_sets(mine), _norm_node_sets(theirs)
        if key in ("scheduling", "accounting"):
            _compare(diff, f"{SLURM}.{key}", mine, theirs, f"{SLURM}.{key}")
        elif not _same(mine, theirs):
            diff.add(f"{SLURM}.{key}", theirs, mine, f"{SLURM}.{key}")


def _norm_config(config: dict[str, str] | None) -> dict[str, str]:
    return {slurm_values.normalize_key(k): v for k, v in (config or {}).items()}


def _norm_partitions(partitions: list[dict] | None) -> list[dict]:
    return [
        {
            "id": p.get("id"),
            "pools": p.get("node_pool_ids"),
            "config": _norm_config(p.get("config")),
        }
        for p in partitions or []
    ]


def _norm_node_sets(node_sets: list[dict] | None) -> dict[str, dict[str, str]]:
    return {n.get("node_pool_id"): _norm_config(n.get("config")) for n in node_sets or []}


def _compare(diff: ClusterDiff, path: str, want: Any, have: Any, mask: str | None) -> None:
    """Compares the fields ``want`` sets; nested model dicts recurse, maps compare whole."""
    if want is None:
        return
    is_map = path.endswith((".labels", ".config")) or path == "labels"
    if isinstance(want, dict) and not is_map:
        have = have if isinstance(have, dict) else {}
        for key, value in want.items():
            _compare(diff, f"{path}.{key}", value, have.get(key), mask)
        return
    if path.rsplit(".", 1)[-1] in _UNORDERED and isinstance(want, list):
        want, have = sorted(want), sorted(have or [])
    if not _same(want, have):
        diff.add(path, have, want, mask)


def _same(want: Any, have: Any) -> bool:
    if _blank(want) and _blank(have):
        return True
    if isinstance(want, list) and isinstance(have, list):
        return len(want) == len(have) and all(_same(a, b) for a, b in zip(want, have, strict=True))
    if isinstance(want, dict) and isinstance(have, dict):
        return all(_same(want.get(k), have.get(k)) for k in want.keys() | have.keys())
    if isinstance(want, str) and isinstance(have, str):
        return want == have or _same_duration(want, have) or _same_resource(want, have)
    return want == have


def _blank(value: Any) -> bool:
    return value is None or value in ([], {}, "", 0)


def _same_duration(want: str, have: str) -> bool:
    a, b = rules_base.parse_duration(want), rules_base.parse_duration(have)
    return a is not None and a == b


_URL_PREFIX = re.compile(r"^https://[^/]+/(compute/)?(v1|beta|v1beta1)/")


def _same_resource(want: str, have: str) -> bool:
    a = _URL_PREFIX.sub("", want).split("/")
    b = _URL_PREFIX.sub("", have).split("/")
    if len(a) < 2 or len(a) != len(b) or a[0] != "projects" or b[0] != "projects":
        return False
    numeric = a[1].isdigit() != b[1].isdigit()
    return a[2:] == b[2:] and (a[1] == b[1] or numeric)
