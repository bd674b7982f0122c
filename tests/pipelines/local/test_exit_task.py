"""The exit task as Vertex runs it: kfp's executor hands it the run's final status."""

from __future__ import annotations

import copy

import pytest
import requests

from tests.pipelines.local import exit_tasks
from vsp.components.runtime.core import gcp_labels, readable_time

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "exitcase"


def _execute(tmp_path, state: str, failure_keep_minutes: float = 60.0) -> dict:
    """Runs ``finalize_cluster`` through kfp's executor, as the pipeline backend does; returns
    its outputs (``action``, ``summary``)."""
    parameters = {
        "project": PROJECT,
        "location": LOCATION,
        "cluster_id": CLUSTER,
        "failure_keep_minutes": failure_keep_minutes,
        "timeout_seconds": 60.0,
    }
    return exit_tasks.execute(tmp_path, "finalize_cluster", parameters, state)


_restore_logging = pytest.fixture(autouse=True)(exit_tasks.saved_step_loggers)


@pytest.fixture
def cluster(emulator_api, cluster_body):
    body = copy.deepcopy(cluster_body)
    body["labels"] = {**body["labels"], "vsp-managed": "true"}
    return emulator_api.create_running(CLUSTER, body)


@pytest.mark.slow
def test_a_cancelled_run_deletes_its_cluster(tmp_path, emulator, emulator_api, cluster):
    done = _execute(tmp_path, "CANCELLED")
    assert done == {"action": "deleted", "summary": "deleted: the run was cancelled"}
    writes = [
        e["method"]
        for e in emulator.journal()
        if e["method"] != "GET" and not e["path"].endswith(":wait")
    ]
    assert writes[-1] == "DELETE"
    assert requests.get(emulator_api.clusters_url(CLUSTER)).status_code == 404


@pytest.mark.slow
def test_a_failed_run_keeps_its_cluster_for_a_retry(tmp_path, emulator, emulator_api, cluster):
    done = _execute(tmp_path, "FAILED", failure_keep_minutes=30)
    labels = requests.get(emulator_api.clusters_url(CLUSTER)).json()["labels"]
    assert labels["vsp-teardown"] == "retry" and labels["vsp-expires-at"]
    assert done["action"] == "kept"
    # The fixture's cluster keeps one n2-standard-8 login node (0.39 USD/h in the table); its
    # a4 pool scales to no nodes, so it costs nothing idle.
    until = readable_time.utc(gcp_labels.parse_label_time(labels["vsp-expires-at"]))
    assert done["summary"].startswith(f"kept for a retry until {until}, idle at 0.39 USD/h;")
    assert (
        f"vsp clusters delete --project {PROJECT} --location {LOCATION} {CLUSTER})"
        in (done["summary"])
    )


def test_a_succeeded_run_leaves_the_decision_alone(tmp_path, emulator, cluster):
    before = len(emulator.journal())
    assert _execute(tmp_path, "SUCCEEDED")["action"] == "none"
    assert len(emulator.journal()) == before
