"""ModelEvaluation import: the metrics a version was judged on, on the version itself.

``POST v1/{model}@{version}/evaluations:import`` with an ``ImportModelEvaluationRequest``
(``{"modelEvaluation": {...}}``), in the shape Google Cloud Pipeline Components'
``model_evaluation_import`` sends: ``metrics``, ``metricsSchemaUri`` (its schema per problem
type), ``displayName``, and ``metadata`` with ``pipeline_job_id``. Checked against the
``GoogleCloudAiplatformV1ImportModelEvaluationRequest`` schema of the aiplatform v1 discovery
document (tests/data). The current default version's latest evaluation is the gate's baseline.
"""

from __future__ import annotations

import logging
from typing import Any

from vsp.components.runtime.core import errors, rest
from vsp.components.runtime.registry import gate

log = logging.getLogger(__name__)

API_VERSION = "v1"
SCHEMA_ROOT = "gs://google-cloud-aiplatform/schema/modelevaluation"
# The schema files GCPC's model_evaluation_import names per problem type.
SCHEMAS = {
    "classification": f"{SCHEMA_ROOT}/classification_metrics_1.0.0.yaml",
    "regression": f"{SCHEMA_ROOT}/regression_metrics_1.0.0.yaml",
    "forecasting": f"{SCHEMA_ROOT}/forecasting_metrics_1.0.0.yaml",
}


def schema_uri(problem_type: str) -> str:
    """The metrics schema of ``problem_type``.

    Raises:
        errors.UserError: Not one of ``SCHEMAS``.
    """
    if problem_type not in SCHEMAS:
        raise errors.UserError(
            f"evaluation_problem_type {problem_type!r:.40} is not one of "
            f"{', '.join(SCHEMAS)}. Fix: pick the one that describes the model."
        )
    return SCHEMAS[problem_type]


def request_body(
    metrics: dict[str, float], problem_type: str, display_name: str, pipeline_run: str
) -> dict[str, Any]:
    """The ``ImportModelEvaluationRequest`` of ``metrics``."""
    evaluation: dict[str, Any] = {
        "displayName": display_name,
        "metricsSchemaUri": schema_uri(problem_type),
        "metrics": dict(metrics),
    }
    if pipeline_run:
        evaluation["metadata"] = {"pipeline_job_id": pipeline_run}
    return {"modelEvaluation": evaluation}


def import_evaluation(
    client: rest.VertexRestClient, version_name: str, body: dict[str, Any]
) -> str:
    """Imports the evaluation onto ``version_name`` (``.../models/ID@VERSION``); its name."""
    answer = client.post(f"{API_VERSION}/{version_name}/evaluations:import", body)
    return str(answer.get("name", ""))


def existing(client: rest.VertexRestClient, version_name: str, display_name: str) -> str:
    """The name of the version's evaluation called ``display_name`` ('' when none): a retried
    step finds the evaluation it imported before instead of importing a second one."""
    found = client.get(f"{API_VERSION}/{version_name}/evaluations")
    for item in found.get("modelEvaluations") or []:
        if item.get("displayName") == display_name:
            return str(item.get("name", ""))
    return ""


def baseline(client: rest.VertexRestClient, model_name: str) -> dict[str, float] | None:
    """The metrics of the default version's latest evaluation; None without either."""
    try:
        found = client.get(f"{API_VERSION}/{model_name}@default/evaluations")
    except errors.NotFoundError:
        return None
    evaluations = found.get("modelEvaluations") or []
    if not evaluations:
        return None
    latest = max(evaluations, key=lambda e: str(e.get("createTime", "")))
    return gate.numbers(latest.get("metrics"))
