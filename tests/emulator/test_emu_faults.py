"""Fault injection: every action, counting, predicates, control endpoint and faults file."""

from __future__ import annotations

import json
import time

import pytest
import requests

from vsp.vertex_emulator import faults

CLUSTERS = r"/modelDevelopmentClusters$"


def control(emulator, method: str, suffix: str = "", **kwargs) -> requests.Response:
    return requests.request(method, f"{emulator.base_url}/emulator/v1/faults{suffix}", **kwargs)


def test_status_fault_answers_google_error_json_once(emulator, emulator_api, cluster_body):
    rule = emulator.add_fault(action="status", method="POST", path=CLUSTERS, http_status=503)
    failed = emulator_api.create_cluster("c1", cluster_body)
    assert failed.status_code == 503
    assert failed.json() == {
        "error": {
            "code": 503,
            "message": f"Injected fault {rule.id}: UNAVAILABLE.",
            "status": "UNAVAILABLE",
        }
    }
    assert requests.get(emulator_api.clusters_url("c1")).status_code == 404
    assert emulator_api.create_cluster("c1", cluster_body).status_code == 200


def test_status_fault_with_status_name_message_and_retry_after(emulator, emulator_api):
    emulator.add_fault(
        action="status",
        http_status=429,
        message="Quota exceeded.",
        retry_after=2,
        path=CLUSTERS,
    )
    response = requests.get(emulator_api.clusters_url())
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "2"
    assert response.json()["error"] == {
        "code": 429,
        "message": "Quota exceeded.",
        "status": "RESOURCE_EXHAUSTED",
    }


def test_status_fault_after_handling_hides_a_successful_create(
    emulator, emulator_api, cluster_body
):
    emulator.add_fault(action="status", when="after", method="POST", http_status=500)
    assert emulator_api.create_cluster("c1", cluster_body).status_code == 500
    assert requests.get(emulator_api.clusters_url("c1")).status_code == 200
    assert emulator_api.create_cluster("c1", cluster_body).status_code == 409


def test_reset_before_handling_drops_the_call(emulator, emulator_api, cluster_body):
    rule = emulator.add_fault(action="reset", method="POST", path=CLUSTERS)
    with pytest.raises(requests.ConnectionError):
        emulator_api.create_cluster("c1", cluster_body)
    assert requests.get(emulator_api.clusters_url("c1")).status_code == 404
    entry = emulator.journal()[0]
    assert (entry["method"], entry["status"], entry["fault"]) == ("POST", "reset", rule.id)


def test_reset_after_handling_leaves_the_cluster_created(
    emulator, emulator_api, emulator_clock, cluster_body
):
    emulator.add_fault(action="reset_after", method="POST", path=CLUSTERS)
    with pytest.raises(requests.ConnectionError):
        emulator_api.create_cluster("c1", cluster_body)
    cluster = requests.get(emulator_api.clusters_url("c1"))
    assert cluster.status_code == 200
    assert cluster.json()["clusterStatus"]["state"] == "PROVISIONING"
    blind_retry = emulator_api.create_cluster("c1", cluster_body)
    assert blind_retry.status_code == 409
    assert [e["status"] for e in emulator.journal()] == ["reset", 200, 409]


def test_reset_on_a_kept_alive_session(emulator, emulator_api):
    emulator.add_fault(action="reset", method="GET", path=CLUSTERS, skip=1)
    with requests.Session() as session:
        assert session.get(emulator_api.clusters_url()).status_code == 200
        with pytest.raises(requests.ConnectionError):
            session.get(emulator_api.clusters_url())
        assert session.get(emulator_api.clusters_url()).status_code == 200


@pytest.mark.parametrize("when", ["before", "after"])
def test_delay_fault_slows_the_answer(emulator, emulator_api, when):
    emulator.add_fault(action="delay", seconds=0.3, when=when, path=CLUSTERS)
    started = time.monotonic()
    assert requests.get(emulator_api.clusters_url()).status_code == 200
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    requests.get(emulator_api.clusters_url())
    assert time.monotonic() - started < 0.3


