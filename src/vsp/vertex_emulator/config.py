"""Emulator settings, persisted as ``{state_dir}/settings.json``.

Delays are in emulated seconds; ``time_scale`` multiplies them all (0.1 runs ten times faster).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Any

from vsp.vertex_emulator import store

SETTINGS_FILENAME = "settings.json"

_COERCE = {"float": float, "int": int, "bool": bool, "str": str}


@dataclasses.dataclass(frozen=True)
class EmulatorSettings:
    """Tunable behaviour of the emulator.

    Attributes:
        provisioning_delay_seconds: Time a new cluster stays PROVISIONING.
        update_delay_seconds: Time a cluster stays UPDATING after a PATCH.
        scale_up_delay_seconds: Time a cluster stays UPDATING after a ``node_pools`` PATCH that
            raises a pool's node count (new nodes boot; the controller, login node and
            storage exist already, so it is shorter than provisioning a new cluster).
        delete_delay_seconds: Time a cluster stays STOPPING before it disappears.
        time_scale: Multiplier applied to every delay above (and to later resources' delays).
        tick_interval_seconds: Period of the background tick (time-driven work).
        default_page_size: Page size of list calls that give no ``pageSize``.
        max_page_size: Largest page a list call returns.
        operation_retention_seconds: How long a finished long-running operation can still be
            read; it is then deleted (GET answers 404). Vertex AI's retention is not
            documented; 7 days is an assumption.
        reject_unknown_fields: Answer 400 to unknown request fields, as the real service does.
        max_request_bytes: Largest request body accepted (Google's front ends: 32 MiB); a
            larger one is answered 413 without being read.
        cluster_fixed_size_pools: Refuse a cluster create or node-pool PATCH whose non-FLEX_START
            pool has min_node_count != max_node_count (the create-cluster reference's rule).
        cluster_empty_pools_allowed: Accept a pool of no nodes (``max_node_count`` 0, as a
            shrunk cluster's GPU pools); false refuses it (create and ``node_pools`` PATCH).
        cluster_labels_updatable: Accept the ``labels`` update mask; false refuses it, as the
            manage-cluster doc's list of updatable fields (without labels) implies.
        slurm_structured_body: ``:callSlurmRestApi`` answers ``structuredBody`` (a JSON object)
            instead of ``body`` (the Slurm JSON as a string).
        slurm_user_name: The Linux user the emulated Slurm runs every caller's jobs as.
        slurm_filesystem_isolation: ``auto``, ``on`` or ``off``: each cluster's home is seen
            by its jobs only, as on Vertex AI where a pipeline step cannot read the cluster's
            Filestore (see ``cluster_filesystem``; ``auto`` = when this machine allows it).
        slurm_kill_wait_seconds: Slurm ``KillWait``: SIGTERM to SIGKILL on cancel, time limit
            and partition preemption.
        slurm_min_job_age_seconds: Slurm ``MinJobAge``: how long a finished job stays in the
            live queue (``/slurm/.../job/{id}``); ``/slurmdb`` keeps it for ever.
        slurm_requeue_delay_seconds: A requeued job waits this long (``BeginTime``) before it
            is eligible again (Slurm 24.11: ``cred_expire`` + 1 s, 121 s by default; it then
            starts on the scheduler's next pass). Local runs and tests shorten it.
        slurm_preempt_notice_seconds: Spot preemption notice: SIGTERM to SIGKILL (GCE: 30 s).
        slurm_node_recovery_seconds: How long a preempted or drained node stays down.
        slurm_accounting: Whether the emulated clusters run slurmdbd (as Vertex's do): off,
            ``/slurmdb/`` paths answer slurmrestd's plain-text 404, as on a Slurm without it.
        slurm_node_return_seconds: How long a node set DOWN through the Slurm API stays down
            (its slurmd registers again: ``ReturnToService=2``; about 3 s on Slurm 24.11.7).
        slurm_time_limit_check_seconds: How often slurmctld looks for jobs past their time
            limit (its periodic timer, 30 s): a limit is enforced at the next check after it.
        slurm_spot_preempt_after_seconds: Default plan for SPOT pools (clusters without their
            own plan): preempt each job run this long after it starts; 0 = off.
        slurm_spot_preempt_mean_seconds: Default Poisson plan: mean run time before a
            preemption (used when the fixed delay above is 0); 0 = off.
        slurm_spot_preempt_max_count: Most preemptions the default plan makes per cluster.
        slurm_spot_preempt_seed: Seed of the default Poisson plan.
        slurm_spot_preempt_unannounced_share: Share (0 to 1) of the default plan's preemptions
            that come without notice (SIGKILL at once; see ``slurm.preemption``).
        slurmrestd: A real slurmrestd (unix socket path or ``http://HOST:PORT``) that serves
            ``:callSlurmRestApi`` of every cluster instead of the emulated Slurm; '' = emulate
            (see ``slurm.real``).
        slurmrestd_preemption: How Spot preemptions are made on that real Slurm: ``partition``
            (a higher-tier job takes the node), ``requeue`` (``scontrol requeue``) or
            ``node_down`` (the node set DOWN through slurmrestd).
        custom_job_queue_delay_seconds: Time a new CustomJob stays JOB_STATE_QUEUED.
        custom_job_pending_delay_seconds: Time a CustomJob stays JOB_STATE_PENDING (capacity
            and VM start-up) before its process starts; also after each Spot restart.
        custom_job_kill_wait_seconds: CustomJob cancel/timeout: SIGTERM to SIGKILL.
        custom_job_preempt_notice_seconds: CustomJob Spot preemption: SIGTERM to SIGKILL.
        custom_job_max_spot_restarts: Restarts after Spot preemptions before the job fails
            with STOCKOUT (Vertex: up to six).
        custom_job_spot_no_capacity: SPOT CustomJobs stay JOB_STATE_PENDING for ever.
        custom_job_spot_preempt_after_seconds: Default CustomJob Spot plan: preempt each run
            this long after it starts; 0 = off.
        custom_job_spot_preempt_mean_seconds: Default Poisson plan mean (used when the fixed
            delay above is 0); 0 = off.
        custom_job_spot_preempt_max_count: Most preemptions the default plan makes; 0 = no limit.
        custom_job_spot_preempt_seed: Seed of the default CustomJob Poisson plan.
        pubsub_pull_hold_seconds: Longest time a Pub/Sub pull that finds no message waits for
            one before answering empty (real Pub/Sub bounds it without documenting the bound;
            about 90 s has been reported), wall seconds, not scaled by ``time_scale``.
        operation_wait_cap_seconds: Longest time an ``operations.wait`` call holds before
            answering the operation not done (the service's HTTP/RPC timeout, not documented;
            60 s assumed), wall seconds, not scaled by ``time_scale``.
    """

    provisioning_delay_seconds: float = 3.0
    update_delay_seconds: float = 1.0
    scale_up_delay_seconds: float = 1.5
    delete_delay_seconds: float = 1.0
    time_scale: float = 1.0
    tick_interval_seconds: float = 0.2
    default_page_size: int = 50
    max_page_size: int = 1000
    operation_retention_seconds: float = 7 * 24 * 3600.0
    reject_unknown_fields: bool = True
    max_request_bytes: int = 32 * 1024 * 1024
    cluster_fixed_size_pools: bool = False
    cluster_empty_pools_allowed: bool = True
    cluster_labels_updatable: bool = True
    slurm_structured_body: bool = False
    slurm_user_name: str = "vsp"
    slurm_filesystem_isolation: str = "auto"
    slurm_kill_wait_seconds: float = 30.0
    slurm_min_job_age_seconds: float = 300.0
    slurm_requeue_delay_seconds: float = 121.0
    slurm_preempt_notice_seconds: float = 30.0
    slurm_node_recovery_seconds: float = 60.0
    slurm_node_return_seconds: float = 3.0
    slurm_accounting: bool = True
    slurm_time_limit_check_seconds: float = 30.0
    slurm_spot_preempt_after_seconds: float = 0.0
    slurm_spot_preempt_mean_seconds: float = 0.0
    slurm_spot_preempt_max_count: int = 1
    slurm_spot_preempt_seed: int = 0
    slurm_spot_preempt_unannounced_share: float = 0.0
    slurmrestd: str = ""
    slurmrestd_preemption: str = "partition"
    custom_job_queue_delay_seconds: float = 1.0
    custom_job_pending_delay_seconds: float = 2.0
    custom_job_kill_wait_seconds: float = 30.0
    custom_job_preempt_notice_seconds: float = 30.0
    custom_job_max_spot_restarts: int = 6
    custom_job_spot_no_capacity: bool = False
    custom_job_spot_preempt_after_seconds: float = 0.0
    custom_job_spot_preempt_mean_seconds: float = 0.0
    custom_job_spot_preempt_max_count: int = 0
    custom_job_spot_preempt_seed: int = 0
    pubsub_pull_hold_seconds: float = 90.0
    operation_wait_cap_seconds: float = 60.0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            kind = _COERCE[str(field.type)]
            if kind is str:
                if not isinstance(value, str):
                    raise ValueError(f"setting {field.name} must be a string, not {value!r}")
                continue
            if kind is bool:
                if not isinstance(value, bool):
                    raise ValueError(f"setting {field.name} must be true or false, not {value!r}")
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"setting {field.name} must be a number, not {value!r}")
            object.__setattr__(self, field.name, kind(value))
            if value < 0:
                raise ValueError(f"setting {field.name} must not be negative, got {value!r}")
        if self.time_scale <= 0 or self.tick_interval_seconds <= 0:
            raise ValueError("time_scale and tick_interval_seconds must be positive")
        if self.slurm_filesystem_isolation not in ("auto", "on", "off"):
            raise ValueError(
                "slurm_filesystem_isolation must be 'auto', 'on' or 'off', not "
                f"{self.slurm_filesystem_isolation!r}"
            )
        if self.slurmrestd_preemption not in ("partition", "requeue", "node_down"):
            raise ValueError(
                "slurmrestd_preemption must be 'partition', 'requeue' or 'node_down', not "
                f"{self.slurmrestd_preemption!r}"
            )
        if self.default_page_size < 1 or self.max_page_size < 1:
            raise ValueError("default_page_size and max_page_size must be at least 1")

    def scaled(self, seconds: float) -> float:
        """Wall-clock seconds for an emulated delay (``seconds * time_scale``)."""
        return max(0.0, float(seconds) * self.time_scale)

    def replace(self, **changes: Any) -> EmulatorSettings:
        """A copy with some fields changed.

        Raises:
            ValueError: An unknown field name or an invalid value.
        """
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ValueError(f"unknown settings {unknown}; known: {sorted(known)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, strict: bool = True) -> EmulatorSettings:
        """Builds settings from a dict; missing fields take their defaults.

        Args:
            data: Field name -> value.
            strict: Reject unknown names (else ignore them, e.g. from a newer version's file).

        Raises:
            ValueError: Unknown names (when strict) or invalid values.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        if strict:
            return cls().replace(**data)
        return cls().replace(**{k: v for k, v in data.items() if k in known})


def settings_path(state_dir: str | os.PathLike[str]) -> pathlib.Path:
    """Where the settings of a state directory live."""
    return pathlib.Path(state_dir) / SETTINGS_FILENAME


def load_settings(state_dir: str | os.PathLike[str]) -> EmulatorSettings | None:
    """The settings saved in a state directory, or None when there are none."""
    data = store.read_json(settings_path(state_dir))
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ValueError(f"{settings_path(state_dir)} must hold a JSON object")
    return EmulatorSettings.from_dict(data, strict=False)


def save_settings(state_dir: str | os.PathLike[str], settings: EmulatorSettings) -> None:
    """Saves settings into a state directory (atomically)."""
    store.write_json_atomic(settings_path(state_dir), settings.to_dict())


def resolve_settings(
    state_dir: str | os.PathLike[str], settings: EmulatorSettings | None = None
) -> EmulatorSettings:
    """The settings to run with: ``settings`` if given, else the saved ones, else defaults.

    The result is saved back so that a restart on the same directory keeps it.
    """
    chosen = settings or load_settings(state_dir) or EmulatorSettings()
    save_settings(state_dir, chosen)
    return chosen
