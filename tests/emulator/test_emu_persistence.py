"""State survives restarts: clusters, operations, settings, faults; transitions by timestamp."""

from __future__ import annotations

import json
import threading
import time

import pytest
import requests

from vsp.vertex_emulator import clock, config, server


def test_restart_keeps_clusters_and_operations(
    emulator_factory, tmp_path, cluster_body, emulator_api_for
):
    first = emulator_factory(tmp_path / "state")
    api = emulator_api_for(first)
    cluster = api.create_running("c1", cluster_body)
    operation_name = requests.delete(api.clusters_url("c1")).json()["name"]
    api.create_cluster("c2", cluster_body)
    deleted = api.wait_operation(operation_name)
    journaled = len(first.journal())
    first.stop()

    second = emulator_factory(tmp_path / "state")
    api = emulator_api_for(second)
    assert requests.get(api.clusters_url("c1")).status_code == 404
    assert requests.get(api.url(operation_name)).json() == deleted
    c2 = api.create_cluster("c2", cluster_body)
    assert c2.status_code == 409
    assert requests.get(api.clusters_url("c2")).status_code == 200
    assert len(second.journal()) == journaled + 4
    assert cluster["name"].endswith("/c1")


def test_restart_on_the_same_port_keeps_serving(
    emulator_factory, tmp_path, cluster_body, emulator_api_for
):
    first = emulator_factory(tmp_path / "state")
    port = int(first.address.rsplit(":", 1)[1])
    with requests.Session() as session:
        api = emulator_api_for(first)
        assert session.post(
            api.clusters_url(), params={"model_development_cluster_id": "c1"}, json=cluster_body
        ).ok
        first.stop()
        second = emulator_factory(tmp_path / "state", port=port)
        assert second.address == f"127.0.0.1:{port}"
        cluster = session.get(emulator_api_for(second).clusters_url("c1"))
        assert cluster.status_code == 200


def test_provisioning_finishes_from_stored_timestamps_while_down(
    emulator_factory, tmp_path, cluster_body, emulator_api_for
):
    first = emulator_factory(tmp_path / "state", provisioning_delay_seconds=0.3)
    created = emulator_api_for(first).create_cluster("c1", cluster_body).json()
    first.stop()
    time.sleep(0.4)
    second = emulator_factory(tmp_path / "state")
    api = emulator_api_for(second)
    cluster = requests.get(api.clusters_url("c1")).json()
    assert cluster["clusterStatus"]["state"] == "RUNNING"
    started = clock.parse_rfc3339(cluster["startTime"])
    assert started - clock.parse_rfc3339(cluster["createTime"]) == pytest.approx(0.3, abs=0.01)
    operation = requests.get(api.url(created["name"])).json()
    assert operation["done"] is True
    assert operation["response"]["startTime"] == cluster["startTime"]


def test_pending_operation_stays_pending_across_a_quick_restart(
    emulator_factory, tmp_path, cluster_body, emulator_api_for
):
    first = emulator_factory(tmp_path / "state", provisioning_delay_seconds=60)
    created = emulator_api_for(first).create_cluster("c1", cluster_body).json()
    first.stop()
    second = emulator_factory(tmp_path / "state")
    api = emulator_api_for(second)
    assert requests.get(api.url(created["name"])).json()["done"] is False
    second.app.clock = lambda: time.time() + 60
    assert api.wait_operation(created["name"])["response"]["clusterStatus"]["state"] == "RUNNING"


def test_a_request_still_served_at_stop_writes_nothing_after_it(
    emulator_factory, tmp_path, cluster_body, emulator_api_for
):
    """A create held in the stopped server must not land in the state the next server opened
    (it landed later: the next server, having read the pending operations before, showed the
    cluster PROVISIONING for ever)."""
    first = emulator_factory(tmp_path / "state")
    port = int(first.address.rsplit(":", 1)[1])
    first.add_fault(action="delay", seconds=0.6, times=1, method="POST", when="before")
    api = emulator_api_for(first)
    answers: list[object] = []

    def create() -> None:
        try:
            answers.append(api.create_cluster("c1", cluster_body).status_code)
        except requests.ConnectionError as exc:
            answers.append(type(exc).__name__)

    sender = threading.Thread(target=create)
    sender.start()
    time.sleep(0.2)  # the create is held inside the first server
    first.stop()
    second = emulator_factory(tmp_path / "state", port=port)
    sender.join(5)
    time.sleep(0.6)  # past the hold: the first server's handler has run
    assert answers == ["ConnectionError"]
    api = emulator_api_for(second)
    assert requests.get(api.clusters_url("c1")).status_code == 404
    assert requests.get(api.clusters_url()).json() == {}
    retried = api.create_cluster("c1", cluster_body)
    assert retried.status_code == 200
    assert api.wait_operation(retried.json()["name"])["response"]["clusterStatus"] == {
        "state": "RUNNING",
        "detail": "The cluster is running.",
    }


def test_settings_are_saved_and_reused(tmp_path):
    custom = config.EmulatorSettings(provisioning_delay_seconds=7, time_scale=0.5)
    with server.EmulatorServer(tmp_path, settings=custom) as emulator:
        assert emulator.settings == custom
        emulator.update_settings(delete_delay_seconds=2)
    with server.EmulatorServer(tmp_path) as emulator:
        assert emulator.settings == custom.replace(delete_delay_seconds=2)
        assert emulator.settings.scaled(7) == 3.5
    saved = json.loads((tmp_path / config.SETTINGS_FILENAME).read_text())
    assert saved["provisioning_delay_seconds"] == 7


def test_settings_control_endpoint(emulator):
    url = f"{emulator.base_url}/emulator/v1/settings"
    assert requests.get(url).json()["provisioning_delay_seconds"] == 0.2
    changed = requests.patch(url, json={"provisioning_delay_seconds": 1.5})
    assert changed.json()["provisioning_delay_seconds"] == 1.5
    assert emulator.settings.provisioning_delay_seconds == 1.5
    assert requests.patch(url, json={"nope": 1}).status_code == 400
    assert requests.patch(url, json={"time_scale": -1}).status_code == 400


def test_fault_rules_and_counters_survive_a_restart(emulator_factory, tmp_path, emulator_api_for):
    first = emulator_factory(tmp_path / "state")
    first.add_fault(action="status", http_status=500, times=2, path="modelDevelopmentClusters$")
    api = emulator_api_for(first)
    assert requests.get(api.clusters_url()).status_code == 500
    first.stop()
    second = emulator_factory(tmp_path / "state")
    api = emulator_api_for(second)
    assert [requests.get(api.clusters_url()).status_code for _ in range(2)] == [500, 200]


def test_one_emulator_per_state_dir(emulator):
    before = (emulator.state_dir / config.SETTINGS_FILENAME).read_text()
    with pytest.raises(RuntimeError, match="in use"):
        server.EmulatorServer(emulator.state_dir, settings=config.EmulatorSettings())
    assert (emulator.state_dir / config.SETTINGS_FILENAME).read_text() == before
    emulator.stop()
    unstarted = server.EmulatorServer(emulator.state_dir)
    unstarted.stop()
    server.EmulatorServer(emulator.state_dir).stop()


def test_runtime_file_names_the_address_while_running(emulator_factory, tmp_path):
    emulator = emulator_factory(tmp_path / "state")
    runtime = json.loads((tmp_path / "state" / server.RUNTIME_FILENAME).read_text())
    assert runtime["address"] == emulator.address
    assert runtime["baseUrl"] == emulator.base_url
    emulator.stop()
    assert not (tmp_path / "state" / server.RUNTIME_FILENAME).exists()