def test_delay_after_times_out_the_client_but_the_call_took_effect(
    emulator, emulator_api, cluster_body
):
    emulator.add_fault(action="delay", when="after", seconds=0.5, method="POST")
    with pytest.raises(requests.Timeout):
        requests.post(
            emulator_api.clusters_url(),
            params={"model_development_cluster_id": "c1"},
            json=cluster_body,
            timeout=0.2,
        )
    assert requests.get(emulator_api.clusters_url("c1")).status_code == 200


def test_lro_error_leaves_an_error_cluster_that_blocks_the_id(emulator, emulator_api, cluster_body):
    rule = emulator.add_fault(action="lro_error", method="POST", path=CLUSTERS)
    created = emulator_api.create_cluster("c1", cluster_body)
    assert created.status_code == 200
    operation = emulator_api.wait_operation(created.json()["name"])
    assert "response" not in operation
    assert operation["error"]["code"] == 8
    assert "stockout" in operation["error"]["message"]
    cluster = requests.get(emulator_api.clusters_url("c1")).json()
    assert cluster["clusterStatus"]["state"] == "ERROR"
    assert cluster["clusterStatus"]["error"] == operation["error"]
    assert "startTime" not in cluster
    assert emulator_api.create_cluster("c1", cluster_body).status_code == 409
    deleted = requests.delete(emulator_api.clusters_url("c1")).json()
    emulator_api.wait_operation(deleted["name"])
    assert emulator_api.create_running("c1", cluster_body)["clusterStatus"]["state"] == "RUNNING"
    assert [e["fault"] for e in emulator.journal()].count(rule.id) == 1


def test_lro_error_is_not_used_up_by_a_rejected_create(emulator, emulator_api, cluster_body):
    emulator.add_fault(action="lro_error", method="POST", code=14, message="Backend down.")
    assert emulator_api.create_cluster("BAD", cluster_body).status_code == 400
    created = emulator_api.create_cluster("c1", cluster_body).json()
    operation = emulator_api.wait_operation(created["name"])
    assert operation["error"] == {"code": 14, "message": "Backend down."}


def test_lro_error_on_update_restores_the_spec(
    emulator, emulator_api, emulator_clock, cluster_body
):
    before = emulator_api.create_running("c1", cluster_body, emulator_clock)
    emulator.add_fault(action="lro_error", method="PATCH")
    response = requests.patch(
        emulator_api.clusters_url("c1"),
        params={"updateMask": "labels"},
        json={"labels": {"team": "other"}},
    )
    assert requests.get(emulator_api.clusters_url("c1")).json()["labels"] == {"team": "other"}
    emulator_clock.advance(0.1)
    operation = emulator_api.wait_operation(response.json()["name"])
    assert operation["error"]["code"] == 8
    after = requests.get(emulator_api.clusters_url("c1")).json()
    assert after["labels"] == before["labels"]
    assert after["clusterStatus"]["state"] == "RUNNING"


def test_lro_error_on_delete_leaves_the_cluster_in_error(emulator, emulator_api, cluster_body):
    emulator_api.create_running("c1", cluster_body)
    emulator.add_fault(action="lro_error", method="DELETE", code=13, message="Internal.")
    operation = emulator_api.wait_operation(
        requests.delete(emulator_api.clusters_url("c1")).json()["name"]
    )
    assert operation["error"] == {"code": 13, "message": "Internal."}
    cluster = requests.get(emulator_api.clusters_url("c1")).json()
    assert cluster["clusterStatus"]["state"] == "ERROR"


def test_provisioning_delay_override_applies_to_one_cluster(emulator, emulator_api, cluster_body):
    emulator.add_fault(action="provisioning_delay", seconds=60, body=r'"display_name": "slow"')
    cluster_body["display_name"] = "slow"
    slow = emulator_api.create_cluster("slow", cluster_body).json()
    cluster_body["display_name"] = "fast"
    emulator_api.create_running("fast", cluster_body)
    assert requests.get(emulator_api.url(slow["name"])).json()["done"] is False
    state = requests.get(emulator_api.clusters_url("slow")).json()["clusterStatus"]["state"]
    assert state == "PROVISIONING"


def test_skip_and_times_count_matches(emulator, emulator_api):
    rule = emulator.add_fault(action="status", http_status=500, path=CLUSTERS, skip=1, times=2)
    codes = [requests.get(emulator_api.clusters_url()).status_code for _ in range(5)]
    assert codes == [200, 500, 500, 200, 200]
    (stored,) = emulator.faults()
    assert (stored.id, stored.fired, stored.exhausted) == (rule.id, 2, True)
    assert stored.matched == 3


