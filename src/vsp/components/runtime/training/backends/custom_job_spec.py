"""Typed CustomJob request (Vertex AI ``customJobs``, v1), validated before any request.

``CustomJobTraining`` holds what every attempt of a run submits; ``request_body`` turns it into
the exact ``CustomJob`` JSON for one attempt on a scheduling strategy (SPOT, STANDARD or
FLEX_START). ``maxWaitDuration`` is only sent with FLEX_START, where Vertex applies it; a Spot
capacity deadline is the recovery strategy's own (``capacity_wait_seconds``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from vsp.components.runtime.core import errors, gpu_machines
from vsp.components.runtime.trainer import contract

STRATEGIES = ("SPOT", "STANDARD", "FLEX_START")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_TIMEOUT = 7 * 24 * 3600


@dataclasses.dataclass(frozen=True)
class CustomJobTraining:
    """One worker pool of a CustomJob and its run settings.

    Attributes:
        display_name: Prefix of each attempt's display name.
        base_output_directory: ``gs://`` prefix; the trainer gets ``AIP_CHECKPOINT_DIR`` and
            ``AIP_MODEL_DIR`` under it, the same for every attempt.
        machine_type: Machine type, e.g. ``a3-highgpu-8g``.
        accelerator_type: Accelerator, e.g. ``NVIDIA_H100_80GB`` ('' for none).
        accelerator_count: Accelerators per replica.
        replica_count: Replicas of the pool.
        boot_disk_type: Boot disk type.
        boot_disk_size_gb: Boot disk size, GB.
        container_image: Image of a container spec ('' when ``python_module`` is used).
        command: Container entrypoint (empty: the image's).
        args: Container or module arguments.
        env: Environment variables of the trainer.
        executor_image: Executor image of a Python package spec.
        package_uris: ``gs://`` URIs of the Python package(s).
        python_module: Module run as ``python -m`` (Python package spec).
        service_account: Service account of the job ('' = the default).
        timeout_seconds: Maximum run time of one attempt, seconds (at most 7 days).
        restart_job_on_worker_restart: Restart the whole job when a worker restarts.
        max_wait_seconds: FLEX_START queue wait, seconds (0 = Vertex's default).
        labels: Labels of every attempt (``vsp-`` keys are reserved).
    """

    display_name: str
    base_output_directory: str
    machine_type: str
    accelerator_type: str = ""
    accelerator_count: int = 0
    replica_count: int = 1
    boot_disk_type: str = "pd-ssd"
    boot_disk_size_gb: int = 100
    container_image: str = ""
    command: Sequence[str] = ()
    args: Sequence[str] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    executor_image: str = ""
    package_uris: Sequence[str] = ()
    python_module: str = ""
    service_account: str = ""
    timeout_seconds: int = _MAX_TIMEOUT
    restart_job_on_worker_restart: bool = False
    max_wait_seconds: int = 0
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def problems(self) -> list[errors.SpecProblem]:
        """Every problem of the spec (empty when valid)."""
        found = []

        def bad(field: str, value: Any, problem: str, fix: str) -> None:
            found.append(errors.SpecProblem(field, value, problem, fix))

        if not self.display_name:
            bad("display_name", None, "is required.", "give the job a display name.")
        if not self.base_output_directory.startswith("gs://"):
            bad(
                "base_output_directory",
                self.base_output_directory or None,
                "must be a gs:// URI.",
                "use a bucket path such as gs://BUCKET/runs/NAME; the trainer's checkpoints "
                "and model go under it.",
            )
        unknown = gpu_machines.unknown_type(self.machine_type) if self.machine_type else None
        if not self.machine_type:
            bad("machine_type", None, "is required.", "set e.g. a3-highgpu-8g or n1-standard-8.")
        elif unknown is not None:
            bad(unknown.field, unknown.value, unknown.problem, unknown.fix)
        if self.accelerator_count < 0:
            bad(
                "accelerator_count",
                self.accelerator_count,
                "is negative.",
                "give the accelerators per replica (0 with no accelerator_type).",
            )
        elif bool(self.accelerator_type) != (self.accelerator_count > 0):
            bad(
                "accelerator_count",
                self.accelerator_count,
                "must be positive exactly when accelerator_type is set.",
                "set both (e.g. NVIDIA_H100_80GB and 8) or neither.",
            )
        elif self.machine_type and unknown is None:
            wrong = gpu_machines.mismatch(
                self.machine_type, self.accelerator_type, self.accelerator_count
            )
            if wrong is not None:
                bad(wrong.field, wrong.value, wrong.problem, wrong.fix)
        if self.replica_count < 1:
            bad("replica_count", self.replica_count, "must be at least 1.", "use 1 or more.")
        if bool(self.container_image) == bool(self.python_module):
            bad(
                "container_image",
                self.container_image or None,
                "exactly one of container_image and python_module is needed.",
                "give a container image, or a python_module with executor_image and package_uris.",
            )
        if self.python_module and not (self.executor_image and self.package_uris):
            bad(
                "executor_image",
                self.executor_image or None,
                "a Python package spec needs executor_image and package_uris.",
                "set both, or use container_image.",
            )
        for name in self.env:
            if not _ENV_NAME.match(name):
                bad(
                    f"env.{name}",
                    name,
                    "is not a valid variable name.",
                    "use [A-Za-z_][A-Za-z0-9_]*.",
                )
        if not 1 <= self.timeout_seconds <= _MAX_TIMEOUT:
            bad(
                "timeout_seconds",
                self.timeout_seconds,
                f"must be between 1 and {_MAX_TIMEOUT} (7 days).",
                "checkpoint and let the run resume instead of longer attempts.",
            )
        reserved = [k for k in self.labels if k.startswith("vsp-")]
        if reserved:
            bad("labels", reserved, "vsp- label keys are reserved.", "rename those labels.")
        return found

    def validate(self) -> None:
        """Raises ``SpecValidationError`` listing every problem."""
        found = self.problems()
        if found:
            raise errors.SpecValidationError("custom job spec", found)

    def contract_environment(self, attempt: int, run_key: str) -> dict[str, str]:
        """The trainer contract's variables of one attempt (``trainer.contract``), as on Slurm.

        Vertex sets ``AIP_CHECKPOINT_DIR`` and ``AIP_MODEL_DIR`` from ``baseOutputDirectory``;
        ``VSP_CHECKPOINT_DIR`` and ``VSP_MODEL_DIR`` name the same directories, so a trainer
        written to the contract runs unchanged on either backend. They win over ``env``: the
        step reads the checkpoint history from there.
        """
        base = self.base_output_directory.rstrip("/")
        environment = {
            contract.CHECKPOINT_DIR_ENV: f"{base}/checkpoints/",
            contract.MODEL_DIR_ENV: f"{base}/model/",
            contract.ATTEMPT_ENV: str(attempt),
        }
        if run_key:
            environment[contract.RUN_KEY_ENV] = run_key
        return environment

    def _worker_pool(self, environment: Mapping[str, str]) -> dict[str, Any]:
        machine: dict[str, Any] = {"machineType": self.machine_type}
        if self.accelerator_type:
            machine["acceleratorType"] = self.accelerator_type
            machine["acceleratorCount"] = self.accelerator_count
        env = [{"name": k, "value": str(v)} for k, v in {**self.env, **environment}.items()]
        pool: dict[str, Any] = {
            "machineSpec": machine,
            "replicaCount": str(self.replica_count),
            "diskSpec": {
                "bootDiskType": self.boot_disk_type,
                "bootDiskSizeGb": self.boot_disk_size_gb,
            },
        }
        if self.container_image:
            container: dict[str, Any] = {"imageUri": self.container_image}
            if self.command:
                container["command"] = list(self.command)
            if self.args:
                container["args"] = list(self.args)
            container["env"] = env
            pool["containerSpec"] = container
        else:
            package: dict[str, Any] = {
                "executorImageUri": self.executor_image,
                "packageUris": list(self.package_uris),
                "pythonModule": self.python_module,
            }
            if self.args:
                package["args"] = list(self.args)
            package["env"] = env
            pool["pythonPackageSpec"] = package
        return pool

    def request_body(
        self, strategy: str, labels: Mapping[str, str], attempt: int, run_key: str = ""
    ) -> dict:
        """The CustomJob JSON of one attempt.

        Args:
            strategy: SPOT, STANDARD or FLEX_START.
            labels: Labels this tool adds (run key, attempt).
            attempt: Attempt number (0-based), appended to the display name and given to the
                trainer as ``VSP_ATTEMPT``.
            run_key: The run's identity, given to the trainer as ``VSP_RUN_KEY`` ('' = none).
        """
        if strategy not in STRATEGIES:
            raise errors.UserError(
                f"scheduling strategy {strategy!r} is not one of {STRATEGIES}. Fix: use SPOT "
                "for preemptible capacity, STANDARD for on-demand, FLEX_START for DWS."
            )
        scheduling: dict[str, Any] = {
            "strategy": strategy,
            "timeout": f"{self.timeout_seconds}s",
            "restartJobOnWorkerRestart": self.restart_job_on_worker_restart,
        }
        if strategy == "FLEX_START" and self.max_wait_seconds:
            scheduling["maxWaitDuration"] = f"{self.max_wait_seconds}s"
        job_spec: dict[str, Any] = {
            "workerPoolSpecs": [self._worker_pool(self.contract_environment(attempt, run_key))],
            "scheduling": scheduling,
            "baseOutputDirectory": {"outputUriPrefix": self.base_output_directory},
        }
        if self.service_account:
            job_spec["serviceAccount"] = self.service_account
        return {
            "displayName": f"{self.display_name}-{attempt}"[:128],
            "labels": {**self.labels, **labels},
            "jobSpec": job_spec,
        }
