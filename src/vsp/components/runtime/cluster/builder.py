"""Build a training cluster spec from the flat parameters a pipeline user types.

``build_cluster_spec`` takes exactly the flat parameters ``create_cluster`` passes, and makes a
static login pool plus up to two training pools sharing the machine parameters:

* ``spot_max_nodes > 0``: a SPOT pool ``spot`` of that many nodes;
* ``ondemand_max_nodes > 0``: a fallback pool ``ondemand`` of that many nodes, RESERVATION when
  ``reservation`` is given, else ON_DEMAND.

Every pool is fixed-size (``min_node_count`` = ``max_node_count``): Google's create-cluster
reference says a pool's MIN_NODE_COUNT must be the same as its MAX_NODE_COUNT [R CREATE]. Only
FLEX_START pools scale from 0 (min 0 / max N, [R FLEX]); give them in the full ``cluster_spec``.
A fixed-size pool bills all its nodes for as long as the cluster exists, kept warm included.

Each training pool gets a partition of the same id; the default partition is the first one,
always written explicitly so that reordering never moves it [R MM]. Anything else (more pools,
other partitions, node sets, prolog and epilog scripts, extra storage) goes in the full
``cluster_spec`` instead. Empty strings, zero counts and empty maps mean "not set", which is what
KFP passes for unset parameters. Bare network, subnetwork and reservation names are expanded
with ``project`` (or the project of ``home_directory_storage``) and ``zone``. Numbers in
``slurm_config`` are turned into strings (slurm.conf values are strings).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vsp.components.runtime.cluster import keys, rules, slurm_values
from vsp.components.runtime.cluster import rules_base as base
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.core import errors

__all__ = ["build_cluster_spec", "merge_spec"]


LOGIN_POOL_ID = "login"


def build_cluster_spec(
    *,
    cluster_id: str = "",
    display_name: str = "",
    labels: Mapping[str, str] | None = None,
    project: str = "",
    network: str = "",
    subnetwork: str = "",
    zone: str = "",
    home_directory_storage: str = "",
    login_machine_type: str = "n2-standard-8",
    login_node_count: int = 1,
    machine_type: str = "",
    accelerator_type: str = "",
    accelerator_count: int = 0,
    reservation: str | Sequence[str] = "",
    spot_max_nodes: int = 0,
    ondemand_max_nodes: int = 0,
    boot_disk_size_gb: int = 0,
    slurm_config: Mapping[str, Any] | None = None,
    service_account: str = "",
    validate: bool = True,
) -> cluster_spec.ClusterSpec:
    """Builds (and by default validates) a cluster spec; see the module docstring.

    Args:
        cluster_id: The cluster id; default display name, and checked when ``validate``.
        display_name: Display name (default ``cluster_id``).
        labels: Cluster labels.
        project: Project used to expand bare network/subnetwork/reservation names.
        network: VPC network, full name or bare name.
        subnetwork: Subnetwork, full name or bare name (region taken from ``zone``).
        zone: Zone of every pool, e.g. ``us-central1-b``.
        home_directory_storage: Filestore/Lustre instance mounted as /home.
        login_machine_type: Machine type of the login pool.
        login_node_count: Login nodes (min = max).
        machine_type: Machine type of the training pools.
        accelerator_type: Accelerator of the training pools ("" for CPU pools).
        accelerator_count: Accelerators per training node.
        reservation: Reservation(s) of the ``ondemand`` pool, full or bare names.
        spot_max_nodes: Nodes of the ``spot`` pool, min = max (0: no such pool).
        ondemand_max_nodes: Nodes of the ``ondemand`` pool, min = max (0: no such pool).
        boot_disk_size_gb: Boot disk size of the training pools, GB (0: the service default).
        slurm_config: Cluster-scope slurm.conf settings.
        service_account: Service account of the nodes.
        validate: Run ``cluster_rules.validate_cluster`` on the result.

    Returns:
        The spec.

    Raises:
        errors.SpecValidationError: The parameters do not make a valid cluster.
    """
    counts = base.Problems()
    for name, value, low in (
        ("spot_max_nodes", spot_max_nodes, 0),
        ("ondemand_max_nodes", ondemand_max_nodes, 0),
        ("login_node_count", login_node_count, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            counts.add(
                name, value, f"Must be a whole number >= {low}.",
                f"Give the pool's node count{' (0: no such pool)' if low == 0 else ''}.",
            )  # fmt: skip
    counts.raise_if_any("the cluster parameters")
    project = project or _project_of(home_directory_storage)
    reservations = [reservation] if isinstance(reservation, str) else list(reservation)
    where = project if zone else ""  # zonal and regional names need the zone
    reservations = [_expand(r, where, f"zones/{zone}/reservations") for r in reservations if r]
    machine = {"machine_type": machine_type or None}
    if accelerator_type:
        machine.update(accelerator_type=accelerator_type, accelerator_count=accelerator_count)
    disk = {"boot_disk_size_gb": boot_disk_size_gb} if boot_disk_size_gb else None

    def training_pool(pool: str, model: str, high: int) -> dict[str, Any]:
        spec = {"id": pool, "machine_spec": dict(machine), "provisioning_model": model}
        if model == "RESERVATION":
            spec["machine_spec"]["reservation_affinity"] = {
                "reservation_affinity_type": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": reservations,
            }
        scaling = {"min_node_count": high, "max_node_count": high}  # fixed size [R CREATE]
        return {**spec, "scaling_spec": scaling, "boot_disk": disk, "zone": zone or None}

    pools = [
        {
            "id": LOGIN_POOL_ID,
            "machine_spec": {"machine_type": login_machine_type},
            "provisioning_model": "ON_DEMAND",
            "scaling_spec": {
                "min_node_count": login_node_count,
                "max_node_count": login_node_count,
            },
            "zone": zone or None,
        }
    ]
    if spot_max_nodes:
        pools.append(training_pool("spot", "SPOT", spot_max_nodes))
    if ondemand_max_nodes:
        model = "RESERVATION" if reservations else "ON_DEMAND"
        pools.append(training_pool("ondemand", model, ondemand_max_nodes))
    parts = [{"id": p["id"], "node_pool_ids": [p["id"]]} for p in pools[1:]]
    slurm = {
        "home_directory_storage": home_directory_storage or None,
        "login_node_pool_id": LOGIN_POOL_ID,
        "partitions": parts,
        "default_partition_id": parts[0]["id"] if parts else None,
        "config": _strings(slurm_config),
    }
    region = zone.rsplit("-", 1)[0]
    body = {
        "display_name": display_name or cluster_id or None,
        "labels": dict(labels) if labels else None,
        "network": {
            "network": _expand(network, project, "global/networks"),
            "subnetwork": _expand(subnetwork, where, f"regions/{region}/subnetworks") or None,
        }
        if network or subnetwork
        else None,
        "node_pools": pools,
        "orchestrator_spec": {"slurm_spec": slurm},
        "runtime_spec": {"service_account": service_account} if service_account else None,
    }
    spec = rules.parse_cluster_spec(_drop_none(body))
    if validate:
        _validate_flat(spec, cluster_id, bool(display_name), spot_max_nodes + ondemand_max_nodes)
    return spec


def _validate_flat(
    spec: cluster_spec.ClusterSpec, cluster_id: str, named: bool, training_nodes: int
) -> None:
    """``rules.validate_cluster``, its problems told in the flat parameters the user passed.

    A problem that only follows from another is left out: the display name when it defaults to
    the cluster id (checked itself), the missing partitions when no pool has nodes (told as
    the node counts).
    """
    problems = base.Problems()
    follows = set() if named else {"display_name"}
    if not training_nodes:
        problems.add(
            "spot_max_nodes", 0,
            "spot_max_nodes and ondemand_max_nodes are both 0: the cluster would have no "
            "training pool, and its Slurm no partition to run a job in.",
            "Set spot_max_nodes (Spot nodes) or ondemand_max_nodes (on-demand or reservation "
            "nodes) > 0, or give the full cluster_spec.",
        )  # fmt: skip
        follows |= {"orchestrator_spec.slurm_spec.partitions"}
    try:
        rules.validate_cluster(spec, cluster_id)
    except errors.SpecValidationError as exc:
        problems.items += [p for p in exc.problems if p.field not in follows]
    problems.raise_if_any(rules.WHAT)


def merge_spec(
    base: Mapping[str, Any] | cluster_spec.ClusterSpec, overrides: Mapping[str, Any]
) -> dict:
    """Deep-merges ``overrides`` into ``base``; keys may be snake_case or camelCase.

    Mappings merge key by key (an override value of None deletes the key; in ``config`` maps a key
    replaces any base key of the same slurm.conf name, e.g. ``preempt_mode`` replaces
    ``PreemptMode``); lists and scalars are replaced whole.

    Returns:
        The merged body with snake_case field keys (parse it with ``parse_cluster_spec``).
    """
    if isinstance(base, cluster_spec.ClusterSpec):
        base = base.model_dump(exclude_none=True)
    left = keys.snake_keys(dict(base), cluster_spec.ClusterSpec)
    right = keys.snake_keys(dict(overrides), cluster_spec.ClusterSpec)
    return _merge(left, right, "")


def _merge(left: dict[str, Any], right: dict[str, Any], name: str) -> dict[str, Any]:
    merged = dict(left)
    if name == "config":
        replaced = {slurm_values.normalize_key(k) for k in right}
        merged = {k: v for k, v in merged.items() if slurm_values.normalize_key(k) not in replaced}
    for key, value in right.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value, key)
        else:
            merged[key] = value
    return merged


def _strings(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """slurm.conf values as strings (numbers converted; other types left for the rules)."""
    if not config:
        return None
    return {
        k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        for k, v in config.items()
    }


def _project_of(resource: str) -> str:
    parts = resource.split("/") if resource else []
    return parts[1] if len(parts) > 1 and parts[0] == "projects" else ""


def _expand(name: str, project: str, collection: str) -> str:
    """``projects/{project}/{collection}/{name}`` for a bare name; full names unchanged."""
    if not name or "/" in name or not project:
        return name
    return f"projects/{project}/{collection}/{name}"


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


# The flat create_cluster values without which no cluster can be built (no default exists):
# what each is, and an example of it.
PLACE_VALUES = {
    "network": ("the VPC network the nodes join", '"default" or projects/P/global/networks/N'),
    "zone": ("the zone of the nodes", '"us-central1-a"'),
    "home_directory_storage": (
        "the Filestore instance mounted as /home",
        "projects/P/locations/ZONE/instances/NAME",
    ),
}


def place_problems(values: Mapping[str, Any], prefix: str = "") -> list[errors.SpecProblem]:
    """The ``PLACE_VALUES`` that ``values`` (flat create_cluster parameters) leave out or blank.

    ``build_cluster_spec`` refuses those too, but only once ``create_cluster`` runs: a
    pipeline's first step calls this to refuse them before anything is created.

    Args:
        values: create_cluster parameters by name (e.g. a pipeline's ``cluster_options``).
        prefix: Put before each field name (e.g. ``"cluster_options."``).
    """
    found = []
    for name, (what, example) in PLACE_VALUES.items():
        value = values.get(name)
        if not isinstance(value, str) or not value.strip():
            found.append(
                errors.SpecProblem(
                    f"{prefix}{name}",
                    value,
                    f"is needed to create the cluster: {what}.",
                    f"give it, e.g. {example}.",
                )
            )
    return found