def test_unlimited_times(emulator, emulator_api):
    emulator.add_fault(action="status", http_status=503, times=None, path=CLUSTERS)
    codes = {requests.get(emulator_api.clusters_url()).status_code for _ in range(3)}
    assert codes == {503}
    assert emulator.clear_faults() == 1
    assert requests.get(emulator_api.clusters_url()).status_code == 200


def test_predicates_on_method_path_query_and_body(emulator, emulator_api, cluster_body):
    emulator.add_fault(action="status", http_status=503, times=None, path=r":callSlurmRestApi$")
    emulator.add_fault(
        action="status", http_status=500, times=None, method="GET", query={"pageSize": r"^7$"}
    )
    emulator.add_fault(action="status", http_status=429, times=None, body=r'"id": "a4"')
    slurm_path = emulator_api.clusters_url("c1") + ":callSlurmRestApi"
    assert requests.post(slurm_path, json={}).status_code == 503
    assert requests.get(emulator_api.clusters_url("c1")).status_code == 404
    assert requests.get(emulator_api.clusters_url(), params={"pageSize": 7}).status_code == 500
    assert requests.get(emulator_api.clusters_url(), params={"pageSize": 8}).status_code == 200
    assert emulator_api.create_cluster("c1", cluster_body).status_code == 429


def test_first_terminal_rule_wins_and_delays_add_up(emulator, emulator_api):
    first = emulator.add_fault(action="status", http_status=500, path=CLUSTERS)
    second = emulator.add_fault(action="status", http_status=503, path=CLUSTERS)
    delay = emulator.add_fault(action="delay", seconds=0.1, path=CLUSTERS)
    assert requests.get(emulator_api.clusters_url()).status_code == 500
    assert requests.get(emulator_api.clusters_url()).status_code == 503
    assert [e["fault"] for e in emulator.journal()] == [f"{first.id},{delay.id}", second.id]


def test_control_endpoint_adds_lists_and_clears(emulator, emulator_api):
    added = control(emulator, "POST", json={"action": "status", "status": 502, "path": CLUSTERS})
    assert added.status_code == 200
    rule = added.json()
    assert (rule["id"], rule["http_status"], rule["times"]) == ("fault-1", 502, 1)
    assert control(emulator, "GET").json()["faults"] == [rule]
    assert requests.get(emulator_api.clusters_url()).status_code == 502
    listed = control(emulator, "GET").json()["faults"]
    assert (listed[0]["matched"], listed[0]["fired"]) == (1, 1)
    assert control(emulator, "DELETE").json() == {"cleared": 1}
    assert control(emulator, "GET").json() == {"faults": []}
    second = control(emulator, "POST", json={"action": "delay", "seconds": 0}).json()
    assert control(emulator, "DELETE", f"/{second['id']}").json() == {}
    assert control(emulator, "DELETE", f"/{second['id']}").status_code == 404
    assert [e["path"] for e in emulator.journal()] == [
        "/v1beta1/projects/test-project/locations/us-central1/modelDevelopmentClusters"
    ]


@pytest.mark.parametrize(
    "rule",
    [
        {"action": "explode"},
        {"path": "x"},
        {"action": "status", "http_status": 200},
        {"action": "status", "path": "("},
        {"action": "reset", "when": "during"},
        {"action": "delay", "sconds": 1},
    ],
)
def test_control_endpoint_rejects_bad_rules(emulator, rule):
    response = control(emulator, "POST", json=rule)
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_faults_file_is_read_when_it_changes(emulator, emulator_api):
    path = emulator.state_dir / faults.FAULTS_FILENAME
    rules = {"faults": [{"action": "status", "http_status": 504, "id": "from-file"}]}
    path.write_text(json.dumps(rules))
    response = requests.get(emulator_api.clusters_url())
    assert response.status_code == 504
    assert response.json()["error"]["status"] == "DEADLINE_EXCEEDED"
    saved = json.loads(path.read_text())["faults"][0]
    assert (saved["id"], saved["fired"]) == ("from-file", 1)
    assert emulator.journal()[-1]["fault"] == "from-file"
