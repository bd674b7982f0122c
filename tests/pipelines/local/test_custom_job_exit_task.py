"""The exit task of spot-custom-job-training, run through kfp's executor with the final status
Vertex passes: after a failure or a cancel the run's unfinished CustomJobs get ``:cancel``."""

from __future__ import annotations

import sys
import time

import pytest
import requests

from tests.pipelines.local import exit_tasks
from vsp.components.runtime.core import gcp_labels

PROJECT, LOCATION = "test-project", "us-central1"
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"
RUN = "spot-custom-job-training-20261203"
FAST = {
    "custom_job_queue_delay_seconds": 0.05,
    "custom_job_pending_delay_seconds": 0.05,
    "custom_job_kill_wait_seconds": 0.3,
}


_restore_logging = pytest.fixture(autouse=True)(exit_tasks.saved_step_loggers)


def _job(server, pipeline_run: str, seconds: float) -> dict:
    """A CustomJob labelled as ``train_custom_job`` labels its attempts."""
    labels = {
        gcp_labels.PIPELINE_RUN: gcp_labels.unique_value(pipeline_run),
        gcp_labels.RUN_KEY: "vsp-train-" + gcp_labels.unique_value(pipeline_run),
    }
    body = {
        "displayName": "train-attempt-0",
        "labels": labels,
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": 1,
                    "containerSpec": {
                        "imageUri": "python:3.11-slim",
                        "command": [sys.executable, "-c", f"import time; time.sleep({seconds})"],
                    },
                }
            ],
            "scheduling": {"strategy": "SPOT"},
        },
    }
    response = requests.post(f"{server.base_url}/v1/{PARENT}/customJobs", json=body, timeout=5)
    assert response.status_code == 200, response.text
    return response.json()


def _state(server, name: str) -> str:
    return requests.get(f"{server.base_url}/v1/{name}", timeout=5).json()["state"]


def _execute(tmp_path, state: str) -> list:
    """Runs ``finalize_custom_jobs`` through kfp's executor, as the pipeline backend does."""
    parameters = {"project": PROJECT, "location": LOCATION, "pipeline_run": RUN}
    return exit_tasks.execute(tmp_path, "finalize_custom_jobs", parameters, state)


@pytest.mark.parametrize("state", ["CANCELLED", "FAILED"])
def test_a_failed_or_cancelled_run_cancels_its_running_custom_job(
    state, emulator_factory, tmp_path
):
    server = emulator_factory(**FAST)
    mine = _job(server, RUN, 60)
    finished = _job(server, RUN, 0)
    other = _job(server, "another-run", 60)
    deadline = time.monotonic() + 10
    while _state(server, mine["name"]) != "JOB_STATE_RUNNING" or (
        _state(server, finished["name"]) != "JOB_STATE_SUCCEEDED"
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert _execute(tmp_path, state) == [mine["name"]]
    cancels = [e["path"] for e in server.journal() if e["path"].endswith(":cancel")]
    assert cancels == [f"/v1/{mine['name']}:cancel"]
    lists = [e for e in server.journal() if e["method"] == "GET" and e["path"].endswith("Jobs")]
    label = gcp_labels.unique_value(RUN)
    assert lists[-1]["query"]["filter"] == f'labels.vsp-pipeline-run="{label}"'
    deadline = time.monotonic() + 10
    while _state(server, mine["name"]) != "JOB_STATE_CANCELLED":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert _state(server, other["name"]) == "JOB_STATE_RUNNING"


def test_a_succeeded_run_sends_nothing(emulator_factory, tmp_path):
    server = emulator_factory(**FAST)
    _job(server, RUN, 60)
    before = len(server.journal())
    assert _execute(tmp_path, "SUCCEEDED") == []
    assert len(server.journal()) == before
