"""``model_registry.register_model`` against the emulator."""

from __future__ import annotations

import json
import pathlib

import pytest

from vsp.components.runtime.core import errors, polling, rest
from vsp.components.runtime.registry import client as model_registry

PROJECT, LOCATION = "test-project", "us-central1"
NAME = f"projects/{PROJECT}/locations/{LOCATION}/models/mnist"
UPLOAD = "models:upload$"
FAST = polling.Backoff(initial=0.02, maximum=0.05, jitter=0)


def _client():
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


def _register(client, run_label="run-1", **changes):
    kwargs = {
        "project": PROJECT,
        "location": LOCATION,
        "model_id": "mnist",
        "display_name": "MNIST",
        "artifact_uri": "gs://bucket/model",
        "serving_image": "us-docker.pkg.dev/p/r/serve:1",
        "labels": {"team": "ML"},
        "version_aliases": [],
        "description": "digits",
        "run_label": run_label,
        "provenance": {"vsp-pipeline": "Train/Pipeline"},
        "retry_delay": 0.01,
        "poll_backoff": FAST,
        "settle_seconds": 0.3,
    }
    kwargs.update(changes)
    return model_registry.register_model(client, **kwargs)


def _uploads(emulator):
    return [e for e in emulator.journal() if e["path"].endswith("models:upload")]


def test_register_new_model_records_resources(emulator, gcs_root, tmp_path):
    path = str(tmp_path / "out" / "gcp_resources")
    client = _client()
    result = _register(client, gcp_resources_path=path)
    assert result == model_registry.RegisteredModel(NAME, "1", f"{NAME}@1", False)
    version = client.get(f"v1/{NAME}@1")
    assert version["labels"] == {
        "team": "ml",
        "vsp-pipeline": "train-pipeline",
        "vsp-pipeline-run": "run-1",
    }
    assert version["versionAliases"] == ["default"]
    assert version["artifactUri"] == "gs://bucket/model"
    assert version["containerSpec"] == {"imageUri": "us-docker.pkg.dev/p/r/serve:1"}
    [upload] = _uploads(emulator)
    assert upload["body"]["modelId"] == "mnist"
    assert "parentModel" not in upload["body"]
    recorded = json.loads(pathlib.Path(path).read_text())["resources"]
    assert [r["resourceType"] for r in recorded] == ["VertexLro", "VertexModel"]
    assert "/operations/" in recorded[0]["resourceUri"]
    assert recorded[1]["resourceUri"] == client.url(f"v1/{NAME}@1")


def test_register_a_new_version(emulator, gcs_root):
    client = _client()
    _register(client, run_label="run-1")
    second = _register(client, run_label="run-2", version_aliases=["candidate"])
    assert (second.version_id, second.resource_name, second.reused) == ("2", f"{NAME}@2", False)
    assert _uploads(emulator)[-1]["body"]["parentModel"] == NAME
    assert client.get(f"v1/{NAME}")["versionId"] == "1"
    assert client.get(f"v1/{NAME}@candidate")["versionId"] == "2"


def test_rerun_with_the_same_run_label_uploads_nothing(emulator, gcs_root, tmp_path):
    client = _client()
    first = _register(client)
    path = str(tmp_path / "gcp_resources")
    again = _register(client, gcp_resources_path=path)
    assert again == model_registry.RegisteredModel(NAME, "1", f"{NAME}@1", True)
    assert len(_uploads(emulator)) == 1
    assert first.version_id == again.version_id
    recorded = json.loads(pathlib.Path(path).read_text())["resources"]
    assert [r["resourceType"] for r in recorded] == ["VertexModel"]


@pytest.mark.parametrize("existing", [False, True])
def test_reset_after_upload_is_survived_with_one_version(emulator, gcs_root, existing):
    client = _client()
    if existing:
        _register(client, run_label="run-0")
    emulator.add_fault(action="reset_after", method="POST", path=UPLOAD)
    result = _register(client, run_label="run-1")
    expected = "2" if existing else "1"
    assert (result.version_id, result.reused) == (expected, False)
    assert len(_uploads(emulator)) == (2 if existing else 1)
    versions = client.get(f"v1/{NAME}:listVersions")["models"]
    assert [v["labels"]["vsp-pipeline-run"] for v in versions].count("run-1") == 1


def test_503_before_upload_is_retried_once(emulator, gcs_root):
    client = _client()
    emulator.add_fault(action="status", method="POST", path=UPLOAD, http_status=503)
    result = _register(client)
    assert (result.version_id, result.reused) == ("1", False)
    statuses = [e["status"] for e in _uploads(emulator)]
    assert statuses == [503, 200]
    assert len(client.get(f"v1/{NAME}:listVersions")["models"]) == 1


def test_persistent_503_gives_up_transiently(emulator, gcs_root):
    emulator.add_fault(action="status", method="POST", path=UPLOAD, http_status=503, times=None)
    with pytest.raises(errors.TransientError):
        _register(_client(), upload_attempts=2)
    assert len(_uploads(emulator)) == 2


def test_unverified_model_dir_is_refused_before_any_request(emulator, gcs_root):
    (gcs_root / "bucket" / "model" / "manifest.json").write_text("{}")
    with pytest.raises(errors.UserError):
        _register(_client())
    with pytest.raises(errors.UserError):
        _register(_client(), artifact_uri="gs://bucket/missing")
    assert emulator.journal() == []


@pytest.mark.parametrize(
    "changes",
    [
        {"model_id": "Bad"},
        {"labels": {"Team": "ml"}},
        {"run_label": "!!"},
        {"version_aliases": ["Prod"]},
        {"serving_image": ""},
    ],
)
def test_invalid_arguments_are_user_errors_before_any_request(emulator, gcs_root, changes):
    with pytest.raises(errors.UserError):
        _register(_client(), **changes)
    assert emulator.journal() == []


def test_build_labels_sanitizes_values():
    labels = model_registry.build_labels({"a": "X" * 80}, {"b": "Run/1"}, "R 1")
    # The run's identity keeps a hash of itself when cleaning changed it: "R 1" and "r-1" are
    # two runs, and must never share a version.
    run = labels.pop("vsp-pipeline-run")
    assert labels == {"a": "x" * 63, "b": "run-1"}
    assert run.startswith("r-1-") and len(run) == len("r-1-") + 12
    assert model_registry.build_labels({}, {}, "r-1") == {"vsp-pipeline-run": "r-1"}
