"""`vsp clusters reap` against the emulator."""

from __future__ import annotations

import copy
import dataclasses
import time

import pytest
import requests
from click.testing import CliRunner

from vsp.components.runtime.core import gcp_labels
from vsp.components.runtime.teardown import prewarm_intents
from vsp.pipelines.cli import main

LOC = ["--project", "test-project", "--location", "us-central1"]


def make(emulator_api, cluster_body, cluster_id, expires_at=None):
    body = copy.deepcopy(cluster_body)
    body["labels"] = {**body["labels"], "vsp-managed": "true", "vsp-teardown": "keep"}
    if expires_at is not None:
        body["labels"][gcp_labels.EXPIRES_AT] = gcp_labels.format_label_time(expires_at)
    emulator_api.create_running(cluster_id, body)


@pytest.mark.slow
def test_clusters_reap_dry_run_then_for_real(emulator, emulator_api, cluster_body):
    now = time.time()
    make(emulator_api, cluster_body, "expired", now - 3600)
    make(emulator_api, cluster_body, "future", now + 7200)
    make(emulator_api, cluster_body, "nolabel")
    runner = CliRunner()

    dry = runner.invoke(main.main, ["clusters", "reap", *LOC, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    lines = dry.output.splitlines()
    assert lines[0].startswith("expired: would delete: expired at ")
    assert lines[1].startswith("future: kept: expires at ")
    assert lines[2] == "nolabel: kept: no vsp-expires-at label"
    assert lines[3] == "total: 3 clusters: 1 to delete, 2 kept (dry run)"
    assert [e for e in emulator.journal() if e["method"] == "DELETE"] == []

    real = runner.invoke(main.main, ["clusters", "reap", *LOC])
    assert real.exit_code == 0, real.output
    lines = real.output.splitlines()
    assert lines[0].startswith("expired: deleted: expired at ")
    assert lines[-1] == "total: 3 clusters: 1 deleted, 2 kept"
    (delete,) = [e for e in emulator.journal() if e["method"] == "DELETE"]
    assert delete["path"].endswith("/modelDevelopmentClusters/expired")
    assert requests.get(emulator_api.clusters_url("expired")).status_code == 404
    assert requests.get(emulator_api.clusters_url("future")).status_code == 200


def test_clusters_reap_with_nothing_to_do(emulator):
    result = CliRunner().invoke(main.main, ["clusters", "reap", *LOC])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["total: 0 clusters"]


def test_clusters_reap_failure_is_printed_and_exits_75(emulator, emulator_api, cluster_body):
    make(emulator_api, cluster_body, "expired", time.time() - 60)
    emulator.add_fault(action="status", method="DELETE", http_status=403, times=None)
    result = CliRunner().invoke(main.main, ["clusters", "reap", *LOC])
    assert result.exit_code == 75, result.output
    assert "expired: failed: DELETE " in result.output
    assert "total: 1 cluster: 1 failed" in result.output
    assert "error: could not delete expired clusters expired. Fix:" in result.output


def test_clusters_reap_creates_a_due_pre_warm(emulator, emulator_api, cluster_body, tmp_path):
    now = time.time()
    body = copy.deepcopy(cluster_body)
    name = "projects/test-project/locations/us-central1/modelDevelopmentClusters/warm"
    intent = prewarm_intents.Intent(name, body, now + 1800, now - 60, now + 1140, now + 7200)
    prewarm_intents.write(str(tmp_path), intent)
    result = CliRunner().invoke(
        main.main, ["clusters", "reap", *LOC, "--prewarm-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("warm: pre-warmed: created, to be ready by ")
    assert lines[-1] == "total: 0 clusters; pre-warm requests: 1 pre-warmed"
    assert requests.get(emulator_api.clusters_url("warm")).status_code == 200
    assert prewarm_intents.read_all(str(tmp_path)) == []


def test_clusters_list_shows_the_pending_pre_warms(emulator, cluster_body, tmp_path):
    tick = 1_796_450_400.0  # 2026-12-05 06:00 UTC
    name = "projects/test-project/locations/us-central1/modelDevelopmentClusters/warm"
    intent = prewarm_intents.Intent(name, {}, tick, tick - 1800, tick - 600, tick + 3600)
    prewarm_intents.write(str(tmp_path), intent)
    other = dataclasses.replace(intent, cluster=name.replace("us-central1", "europe-west4"))
    prewarm_intents.write(str(tmp_path), other)
    result = CliRunner().invoke(
        main.main, ["clusters", "list", *LOC, "--prewarm-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1:] == [
        "warm\tpre-warm\tcreated at 2026-12-05 05:30:00 UTC\tready by 2026-12-05 05:50:00 UTC"
        "\trun at 2026-12-05 06:00:00 UTC"
    ]
