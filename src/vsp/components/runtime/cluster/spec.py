"""Typed pydantic models of a Vertex AI training cluster body (``modelDevelopmentClusters``).

The models describe the *shape* of the body: field names, nesting and scalar types. The rules
(required fields, patterns, cross-references, Slurm knobs) live in ``cluster_rules`` so that every
semantic problem of a spec is reported at once, not one pydantic error at a time. For the same
reason most fields are optional here, and enum-like fields (``provisioning_model``,
``reservation_affinity_type``...) are plain strings: ``validate_cluster`` checks their values, and
``ClusterSpec.from_api`` keeps working when the service returns a value added later.

Keys:

* Input accepts snake_case and camelCase keys (``machine_type`` or ``machineType``); keys *inside*
  maps (``labels``, ``config``) are kept verbatim.
* Unknown keys are rejected (``extra="forbid"``);
  ``cluster_keys.problems_from_validation_error`` turns them into a ``SpecProblem`` that suggests
  the closest known field.
* ``ClusterSpec.to_request_body()`` writes camelCase keys and omits unset fields.
* ``ClusterSpec.from_api()`` drops output-only fields (``name``, ``clusterStatus``...) and any other
  key the models do not know, so a newer API response still parses.

Source of the body: [R MM] and [R CREATE] (listed in ``cluster/__init__``).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

import pydantic
from pydantic import alias_generators

from vsp.components.runtime.cluster import keys
from vsp.components.runtime.core import errors

log = logging.getLogger(__name__)

# Output-only fields of a cluster as the API returns it [R MM]; accepted and ignored by from_api.
OUTPUT_ONLY_FIELDS = frozenset(
    {"name", "clusterStatus", "clusterEvents", "createTime", "updateTime", "startTime", "runtime"}
)
OUTPUT_ONLY_POOL_FIELDS = frozenset({"effectiveFlexStartMaxDuration"})


def _reject_bool(value: Any) -> Any:
    # pydantic's lax int accepts True/False; a count given as a boolean is a typo, not a number.
    if isinstance(value, bool):
        raise ValueError("Input should be a whole number, not a boolean")
    return value


# A whole number; the API may send int64 values as JSON strings, which lax mode accepts.
Count = Annotated[int, pydantic.BeforeValidator(_reject_bool)]
StrMap = dict[str, str]


class _Model(pydantic.BaseModel):
    """Base of every cluster model: camelCase aliases, snake_case names, no unknown keys."""

    model_config = pydantic.ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=alias_generators.to_camel,
        loc_by_alias=False,
    )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _drop_unknown_when_lenient(cls, data: Any, info: pydantic.ValidationInfo) -> Any:
        """Drops unknown keys when validating with context ``{"ignore_unknown": True}``."""
        if not isinstance(data, dict) or not (info.context or {}).get("ignore_unknown"):
            return data
        kept = {k: v for k, v in data.items() if keys.field_name(cls, k) is not None}
        unexpected = sorted(set(data) - set(kept) - OUTPUT_ONLY_FIELDS - OUTPUT_ONLY_POOL_FIELDS)
        if unexpected:
            log.debug("ignoring fields unknown to %s: %s", cls.__name__, ", ".join(unexpected))
        return kept


class ReservationAffinity(_Model):
    """Which reservation a RESERVATION pool draws from."""

    reservation_affinity_type: str | None = None
    key: str | None = None
    values: list[str] | None = None


class MachineSpec(_Model):
    """Machine of every node in a pool (immutable)."""

    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: Count | None = None
    reservation_affinity: ReservationAffinity | None = None


class ScalingSpec(_Model):
    """Node count bounds of a pool."""

    min_node_count: Count | None = None
    max_node_count: Count | None = None


class BootDisk(_Model):
    """Boot disk of every node in a pool."""

    boot_disk_type: str | None = None
    boot_disk_size_gb: Count | None = None


class ConfidentialInstanceConfig(_Model):
    """Confidential Computing technology of a pool (immutable)."""

    confidential_instance_type: str | None = None


class NodePool(_Model):
    """One pool of identical nodes."""

    id: str | None = None
    machine_spec: MachineSpec | None = None
    provisioning_model: str | None = None
    flex_start_max_duration: str | None = None
    scaling_spec: ScalingSpec | None = None
    zone: str | None = None
    enable_public_ips: bool | None = None
    boot_disk: BootDisk | None = None
    startup_script: str | None = None
    node_image: str | None = None
    filestores: list[str] | None = None
    lustres: list[str] | None = None
    labels: StrMap | None = None
    confidential_instance_config: ConfidentialInstanceConfig | None = None


class Network(_Model):
    """VPC network and subnetwork of the cluster (immutable)."""

    network: str | None = None
    subnetwork: str | None = None


class SlurmPartition(_Model):
    """A Slurm partition over one or more node pools."""

    id: str | None = None
    node_pool_ids: list[str] | None = None
    config: StrMap | None = None


class SlurmNodeSet(_Model):
    """Node-scoped slurm.conf settings of one node pool."""

    node_pool_id: str | None = None
    config: StrMap | None = None


class SlurmAccounting(_Model):
    """Legacy accounting block (superseded by ``config``)."""

    accounting_storage_enforce: str | None = None


class SlurmScheduling(_Model):
    """Legacy scheduling block (superseded by ``config``)."""

    priority_type: str | None = None
    priority_weight_age: Count | None = None
    priority_weight_assoc: Count | None = None
    priority_weight_fairshare: Count | None = None
    priority_weight_job_size: Count | None = None
    priority_weight_partition: Count | None = None
    priority_weight_qos: Count | None = None
    priority_weight_tres: str | None = None
    preempt_type: str | None = None
    preempt_mode: str | None = None
    preempt_exempt_time: str | None = None


class SlurmSpec(_Model):
    """The managed Slurm orchestrator."""

    home_directory_storage: str | None = None
    login_node_pool_id: str | None = None
    partitions: list[SlurmPartition] | None = None
    default_partition_id: str | None = None
    config: StrMap | None = None
    node_sets: list[SlurmNodeSet] | None = None
    accounting: SlurmAccounting | None = None
    scheduling: SlurmScheduling | None = None
    prolog_bash_scripts: list[str] | None = None
    epilog_bash_scripts: list[str] | None = None


class OrchestratorSpec(_Model):
    """The cluster's orchestrator (only Slurm is modelled)."""

    slurm_spec: SlurmSpec | None = None


