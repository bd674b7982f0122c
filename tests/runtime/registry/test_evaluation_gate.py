"""The evaluation gate: every run registers a version, only a passing one takes ``default``, and
the metrics it was judged on arrive as a ModelEvaluation whose import request validates against
the aiplatform v1 discovery document."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import requests

from vsp.components.runtime.core import errors
from vsp.components.runtime.registry import evaluation, gate
from vsp.components.runtime.steps import register_model
from vsp.components.runtime.trainer import model_files

PROJECT, LOCATION = "test-project", "us-central1"
NAME = f"projects/{PROJECT}/locations/{LOCATION}/models/digits"
DISCOVERY = json.loads(
    (
        pathlib.Path(__file__).parents[2] / "data" / "aiplatform_v1_model_evaluation_discovery.json"
    ).read_text()
)


def conforms(value, schema, path="request") -> list[str]:
    """Where ``value`` breaks the discovery ``schema`` (unknown names, output-only fields and
    JSON types; ``any`` takes every value, ``$ref``s the excerpt lacks are not followed)."""
    if "$ref" in schema:
        target = DISCOVERY["schemas"].get(schema["$ref"])
        return [] if target is None else conforms(value, target, path)
    kind = schema.get("type")
    if kind == "any":
        return []
    if kind == "string":
        return [] if isinstance(value, str) else [f"{path}: not a string"]
    if kind == "array":
        if not isinstance(value, list):
            return [f"{path}: not an array"]
        items = schema["items"]
        return [p for i, v in enumerate(value) for p in conforms(v, items, f"{path}[{i}]")]
    if not isinstance(value, dict):
        return [f"{path}: not an object"]
    problems = []
    for key, item in value.items():
        field = schema["properties"].get(key)
        if field is None:
            problems.append(f"{path}.{key}: unknown name")
        elif field.get("readOnly"):
            problems.append(f"{path}.{key}: output only")
        else:
            problems += conforms(item, field, f"{path}.{key}")
    return problems


def write_model(root, run: str, final_loss: float) -> str:
    metrics = {"final_loss": final_loss, "steps": 60, "loss_history": [1.0, final_loss]}
    model_files.write_model_dir(
        root / "bucket" / run / "model",
        {"w": np.arange(3.0)},
        {"step": 60},
        extra_files={"metrics.json": metrics},
    )
    return f"gs://bucket/{run}/model"


def register(model_dir: str, run: str, gate_text: str):
    return register_model.register(
        project=PROJECT,
        location=LOCATION,
        model_id="digits",
        display_name="",
        model_dir_path=model_dir,
        serving_image="us-docker.pkg.dev/p/r/serve:1",
        version_aliases=["default", "candidate"],
        pipeline_run=run,
        gate_text=gate_text,
    )


def default_version(emulator_api) -> str:
    answer = requests.get(f"{emulator_api.emulator.base_url}/v1/{NAME}@default")
    return answer.json()["versionId"]


@pytest.fixture
def gcs_root(tmp_path, monkeypatch):
    root = tmp_path / "gcs"
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(root))
    return root


def test_a_failing_run_registers_without_moving_default_and_a_passing_one_moves_it(
    emulator, emulator_api, gcs_root
):
    first = register(write_model(gcs_root, "run-1", 0.40), "run-1", "final_loss <= 0.5")
    assert first.verdict.passed and default_version(emulator_api) == "1"
    worse = register(write_model(gcs_root, "run-2", 0.90), "run-2", "final_loss <= 0.5")
    assert worse.model.version_id == "2" and not worse.verdict.passed
    assert worse.verdict.reason == "final_loss = 0.9 > 0.5"
    assert default_version(emulator_api) == "1"
    listed = requests.get(f"{emulator_api.emulator.base_url}/v1/{NAME}:listVersions")
    versions = listed.json()["models"]
    assert {v["versionId"]: v["versionAliases"] for v in versions} == {
        "1": ["default"],
        "2": ["candidate"],
    }
    better = register(write_model(gcs_root, "run-3", 0.30), "run-3", "final_loss < default")
    assert better.verdict.reason == "final_loss = 0.3 < 0.4 (the default version's)"
    assert default_version(emulator_api) == "3"
    not_better = register(write_model(gcs_root, "run-4", 0.35), "run-4", "final_loss < default")
    assert not not_better.verdict.passed and default_version(emulator_api) == "3"


def test_the_evaluation_import_validates_against_the_discovery_document(
    emulator, emulator_api, gcs_root
):
    done = register(write_model(gcs_root, "run-1", 0.25), "run-1", "final_loss <= 0.5")
    [sent] = [e for e in emulator.journal() if e["path"].endswith("/evaluations:import")]
    method = DISCOVERY["method"]
    assert sent["method"] == method["httpMethod"]
    assert sent["path"] == f"/v1/{NAME}@1/evaluations:import"
    assert conforms(sent["body"], method["request"]) == []
    assert sent["body"] == {
        "modelEvaluation": {
            "displayName": "vsp-gate run-1",
            "metricsSchemaUri": evaluation.SCHEMAS["classification"],
            "metrics": {"final_loss": 0.25, "steps": 60.0},
            "metadata": {"pipeline_job_id": "run-1"},
        }
    }
    assert done.evaluation == f"{NAME}/evaluations/1"
    # A retried step finds its evaluation and imports none again.
    again = register("gs://bucket/run-1/model", "run-1", "final_loss <= 0.5")
    assert again.model.reused and again.evaluation == done.evaluation
    assert len([e for e in emulator.journal() if e["path"].endswith(":import")]) == 1


def test_the_checker_and_the_emulator_refuse_a_malformed_evaluation(emulator, emulator_api):
    bad = {"modelEvaluation": {"metrics": {}, "name": "x", "score": 1}, "extra": 1}
    assert sorted(conforms(bad, DISCOVERY["method"]["request"])) == [
        "request.extra: unknown name",
        "request.modelEvaluation.name: output only",
        "request.modelEvaluation.score: unknown name",
    ]
    url = f"{emulator_api.emulator.base_url}/v1/{NAME}@1/evaluations:import"
    answer = requests.post(url, json=bad)
    assert answer.status_code == 400
    fields = [v["field"] for d in answer.json()["error"]["details"] for v in d["fieldViolations"]]
    assert fields == ["extra", "model_evaluation.name", "model_evaluation.score"]


@pytest.mark.parametrize("text", ["loss", "loss = 1", "loss <= x", "loss < nan", "< 3"])
def test_a_malformed_gate_is_refused_before_any_request(text):
    with pytest.raises(errors.UserError, match="is not METRIC OP VALUE"):
        gate.Gate.parse(text)


def test_a_gate_on_a_metric_the_run_lacks_names_what_it_has():
    with pytest.raises(errors.UserError, match="they have final_loss"):
        gate.Gate.parse("eval_loss <= 1").judge({"final_loss": 0.2}, None)
