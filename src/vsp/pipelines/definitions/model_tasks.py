"""Tasks shared by the training pipelines: the early parameter check and the registration."""

from __future__ import annotations

from typing import Any

from kfp import dsl

from vsp.pipelines.definitions import task_policy

# Pipeline parameters of the training pipelines that configure the registration.
MODEL_PARAMETERS = {
    "project": "project",
    "location": "location",
    "model_id": "model_id",
    "serving_image": "serving_image",
    "display_name": "model_display_name",
    "version_aliases": "version_aliases",
    "labels": "model_labels",
    "data_version": "data_version",
    "code_version": "code_version",
}


def register_model(components: dict, values: dict[str, Any], train: Any):
    """Adds the register-model task after a training task.

    Args:
        components: The component set.
        values: The pipeline's parameters (``locals()`` of the pipeline function).
        train: The training task; its ``model_dir``, ``job_ids`` and ``preemptions`` outputs
            feed the registration.
    """
    task = components["register_model"](
        **{arg: values[param] for arg, param in MODEL_PARAMETERS.items()},
        model_dir=train.outputs["model_dir"],
        job_ids=train.outputs["job_ids"],
        preemptions=train.outputs["preemptions"],
        pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
    )
    return task_policy.apply(task, "register-model")


# Pipeline parameters of the teardown decision, checked early when the pipeline has one.
TEARDOWN_PARAMETERS = (
    "teardown_policy",
    "schedule_cron",
    "interval_hours",
    "idle_price_per_hour",
    "provisioning_minutes",
    "provisioning_price_per_hour",
    "delay_penalty_per_hour",
    "failure_keep_minutes",
    "price_file",
    "shrunk_price_per_hour",
    "scale_up_minutes",
)
# Pipeline parameters of the training step, checked early when the pipeline has them.
TRAINING_PARAMETERS = (
    "command",
    "working_directory",
    "environment",
    "nodes",
    "gpus_per_node",
    "accelerator_count",
    "time_limit_minutes",
    "max_preemptions",
    "max_user_failures",
    "fallback_after_preemptions",
    "capacity_wait_seconds",
    "poll_seconds",
    "spot_price_per_node_hour",
    "ondemand_price_per_node_hour",
)
# The cluster as it will be created, priced by the check when a teardown price is 0.
CLUSTER_PARAMETERS = (
    "location",
    "machine_type",
    "spot_max_nodes",
    "ondemand_max_nodes",
    "cluster_spec",
)


def check_parameters(components: dict, values: dict[str, Any], model_dir: Any):
    """Adds the check-run-parameters task: the later steps' parameters, checked first.

    Args:
        components: The component set.
        values: The pipeline's parameters (``locals()`` of the pipeline function); a
            ``checkpoint_dir`` among them is checked too.
        model_dir: Where the model will be written (a pipeline parameter).
    """
    teardown = {name: values[name] for name in TEARDOWN_PARAMETERS if name in values}
    if teardown:
        teardown.update({name: values[name] for name in CLUSTER_PARAMETERS if name in values})
    training = {name: values[name] for name in TRAINING_PARAMETERS if name in values}
    if training:
        training["check_training"] = True
    checkpoints = {}
    if "checkpoint_dir" in values:
        checkpoints = {"check_checkpoint_dir": True, "checkpoint_dir": values["checkpoint_dir"]}
    task = components["check_run_parameters"](
        model_id=values["model_id"],
        serving_image=values["serving_image"],
        model_dir=model_dir,
        version_aliases=values["version_aliases"],
        model_labels=values["model_labels"],
        check_teardown=bool(teardown),
        **teardown,
        **training,
        **checkpoints,
    )
    return task_policy.apply(task, "check-parameters")
