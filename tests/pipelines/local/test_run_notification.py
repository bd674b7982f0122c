"""The run's notification from the compiled template on kfp.local (a venv per step, as on
Vertex): the exit task sends exactly one Pub/Sub message, which the emulator records, naming
the failure and the cluster's fate for a failed run, the model version and the keep cost for a
successful one."""

from __future__ import annotations

import base64
import json

import pytest

from tests.pipelines.local import run_arguments
from vsp.pipelines.definitions import catalog

TOPIC = "projects/test-project/topics/training-runs"


def run_pipeline(tmp_path, monkeypatch, **changes):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = catalog.local_arguments("slurm-spot-training", str(tmp_path / "shared"))
    arguments.update(notify_topic=TOPIC, **changes)
    result = run_arguments.run_main(tmp_path, arguments)
    publishes = [e for e in result.journal if e["path"].endswith(":publish")]
    assert len(publishes) == 1, publishes  # exactly one notification per run
    [sent] = publishes
    assert sent["path"] == f"/v1/{TOPIC}:publish"
    data = sent["body"]["messages"][0]
    message = json.loads(base64.b64decode(data["data"]).decode())
    assert data["attributes"] == {"state": message["state"], "pipelineRun": message["pipelineRun"]}
    return result, message


@pytest.mark.slow
def test_a_failed_run_names_the_failure_and_the_clusters_fate(tmp_path, monkeypatch):
    arguments = catalog.local_arguments("slurm-spot-training", str(tmp_path / "shared"))
    broken = [*arguments["command"], "--steps", "0"]  # the trainer refuses it: exit 2
    result, message = run_pipeline(tmp_path, monkeypatch, command=broken)
    assert not result.succeeded
    assert message["state"] == "FAILED" and message["error"]
    cluster = message["cluster"]
    assert cluster["fate"] == "kept" and cluster["keptUntil"]
    assert cluster["summary"].startswith(f"kept for a retry until {cluster['keptUntil']}")
    assert cluster["idleUsdPerHour"] > 0 and cluster["keepCostUsd"] > 0
    assert message["model"] == {"version": "", "gatePassed": None}


@pytest.mark.slow
def test_a_successful_run_names_the_model_version_and_the_cost(tmp_path, monkeypatch):
    result, message = run_pipeline(tmp_path, monkeypatch, teardown_policy="keep")
    assert result.succeeded, result.error
    assert message["state"] == "SUCCEEDED" and message["error"] == ""
    version = result.parameters["register-model"]["model_resource_name"]
    assert message["model"] == {"version": version, "gatePassed": None}
    cluster = message["cluster"]
    assert cluster["fate"] == "keep" and cluster["keptUntil"]
    assert cluster["idleUsdPerHour"] > 0 and cluster["keepCostUsd"] > 0
