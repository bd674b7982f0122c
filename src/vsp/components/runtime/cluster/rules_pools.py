"""Rules for ``node_pools[]`` of a training cluster (see ``cluster_rules.validate_cluster``).

Sources (tags as in ``cluster/__init__``): provisioning and reservation rules
are [R MM]; "STANDARD is invalid" and "A3/A4 reject pd-standard" are [3P]; the boot disk types are
the three MM lists as valid. The 50 GB boot disk minimum is our choice (the service default is
100 GB [R MM]; the Slurm node images are not documented to fit in less).
"""

from __future__ import annotations

import difflib
import re

from vsp.components.runtime.cluster import rules_base
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.core import gpu_machines

PROVISIONING_MODELS = ("ON_DEMAND", "SPOT", "RESERVATION", "FLEX_START")
# The AcceleratorType enum of Vertex AI (google-cloud-aiplatform 1.165.1, aiplatform_v1beta1,
# read 2026-12-06). Training clusters document NVIDIA_H100_80GB, NVIDIA_H100_MEGA_80GB,
# NVIDIA_H200_141GB and NVIDIA_B200. A name outside it is warned about, not refused: the enum
# grows with new machines.
ACCELERATOR_TYPES = frozenset(
    {
        "NVIDIA_A100_80GB", "NVIDIA_B200", "NVIDIA_GB200", "NVIDIA_H100_80GB",
        "NVIDIA_H100_MEGA_80GB", "NVIDIA_H200_141GB", "NVIDIA_L4", "NVIDIA_RTX_PRO_6000",
        "NVIDIA_TESLA_A100", "NVIDIA_TESLA_K80", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_P4",
        "NVIDIA_TESLA_T4", "NVIDIA_TESLA_V100", "TPU_V2", "TPU_V3", "TPU_V4_POD",
        "TPU_V5_LITEPOD",
    }
)  # fmt: skip
RESERVATION_AFFINITY_TYPE = "SPECIFIC_RESERVATION"
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
MIN_BOOT_DISK_GB = 50
# Compute Engine's largest persistent disk, 64 TiB
# (https://cloud.google.com/compute/docs/disks/persistent-disks); the service refuses more.
MAX_BOOT_DISK_GB = 65536
# Node counts are int32 in the request [I]: a larger count is refused by the service.
MAX_NODE_COUNT = 2**31 - 1
FLEX_MIN_SECONDS = 30
FLEX_MAX_SECONDS = 604800
CONFIDENTIAL_TYPES = ("SEV", "SEV_SNP", "TDX")
_A3_A4 = re.compile(r"^a[34]x?-")


def effective_provisioning_model(pool: cluster_spec.NodePool) -> str | None:
    """The provisioning model the service applies: unset + reservation affinity = RESERVATION.

    Unset on a CPU pool means ON_DEMAND; unset on a GPU pool without affinity is rejected [R MM].
    """
    if pool.provisioning_model:
        return pool.provisioning_model
    machine = pool.machine_spec
    if machine and machine.reservation_affinity:
        return "RESERVATION"
    if machine and (machine.accelerator_type or machine.accelerator_count):
        return None
    return "ON_DEMAND"


def check_node_pools(problems: rules_base.Problems, spec: cluster_spec.ClusterSpec) -> None:
    """Checks presence, unique ids and every pool of ``spec.node_pools``."""
    if not spec.node_pools:
        problems.missing("node_pools", "Add at least a login pool and one compute pool.")
        return
    region = None
    if spec.network and spec.network.subnetwork:
        match = rules_base.SUBNETWORK.fullmatch(spec.network.subnetwork)
        region = match.group(2) if match else None
    seen: set[str] = set()
    for index, pool in enumerate(spec.node_pools):
        field = f"node_pools[{index}]"
        if pool.id in seen:
            problems.add(
                f"{field}.id", pool.id, "Node pool id is used by an earlier pool.",
                "Give every node pool a distinct id.",
            )  # fmt: skip
        seen.add(pool.id or "")
        _check_pool(problems, field, pool, region)


