"""The register-model task shared by the training pipelines: one place that wires it."""

from __future__ import annotations

from typing import Any

from kfp import dsl

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
        pipeline_run=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
    )
    task.set_display_name("register-model")
    return task
