"""Model evaluations: ``POST P/models/{id}[@{ver}]/evaluations:import`` and
``GET P/models/{id}[@{ver}]/evaluations``.

The import body is an ``ImportModelEvaluationRequest``: ``{"modelEvaluation": {...}}`` with the
writable fields of ``GoogleCloudAiplatformV1ModelEvaluation`` in the aiplatform v1 discovery
document (``FIELDS``); an unknown or output-only field, or a field of the wrong JSON type, is
refused with INVALID_ARGUMENT, as the service refuses unknown names. The evaluation is kept on
the version the path names (``default`` without ``@``), named
``P/models/{id}/evaluations/{n}``, with ``createTime``; the list gives that version's.
"""

from __future__ import annotations

from typing import Any

from vsp.vertex_emulator import clock, errors, router
from vsp.vertex_emulator.models import records

EVALUATIONS = "model_evaluations"
# Writable ModelEvaluation fields and their JSON types (None: any JSON value).
FIELDS: dict[str, type | tuple[type, ...] | None] = {
    "annotationSchemaUri": str,
    "dataItemSchemaUri": str,
    "displayName": str,
    "explanationSpecs": list,
    "metadata": None,
    "metrics": None,
    "metricsSchemaUri": str,
    "modelExplanation": dict,
    "sliceDimensions": list,
}
OUTPUT_ONLY = ("name", "createTime")


def _version(request: router.Request) -> tuple[str, str]:
    params = request.params
    name = f"projects/{params['project']}/locations/{params['location']}/models/{params['model']}"
    record = records.load(request.app.store, name)
    wanted = params.get("version") or records.DEFAULT_ALIAS
    found = None if record is None else records.resolve(request.app.store, record, name, wanted)
    if found is None:
        raise errors.not_found(f'Model version "{name}@{wanted}" not found.')
    return name, found


def _violations(body: dict[str, Any]) -> list[errors.FieldViolation]:
    found = [
        errors.FieldViolation(key, f'Unknown name "{key}" in ImportModelEvaluationRequest.')
        for key in sorted(set(body) - {"modelEvaluation"})
    ]
    evaluation = body.get("modelEvaluation")
    if not isinstance(evaluation, dict):
        return [*found, errors.FieldViolation("model_evaluation", "model_evaluation is required.")]
    for key, value in sorted(evaluation.items()):
        where = f"model_evaluation.{key}"
        if key in OUTPUT_ONLY:
            found.append(errors.FieldViolation(where, f"{key} is output only."))
        elif key not in FIELDS:
            found.append(errors.FieldViolation(where, f'Unknown name "{key}" in ModelEvaluation.'))
        elif FIELDS[key] is not None and not isinstance(value, FIELDS[key]):
            found.append(errors.FieldViolation(where, f"{key} has the wrong type."))
    return found


def import_evaluation(request: router.Request) -> router.Response:
    """Stores the evaluation on the version; returns the ModelEvaluation."""
    body = request.json_object()
    violations = _violations(body)
    if violations:
        raise errors.invalid_fields("Invalid ImportModelEvaluationRequest", violations)
    name, version_id = _version(request)
    store = request.app.store
    number = len(store.keys(EVALUATIONS, prefix=f"{name}/")) + 1
    evaluation = {
        **body["modelEvaluation"],
        "name": f"{name}/evaluations/{number}",
        "createTime": clock.rfc3339(request.app.now()),
    }
    store.put(EVALUATIONS, f"{name}/{number:012d}", {"version": version_id, **evaluation})
    return router.Response(evaluation)


def list_evaluations(request: router.Request) -> router.Response:
    """The evaluations of the version the path names, oldest first."""
    name, version_id = _version(request)
    store = request.app.store
    found = [
        store.get(EVALUATIONS, key) for key in sorted(store.keys(EVALUATIONS, prefix=f"{name}/"))
    ]
    chosen = [
        {k: v for k, v in doc.items() if k != "version"}
        for doc in found
        if doc and doc.get("version") == version_id
    ]
    return router.Response({"modelEvaluations": chosen} if chosen else {})