def _check_pool(
    problems: rules_base.Problems, field: str, pool: cluster_spec.NodePool, region: str | None
) -> None:
    if not pool.id:
        problems.missing(f"{field}.id", f"Set an id ({rules_base.POOL_ID_RULE}).")
    elif not rules_base.POOL_ID.fullmatch(pool.id):
        problems.add(
            f"{field}.id", pool.id, f"Node pool id is invalid ({rules_base.POOL_ID_RULE}).",
            "Use an id like 'gpu' or 'h100-spot'.",
        )  # fmt: skip
    _check_machine(problems, field, pool)
    _check_provisioning(problems, field, pool)
    _check_scaling(problems, field, pool.scaling_spec)
    _check_boot_disk(problems, field, pool)
    if pool.zone is not None:
        ok = rules_base.check_pattern(
            problems, f"{field}.zone", pool.zone, rules_base.ZONE, "REGION-ZONE like us-central1-b"
        )
        if ok and region and not pool.zone.startswith(f"{region}-"):
            problems.add(
                f"{field}.zone", pool.zone, f"Zone is not in the subnetwork's region {region}.",
                f"Use a zone of {region} (e.g. {region}-b) or a subnetwork in the zone's region.",
            )  # fmt: skip
    rules_base.check_resource_list(
        problems,
        f"{field}.filestores",
        pool.filestores,
        rules_base.INSTANCE,
        rules_base.INSTANCE_FORM,
    )
    rules_base.check_resource_list(
        problems, f"{field}.lustres", pool.lustres, rules_base.INSTANCE, rules_base.INSTANCE_FORM
    )
    rules_base.check_labels(problems, f"{field}.labels", pool.labels)
    if pool.node_image is not None:
        form = (
            "projects/PROJECT/global/images/IMAGE or projects/PROJECT/global/images/family/FAMILY"
        )
        rules_base.check_pattern(
            problems, f"{field}.node_image", pool.node_image, rules_base.NODE_IMAGE, form
        )
    confidential = pool.confidential_instance_config
    if (
        confidential is not None
        and confidential.confidential_instance_type not in CONFIDENTIAL_TYPES
    ):
        problems.add(
            f"{field}.confidential_instance_config.confidential_instance_type",
            confidential.confidential_instance_type, "Unknown confidential instance type.",
            f"Use one of {', '.join(CONFIDENTIAL_TYPES)} (the one the machine's CPU offers).",
        )  # fmt: skip


def _check_machine(problems: rules_base.Problems, field: str, pool: cluster_spec.NodePool) -> None:
    machine = pool.machine_spec
    if machine is None:
        problems.missing(
            f"{field}.machine_spec", "Set machine_spec.machine_type, e.g. a3-highgpu-8g."
        )
        return
    field = f"{field}.machine_spec"
    if not machine.machine_type:
        problems.missing(
            f"{field}.machine_type", "Set a machine type, e.g. n2-standard-8 or a3-highgpu-8g."
        )
    elif rules_base.check_pattern(
        problems,
        f"{field}.machine_type",
        machine.machine_type,
        rules_base.MACHINE_TYPE,
        "like a3-highgpu-8g",
    ):
        unknown = gpu_machines.unknown_type(machine.machine_type)
        if unknown is not None:
            fix = unknown.fix[0].upper() + unknown.fix[1:]
            problems.add(f"{field}.machine_type", unknown.value, unknown.problem, fix)
            return  # the accelerators are judged against the machine type it is fixed to
    kind, count = machine.accelerator_type, machine.accelerator_count
    if kind and count is None:
        problems.missing(
            f"{field}.accelerator_count", f"Set the number of {kind} per node, e.g. 8."
        )
    if count is not None and not kind:
        problems.missing(
            f"{field}.accelerator_type",
            "Set the accelerator type, e.g. NVIDIA_H100_80GB, or drop accelerator_count.",
        )
    if count is not None and count < 1:
        problems.add(
            f"{field}.accelerator_count", count, "Accelerator count must be at least 1.",
            "Set the GPUs per node (e.g. 8), or remove accelerator_type and accelerator_count.",
        )  # fmt: skip
    if kind and not rules_base.ACCELERATOR_TYPE.fullmatch(kind):
        problems.add(
            f"{field}.accelerator_type", kind, "Not a Vertex AI accelerator enum name.",
            "Use an upper-case enum name such as NVIDIA_H100_80GB or NVIDIA_B200.",
        )  # fmt: skip
    elif machine.machine_type and (bool(kind) == (count is not None and count >= 1)):
        wrong = gpu_machines.mismatch(machine.machine_type, kind or "", count or 0)
        if wrong is not None:
            fix = wrong.fix[0].upper() + wrong.fix[1:]
            problems.add(f"{field}.{wrong.field}", wrong.value, wrong.problem, fix)


