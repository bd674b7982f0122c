"""The ``check_run_parameters`` step's work, from its flat parameters.

The component is a declaration whose body calls ``check_component_params`` with every
parameter it received; ``vsp submit`` and ``vsp schedule`` call the same function with the
values the compiled template would pass to that step, so a run is refused on the command line
for exactly what its first step would refuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vsp.components.runtime.cluster import builder as cluster_builder
from vsp.components.runtime.core import errors
from vsp.components.runtime.registry import preflight
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.training import options_check

TRAINING_NAMES = (
    "command", "working_directory", "environment", "nodes", "gpus_per_node",
    "time_limit_minutes", "max_preemptions", "max_user_failures", "fallback_after_preemptions",
    "capacity_wait_seconds", "poll_seconds", "spot_price_per_node_hour",
    "ondemand_price_per_node_hour",
)  # fmt: skip


def check_component_params(params: Mapping[str, Any]) -> bool:
    """Raises ``errors.SpecValidationError`` listing every problem; returns True otherwise.

    Args:
        params: The ``check_run_parameters`` component's parameters by name (see its
            docstring); missing ones take the component's defaults' meaning (not checked).
    """
    p = dict(params)
    inputs = None
    if p.get("check_teardown"):
        inputs = teardown_inputs.component_inputs(
            policy=p.get("teardown_policy", "auto"),
            schedule_cron=p.get("schedule_cron", ""),
            interval_hours=p.get("interval_hours", 0.0),
            idle_price_per_hour=p.get("idle_price_per_hour", 0.0),
            provisioning_minutes=p.get("provisioning_minutes", 20.0),
            provisioning_price_per_hour=p.get("provisioning_price_per_hour", 0.0),
            delay_penalty_per_hour=p.get("delay_penalty_per_hour", 10.0),
            shrunk_price_per_hour=p.get("shrunk_price_per_hour", 0.0),
            scale_up_minutes=p.get("scale_up_minutes", teardown_inputs.DEFAULT_SCALE_UP_MINUTES),
        )
    cluster = None
    prices = (p.get("idle_price_per_hour", 0.0), p.get("provisioning_price_per_hour", 0.0))
    if p.get("check_teardown") and 0 in prices:
        cluster = dict(p.get("cluster_spec") or {}) or (
            cluster_builder.build_cluster_spec(
                machine_type=p.get("machine_type", "a3-highgpu-8g"),
                spot_max_nodes=p.get("spot_max_nodes", 2),
                ondemand_max_nodes=p.get("ondemand_max_nodes", 0),
                validate=False,  # create_cluster validates the spec itself
            ).to_request_body()
        )
    training = {}
    if p.get("check_training"):
        training = options_check.component_params({k: p[k] for k in TRAINING_NAMES if k in p})
        _check_gpus(p)
    extra: dict[str, Any] = {}
    if p.get("check_checkpoint_dir"):
        extra["checkpoint_dir"] = p.get("checkpoint_dir", "")
    preflight.check_run(
        {
            "model_id": p.get("model_id"),
            "serving_image": p.get("serving_image"),
            "model_dir": p.get("model_dir"),
            "version_aliases": list(p.get("version_aliases") or []),
            "labels": dict(p.get("model_labels") or {}),
        },
        inputs,
        failure_keep_minutes=p.get("failure_keep_minutes", 60.0),
        price_file=p.get("price_file", ""),
        cluster=cluster,
        location=p.get("location", "us-central1"),
        training=training,
        **extra,
    )
    return True


def _check_gpus(p: Mapping[str, Any]) -> None:
    """A job asking for more GPUs per node than the flat parameters' nodes have would wait
    in the queue forever; refused before the cluster is created."""
    gpus, count = p.get("gpus_per_node", 0), p.get("accelerator_count", -1)
    if p.get("cluster_spec") or not isinstance(count, int) or count < 0:
        return
    if isinstance(gpus, int) and gpus > count:
        raise errors.UserError(
            f"gpus_per_node = {gpus} asks Slurm for more GPUs than a training node has "
            f"(accelerator_count = {count}): the job would never start. Fix: set gpus_per_node "
            "to accelerator_count (every GPU of a node) or fewer; 0 for nodes without GPUs."
        )
