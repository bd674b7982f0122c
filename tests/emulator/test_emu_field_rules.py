"""Labels and integer fields on models, CustomJobs, pipeline jobs, schedules and list calls.

Google's label rules and the proto3 JSON integer rules are applied the same way on every
resource: 400 INVALID_ARGUMENT with a field violation naming the field, nothing stored.
"""

from __future__ import annotations

import pytest
import requests

PARENT = "projects/test-project/locations/us-central1"
URI = "https://us-central1-kfp.pkg.dev/test-project/repo/tiny/latest"


def post(emulator, path: str, body: dict, version: str = "v1") -> requests.Response:
    return requests.post(f"{emulator.base_url}/{version}/{PARENT}/{path}", json=body, timeout=5)


def listed(emulator, path: str) -> dict:
    response = requests.get(f"{emulator.base_url}/v1/{PARENT}/{path}", timeout=5)
    assert response.status_code == 200, response.text
    return response.json()


def refused(response: requests.Response) -> list[tuple[str, str]]:
    """The (field, description) pairs of a 400 INVALID_ARGUMENT answer."""
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    return [(v.get("field"), v["description"]) for v in error["details"][0]["fieldViolations"]]


def model(**labels) -> dict:
    return {
        "modelId": "mnist",
        "model": {
            "displayName": "mnist",
            "artifactUri": "gs://bucket/model/",
            "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/serve:1"},
            "labels": labels,
        },
    }


def custom_job(labels=None, **pool) -> dict:
    spec = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": 1,
        "containerSpec": {"imageUri": "gcr.io/x/y:1", "command": ["true"]},
    }
    for key, value in pool.items():
        section, _, name = key.partition("__")
        if name:
            spec.setdefault(section, {})[name] = value
        else:
            spec[section] = value
    return {
        "displayName": "train",
        "jobSpec": {"workerPoolSpecs": [spec]},
        "labels": labels if labels is not None else {"team": "ml"},
    }


def pipeline_job(labels: dict) -> dict:
    return {
        "displayName": "tiny",
        "templateUri": URI,
        "runtimeConfig": {"gcsOutputDirectory": "gs://bucket/root"},
        "labels": labels,
    }


@pytest.mark.parametrize(
    ("labels", "field"),
    [
        ({"team\n": "ml"}, "model.labels[team\n]"),
        ({"team": "ml\n"}, "model.labels[team]"),
    ],
)
def test_model_labels_with_a_trailing_line_break_are_refused(emulator, labels, field):
    found = refused(post(emulator, "models:upload", model(**labels)))
    assert [f for f, _ in found] == [field]
    assert listed(emulator, "models") == {}


def test_model_labels_take_international_lowercase_letters(emulator):
    response = post(emulator, "models:upload", model(équipe="données"))
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("labels", "field", "phrase"),
    [
        ({"team": "ML"}, "labels[team]", "Invalid label value 'ML'"),
        ({"team": "x" * 64}, "labels[team]", "Invalid label value"),
        ({"team": "ml\n"}, "labels[team]", "Invalid label value"),
        ({"team\n": "ml"}, "labels[team\n]", "Invalid label key"),
        ({f"k{i}": "v" for i in range(65)}, "labels", "At most 64 labels are allowed, got 65."),
    ],
)
def test_custom_job_labels_follow_google_label_rules(emulator, labels, field, phrase):
    found = refused(post(emulator, "customJobs", custom_job(labels)))
    assert [f for f, _ in found] == [field]
    assert phrase in found[0][1]
    assert listed(emulator, "customJobs") == {}


@pytest.mark.parametrize(
    ("pool", "field", "kind"),
    [
        ({"replicaCount": 1.5}, "replica_count", "TYPE_INT64"),
        ({"replicaCount": 2**63}, "replica_count", "TYPE_INT64"),
        ({"machineSpec__acceleratorCount": "eight"}, "machine_spec.accelerator_count", "INT32"),
        ({"machineSpec__acceleratorCount": 2**31}, "machine_spec.accelerator_count", "INT32"),
        ({"machineSpec__acceleratorCount": -1}, "machine_spec.accelerator_count", "INT32"),
        ({"diskSpec__bootDiskSizeGb": 100.5}, "disk_spec.boot_disk_size_gb", "TYPE_INT32"),
        ({"diskSpec__bootDiskSizeGb": True}, "disk_spec.boot_disk_size_gb", "TYPE_INT32"),
    ],
)
def test_custom_job_integer_fields_are_checked(emulator, pool, field, kind):
    found = refused(post(emulator, "customJobs", custom_job(**pool)))
    assert [f for f, _ in found] == [f"job_spec.worker_pool_specs[0].{field}"]
    assert kind in found[0][1]
    assert listed(emulator, "customJobs") == {}


@pytest.mark.parametrize(
    ("labels", "field"),
    [
        ({"team": "ml\n"}, "labels[team]"),
        ({"team\n": "ml"}, "labels[team\n]"),
    ],
)
def test_pipeline_job_labels_name_the_bad_label(emulator, labels, field):
    found = refused(post(emulator, "pipelineJobs", pipeline_job(labels)))
    assert [f for f, _ in found] == [field]
    assert "Invalid label" in found[0][1]
    assert listed(emulator, "pipelineJobs") == {}


@pytest.mark.parametrize("count", [str(2**63), 2**63, "١"])
def test_schedule_run_counts_are_positive_int64(emulator, count):
    body = {
        "displayName": "nightly",
        "cron": "0 3 * * *",
        "maxConcurrentRunCount": count,
        "createPipelineJobRequest": {"parent": PARENT, "pipelineJob": pipeline_job({})},
    }
    found = refused(post(emulator, "schedules", body))
    assert [f for f, _ in found] == ["max_concurrent_run_count"]
    assert listed(emulator, "schedules") == {}


@pytest.mark.parametrize("size", [str(2**31), "9" * 5000, "١"])
def test_page_size_is_an_int32(emulator, size):
    response = requests.get(
        f"{emulator.base_url}/v1/{PARENT}/pipelineJobs", params={"pageSize": size}, timeout=5
    )
    found = refused(response)
    assert [f for f, _ in found] == ["page_size"]
    assert listed(emulator, "pipelineJobs") == {}