def _check_provisioning(
    problems: rules_base.Problems, field: str, pool: cluster_spec.NodePool
) -> None:
    model = pool.provisioning_model
    machine = pool.machine_spec or cluster_spec.MachineSpec()
    affinity = machine.reservation_affinity
    affinity_field = f"{field}.machine_spec.reservation_affinity"
    if model is not None and model not in PROVISIONING_MODELS:
        fix = (
            "Use ON_DEMAND for standard (non-Spot) VMs."
            if model.upper() == "STANDARD"
            else f"Use one of {', '.join(PROVISIONING_MODELS)}."
        )
        problems.add(f"{field}.provisioning_model", model, "Not a provisioning model.", fix)
        return
    if effective_provisioning_model(pool) is None:
        problems.missing(
            f"{field}.provisioning_model",
            "A GPU pool needs an explicit provisioning model: SPOT, ON_DEMAND, FLEX_START, or "
            "RESERVATION with machine_spec.reservation_affinity.",
        )
    if affinity is not None and model in ("ON_DEMAND", "SPOT", "FLEX_START"):
        problems.add(
            affinity_field, "<set>", f"reservation_affinity is not allowed with {model}.",
            "Remove reservation_affinity, or set provisioning_model: RESERVATION.",
        )  # fmt: skip
    if model == "RESERVATION" and affinity is None:
        problems.missing(
            affinity_field,
            f"Set reservation_affinity {{reservation_affinity_type: {RESERVATION_AFFINITY_TYPE}, "
            f"key: {RESERVATION_KEY}, values: [{rules_base.RESERVATION_FORM}]}}.",
        )
    if affinity is not None:
        _check_affinity(problems, affinity_field, affinity, pool.zone)
    duration = pool.flex_start_max_duration
    if duration is not None:
        effective = effective_provisioning_model(pool) or "an unset provisioning model"
        _check_flex_duration(problems, f"{field}.flex_start_max_duration", duration, effective)


def _check_affinity(
    problems: rules_base.Problems,
    field: str,
    affinity: cluster_spec.ReservationAffinity,
    zone: str | None,
) -> None:
    if affinity.reservation_affinity_type != RESERVATION_AFFINITY_TYPE:
        problems.add(
            f"{field}.reservation_affinity_type", affinity.reservation_affinity_type,
            "Training clusters only support a specific reservation.",
            f"Set reservation_affinity_type: {RESERVATION_AFFINITY_TYPE}.",
        )  # fmt: skip
    if affinity.key != RESERVATION_KEY:
        problems.add(
            f"{field}.key", affinity.key, "The key must name the reservation by name.",
            f"Set key: {RESERVATION_KEY}.",
        )  # fmt: skip
    if not affinity.values:
        problems.missing(
            f"{field}.values", f"List the reservation as {rules_base.RESERVATION_FORM}."
        )
    for index, value in enumerate(affinity.values or []):
        value_field = f"{field}.values[{index}]"
        if not rules_base.check_pattern(
            problems, value_field, value, rules_base.RESERVATION, rules_base.RESERVATION_FORM
        ):
            continue
        reservation_zone = rules_base.RESERVATION.fullmatch(value).group(1)
        if zone and rules_base.ZONE.fullmatch(zone) and reservation_zone != zone:
            problems.add(
                value_field, value,
                f"The reservation is in {reservation_zone} but the pool is in {zone}.",
                f"Set the pool's zone to {reservation_zone} or use a reservation in {zone}.",
            )  # fmt: skip


def _check_flex_duration(
    problems: rules_base.Problems, field: str, value: str, model: str | None
) -> None:
    if model != "FLEX_START":
        problems.add(
            field, value, f"flex_start_max_duration only applies to FLEX_START pools, not {model}.",
            "Remove flex_start_max_duration, or set provisioning_model: FLEX_START.",
        )  # fmt: skip
    seconds = rules_base.parse_duration(value)
    if seconds is None:
        problems.add(
            field,
            value,
            "Not a duration string.",
            'Write seconds with an "s" suffix, e.g. "86400s".',
        )
    elif not FLEX_MIN_SECONDS <= seconds <= FLEX_MAX_SECONDS:
        problems.add(
            field, value, "Flex-start duration must be between 30 s and 7 days.",
            f'Use a value from "{FLEX_MIN_SECONDS}s" to "{FLEX_MAX_SECONDS}s".',
        )  # fmt: skip


