"""The exit task's notification, run as the pipeline backend runs the exit task (kfp's
executor with the run's final status): one message naming the state, the error and the
cluster's fate, sent after the rule was applied."""

from __future__ import annotations

import copy
import json

import pytest

from tests.pipelines.local import exit_tasks

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "exitnote"
TOPIC = f"projects/{PROJECT}/topics/runs"

_restore_logging = pytest.fixture(autouse=True)(exit_tasks.saved_step_loggers)


@pytest.mark.slow
def test_a_failed_run_sends_one_message_after_keeping_its_cluster(
    tmp_path, emulator, emulator_api, cluster_body
):
    body = copy.deepcopy(cluster_body)  # created by the run that failed
    body["labels"] = {**body["labels"], "vsp-managed": "true", "vsp-pipeline-run": "run-7"}
    emulator_api.create_running(CLUSTER, body)
    parameters = {
        "project": PROJECT,
        "location": LOCATION,
        "cluster_id": CLUSTER,
        "failure_keep_minutes": 60.0,
        "timeout_seconds": 60.0,
        "pipeline_run": "run-7",
        "notify_topic": TOPIC,
        "model_id": "digits",
    }
    done = exit_tasks.execute(tmp_path, "finalize_cluster", parameters, "FAILED")
    assert done["action"] == "kept"
    [message] = emulator.published()
    sent = json.loads(message["text"])
    assert message["topic"] == TOPIC
    assert message["attributes"] == {"state": "FAILED", "pipelineRun": "run-7"}
    assert (sent["state"], sent["error"]) == ("FAILED", "ended")
    assert sent["cluster"]["fate"] == "kept" and sent["cluster"]["summary"] == done["summary"]
    # One n2-standard-8 login node at 0.39 USD/h, kept 60 minutes.
    assert sent["cluster"]["idleUsdPerHour"] == pytest.approx(0.39, abs=0.01)
    assert sent["cluster"]["keepCostUsd"] == pytest.approx(0.39, abs=0.01)
    assert sent["model"] == {"version": "", "gatePassed": None}  # no model "digits" yet
    publish = [e for e in emulator.journal() if e["path"].endswith(":publish")]
    deletes_or_patches = [e for e in emulator.journal() if e["method"] == "PATCH"]
    assert emulator.journal().index(publish[0]) > emulator.journal().index(deletes_or_patches[-1])