class RuntimeSpec(_Model):
    """Service account of the workloads (immutable)."""

    service_account: str | None = None


class TimeOfDay(_Model):
    """A ``google.type.TimeOfDay``."""

    hours: Count | None = None
    minutes: Count | None = None
    seconds: Count | None = None
    nanos: Count | None = None


class LustreExportConfig(_Model):
    """Scheduled backup of the attached Managed Lustre instances to Cloud Storage."""

    destination_bucket: str | None = None
    days_of_week: list[str] | None = None
    lustres: list[str] | None = None
    start_time: TimeOfDay | None = None


class ClusterSpec(_Model):
    """The whole cluster body sent to create or update a training cluster."""

    display_name: str | None = None
    labels: StrMap | None = None
    network: Network | None = None
    node_pools: list[NodePool] | None = None
    orchestrator_spec: OrchestratorSpec | None = None
    runtime_spec: RuntimeSpec | None = None
    lustre_export_config: LustreExportConfig | None = None

    @property
    def slurm(self) -> SlurmSpec | None:
        """The Slurm spec, or None when the orchestrator is missing."""
        return self.orchestrator_spec.slurm_spec if self.orchestrator_spec else None

    def pool(self, pool_id: str) -> NodePool | None:
        """The node pool with this id, or None."""
        return next((p for p in self.node_pools or [] if p.id == pool_id), None)

    def to_request_body(self) -> dict[str, Any]:
        """The JSON body for a create or update request.

        Returns:
            A dict with camelCase keys, unset fields omitted and map keys kept verbatim.
        """
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> ClusterSpec:
        """Parses a cluster as the API returns it (GET, LRO response).

        Output-only fields (``name``, ``clusterStatus``, ``clusterEvents``, the timestamps,
        ``nodePools[].effectiveFlexStartMaxDuration``...) and any other key unknown to the models
        are ignored.

        Args:
            data: The decoded JSON cluster.

        Returns:
            The spec part of the cluster.

        Raises:
            errors.SpecValidationError: A known field has a value of the wrong type.
        """
        if not isinstance(data, dict):
            problem = errors.SpecProblem(
                "cluster", type(data).__name__, "The API answer is not a JSON object.",
                "Pass the decoded cluster JSON object.",
            )  # fmt: skip
            raise errors.SpecValidationError("cluster from API", [problem])
        try:
            return cls.model_validate(data, context={"ignore_unknown": True})
        except pydantic.ValidationError as error:
            problems = keys.problems_from_validation_error(error, cls)
            raise errors.SpecValidationError("cluster from API", problems) from None