def _check_scaling(
    problems: rules_base.Problems, field: str, scaling: cluster_spec.ScalingSpec | None
) -> None:
    if scaling is None:
        return
    field = f"{field}.scaling_spec"
    low, high = scaling.min_node_count, scaling.max_node_count
    if low is not None and low < 0:
        problems.add(
            f"{field}.min_node_count", low, "Node count cannot be negative.", "Use 0 or more."
        )
    for name, count in (("min_node_count", low), ("max_node_count", high)):
        if count is not None and count > MAX_NODE_COUNT:
            problems.add(
                f"{field}.{name}", count, f"Node count is above {MAX_NODE_COUNT} (int32).",
                "Use the number of nodes the pool really needs.",
            )  # fmt: skip
    if high is not None and high < 1:
        problems.add(
            f"{field}.max_node_count",
            high,
            "A pool needs at least one node.",
            "Set max_node_count to 1 or more.",
        )
    if low is not None and high is not None and 1 <= high < low:
        problems.add(
            f"{field}.min_node_count", low, f"min_node_count is above max_node_count ({high}).",
            f"Lower min_node_count to at most {high} or raise max_node_count.",
        )  # fmt: skip


def _check_boot_disk(
    problems: rules_base.Problems, field: str, pool: cluster_spec.NodePool
) -> None:
    disk = pool.boot_disk
    if disk is None:
        return
    field = f"{field}.boot_disk"
    size, kind = disk.boot_disk_size_gb, disk.boot_disk_type
    if size is not None and size < MIN_BOOT_DISK_GB:
        problems.add(
            f"{field}.boot_disk_size_gb", size, f"Boot disk is smaller than {MIN_BOOT_DISK_GB} GB.",
            f"Use at least {MIN_BOOT_DISK_GB} (the service default is 100).",
        )  # fmt: skip
    if size is not None and size > MAX_BOOT_DISK_GB:
        problems.add(
            f"{field}.boot_disk_size_gb", size,
            f"Boot disk is larger than {MAX_BOOT_DISK_GB} GB (64 TiB, the largest disk).",
            f"Use at most {MAX_BOOT_DISK_GB}.",
        )  # fmt: skip
    if kind is not None and kind not in BOOT_DISK_TYPES:
        problems.add(
            f"{field}.boot_disk_type", kind, "Not a supported boot disk type.",
            f"Use one of {', '.join(BOOT_DISK_TYPES)}.",
        )  # fmt: skip
    machine_type = pool.machine_spec.machine_type if pool.machine_spec else None
    if kind == "pd-standard" and machine_type and _A3_A4.match(machine_type):
        problems.add(
            f"{field}.boot_disk_type", kind,
            f"{machine_type} does not support pd-standard boot disks.",
            "Use hyperdisk-balanced (A3 Ultra, A4) or pd-ssd.",
        )  # fmt: skip


def accelerator_warnings(spec: cluster_spec.ClusterSpec) -> list[str]:
    """Warnings for accelerator types of the right form that the enum does not list (a typo
    such as NVIDIA_H100 the service refuses only at create time, or a type newer than the list).

    Returns:
        One message per pool, naming the field, the close names and the fix.
    """
    warnings = []
    for index, pool in enumerate(spec.node_pools or []):
        kind = (pool.machine_spec or cluster_spec.MachineSpec()).accelerator_type
        if not kind or kind in ACCELERATOR_TYPES or not rules_base.ACCELERATOR_TYPE.fullmatch(kind):
            continue
        close = difflib.get_close_matches(kind, sorted(ACCELERATOR_TYPES), n=3, cutoff=0.6)
        warnings.append(
            f"node_pools[{index}].machine_spec.accelerator_type = {kind!r} (pool {pool.id!r}): "
            "not in Vertex AI's AcceleratorType enum as this version knows it"
            + (f" (close: {', '.join(close)})" if close else "")
            + "; the service refuses an unknown type when the cluster is created. Fix: use "
            "an enum name, e.g. NVIDIA_H100_80GB, unless the type is newer than this version."
        )
    return warnings
