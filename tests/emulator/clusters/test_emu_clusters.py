"""The modelDevelopmentClusters resource and its operations, over plain HTTP."""

from __future__ import annotations

import re
import time

import pytest
import requests

from vsp.vertex_emulator import clock

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
TYPE = "type.googleapis.com/google.cloud.aiplatform.v1beta1."

CAMEL_BODY = {
    "displayName": "test",
    "labels": {"team": "ml"},
    "network": {
        "network": "projects/test-project/global/networks/default",
        "subnetwork": "projects/test-project/regions/us-central1/subnetworks/default",
    },
    "nodePools": [
        {
            "id": "login",
            "machineSpec": {"machineType": "n2-standard-8"},
            "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1},
            "zone": "us-central1-b",
        },
        {
            "id": "a4",
            "machineSpec": {
                "machineType": "a4-highgpu-8g",
                "acceleratorType": "NVIDIA_B200",
                "acceleratorCount": 8,
            },
            "provisioningModel": "SPOT",
            "scalingSpec": {"minNodeCount": 0, "maxNodeCount": 2},
            "zone": "us-central1-b",
        },
    ],
    "orchestratorSpec": {
        "slurmSpec": {
            "homeDirectoryStorage": "projects/test-project/locations/us-central1-b/instances/home",
            "loginNodePoolId": "login",
            "partitions": [{"id": "a4", "nodePoolIds": ["a4"], "config": {"MaxTime": "1:00:00"}}],
            "config": {"PreemptMode": "REQUEUE"},
        }
    },
}


def violations(response: requests.Response) -> list[dict]:
    details = response.json()["error"]["details"]
    (bad_request,) = [d for d in details if d["@type"].endswith("google.rpc.BadRequest")]
    return bad_request["fieldViolations"]


def test_create_then_operation_done_then_running_with_exact_shape(
    emulator_api, emulator_clock, cluster_body
):
    created = emulator_api.create_cluster("c1", cluster_body)
    assert created.status_code == 200
    operation = created.json()
    assert re.fullmatch(
        r"projects/test-project/locations/us-central1/operations/\d+", operation["name"]
    )
    stamp = operation["metadata"]["genericMetadata"]["createTime"]
    assert operation == {
        "name": operation["name"],
        "metadata": {
            "@type": TYPE + "CreateModelDevelopmentClusterOperationMetadata",
            "genericMetadata": {"createTime": stamp, "updateTime": stamp},
            "progressMessage": "Create Model Development Cluster request received, provisioning...",
        },
        "done": False,
    }
    provisioning = requests.get(emulator_api.clusters_url("c1")).json()
    assert provisioning["clusterStatus"]["state"] == "PROVISIONING"
    assert "startTime" not in provisioning
    assert requests.get(emulator_api.url(operation["name"])).json() == operation

    emulator_clock.advance(0.2)
    done = emulator_api.wait_operation(operation["name"])
    cluster = requests.get(emulator_api.clusters_url("c1")).json()
    name = "projects/test-project/locations/us-central1/modelDevelopmentClusters/c1"
    assert cluster == {
        **CAMEL_BODY,
        "name": name,
        "createTime": cluster["createTime"],
        "updateTime": cluster["updateTime"],
        "startTime": cluster["startTime"],
        "clusterStatus": {"state": "RUNNING", "detail": "The cluster is running."},
        "clusterEvents": [],
    }
    for field in ("createTime", "updateTime", "startTime"):
        assert STAMP.match(cluster[field]), cluster[field]
    assert cluster["createTime"] == stamp
    elapsed = clock.parse_rfc3339(cluster["startTime"]) - clock.parse_rfc3339(stamp)
    assert elapsed == pytest.approx(0.2, abs=0.01)
    assert done["done"] is True
    assert done["response"] == {"@type": TYPE + "ModelDevelopmentCluster", **cluster}
    assert done["metadata"]["genericMetadata"]["updateTime"] == cluster["startTime"]


def test_v1_paths_serve_the_same_resources(emulator_api, cluster_body):
    emulator_api.create_running("c1", cluster_body)
    via_v1 = requests.get(emulator_api.clusters_url("c1", version="v1"))
    assert via_v1.status_code == 200
    assert via_v1.json() == requests.get(emulator_api.clusters_url("c1")).json()


def test_snake_and_camel_input_store_the_same_cluster(emulator_api, cluster_body):
    snake = emulator_api.create_running("snake", cluster_body)
    camel = emulator_api.create_running("camel", CAMEL_BODY)
    volatile = ("name", "createTime", "updateTime", "startTime")
    assert {k: v for k, v in snake.items() if k not in volatile} == {
        k: v for k, v in camel.items() if k not in volatile
    }
    assert snake["orchestratorSpec"]["slurmSpec"]["config"] == {"PreemptMode": "REQUEUE"}


def test_mixed_spellings_of_one_field_are_rejected(emulator_api, cluster_body):
    cluster_body["nodePools"] = cluster_body["node_pools"]
    response = emulator_api.create_cluster("c1", cluster_body)
    assert response.status_code == 400
    assert "node_pools" in response.json()["error"]["message"]


def test_list_pages_by_name(emulator_api, cluster_body):
    for cluster_id in ("gamma", "alpha", "beta"):
        assert emulator_api.create_cluster(cluster_id, cluster_body).status_code == 200
    first = requests.get(emulator_api.clusters_url(), params={"pageSize": 2}).json()
    assert [c["name"].rsplit("/", 1)[1] for c in first["modelDevelopmentClusters"]] == [
        "alpha",
        "beta",
    ]
    assert first["nextPageToken"]
    second = requests.get(
        emulator_api.clusters_url(), params={"pageSize": 2, "pageToken": first["nextPageToken"]}
    ).json()
    assert [c["name"].rsplit("/", 1)[1] for c in second["modelDevelopmentClusters"]] == ["gamma"]
    assert "nextPageToken" not in second
    everything = requests.get(emulator_api.clusters_url()).json()
    assert len(everything["modelDevelopmentClusters"]) == 3


def test_list_of_an_empty_location_and_a_bad_token(emulator_api):
    assert requests.get(emulator_api.clusters_url()).json() == {}
    bad = requests.get(emulator_api.clusters_url(), params={"pageToken": "nonsense"})
    assert bad.status_code == 400
    assert violations(bad) == [{"field": "page_token", "description": "Invalid page token."}]


def test_patch_changes_only_masked_paths(emulator_api, emulator_clock, cluster_body):
    before = emulator_api.create_running("c1", cluster_body, emulator_clock)
    changed = dict(before)
    changed["labels"] = {"team": "infra", "cost_center": "42"}
    changed["displayName"] = "not applied"
    changed["nodePools"] = [dict(p) for p in before["nodePools"]]
    changed["nodePools"][1]["scalingSpec"] = {"minNodeCount": 0, "maxNodeCount": 4}
    response = requests.patch(
        emulator_api.clusters_url("c1"),
        params={"updateMask": "labels,node_pools", "updateMode": "USER_AND_SERVICE"},
        json=changed,
    )
    assert response.status_code == 200, response.text
    operation = response.json()
    assert operation["metadata"]["@type"] == TYPE + "UpdateModelDevelopmentClusterOperationMetadata"
    assert operation["done"] is False
    updating = requests.get(emulator_api.clusters_url("c1")).json()
    assert updating["clusterStatus"]["state"] == "UPDATING"
    emulator_clock.advance(0.1)
    done = emulator_api.wait_operation(operation["name"])
    after = requests.get(emulator_api.clusters_url("c1")).json()
    assert after["clusterStatus"]["state"] == "RUNNING"
    assert after["labels"] == {"team": "infra", "cost_center": "42"}
    assert after["nodePools"][1]["scalingSpec"]["maxNodeCount"] == 4
    assert after["displayName"] == "test"
    assert after["startTime"] == before["startTime"]
    assert after["updateTime"] > before["updateTime"]
    assert done["response"]["@type"] == TYPE + "ModelDevelopmentCluster"
    assert done["response"]["labels"] == after["labels"]


def test_patch_with_camel_mask_and_cleared_path(emulator_api, cluster_body):
    emulator_api.create_running("c1", cluster_body)
    response = requests.patch(
        emulator_api.clusters_url("c1"),
        params={"updateMask": "orchestratorSpec.slurmSpec.config,displayName"},
        json={"displayName": "renamed"},
    )
    assert response.status_code == 200, response.text
    emulator_api.wait_operation(response.json()["name"])
    after = requests.get(emulator_api.clusters_url("c1")).json()
    assert after["displayName"] == "renamed"
    assert "config" not in after["orchestratorSpec"]["slurmSpec"]


@pytest.mark.parametrize(
    ("mask", "phrase"),
    [
        ("network", '"network" is immutable'),
        ("orchestrator_spec.slurm_spec.home_directory_storage", "is immutable"),
        ("create_time", "output only"),
        ("no_such_field", "not a field"),
        ("", "must list the fields"),
    ],
)
def test_patch_rejects_bad_masks(emulator_api, cluster_body, mask, phrase):
    emulator_api.create_running("c1", cluster_body)
    response = requests.patch(
        emulator_api.clusters_url("c1"), params={"updateMask": mask}, json=CAMEL_BODY
    )
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    (violation,) = violations(response)
    assert violation["field"] == "update_mask"
    assert phrase in violation["description"]
    if mask:
        assert mask in response.json()["error"]["message"]


def test_patch_rejects_a_changed_pool_machine(emulator_api, cluster_body):
    emulator_api.create_running("c1", cluster_body)
    cluster_body["node_pools"][1]["machine_spec"]["machine_type"] = "a3-highgpu-8g"
    response = requests.patch(
        emulator_api.clusters_url("c1"), params={"updateMask": "node_pools"}, json=cluster_body
    )
    assert response.status_code == 400
    assert [v["field"] for v in violations(response)] == ["node_pools[1].machine_spec"]


def test_patch_while_provisioning_is_a_failed_precondition(
    emulator_api, emulator_clock, cluster_body
):
    emulator_api.create_cluster("c1", cluster_body)
    response = requests.patch(
        emulator_api.clusters_url("c1"), params={"updateMask": "labels"}, json={}
    )
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "FAILED_PRECONDITION"


def test_delete_shows_stopping_then_gone(emulator_api, emulator_clock, cluster_body):
    emulator_api.create_running("c1", cluster_body, emulator_clock)
    response = requests.delete(emulator_api.clusters_url("c1"))
    assert response.status_code == 200
    operation = response.json()
    assert operation["metadata"]["@type"] == TYPE + "DeleteOperationMetadata"
    assert operation["done"] is False
    stopping = requests.get(emulator_api.clusters_url("c1")).json()
    assert stopping["clusterStatus"] == {
        "state": "STOPPING",
        "detail": "The cluster is being deleted.",
    }
    again = requests.delete(emulator_api.clusters_url("c1"))
    assert again.json()["error"]["status"] == "FAILED_PRECONDITION"
    emulator_clock.advance(0.1)
    done = emulator_api.wait_operation(operation["name"])
    assert done["response"] == {"@type": "type.googleapis.com/google.protobuf.Empty"}
    assert "error" not in done
    assert requests.get(emulator_api.clusters_url("c1")).status_code == 404


def test_delete_while_provisioning_cancels_the_create(emulator_api, emulator_clock, cluster_body):
    created = emulator_api.create_cluster("c1", cluster_body).json()
    deleted = requests.delete(emulator_api.clusters_url("c1")).json()
    create_op = requests.get(emulator_api.url(created["name"])).json()
    assert create_op["done"] is True
    assert create_op["error"]["code"] == 1
    emulator_clock.advance(0.1)
    emulator_api.wait_operation(deleted["name"])
    assert requests.get(emulator_api.clusters_url("c1")).status_code == 404


def test_already_exists(emulator_api, cluster_body):
    assert emulator_api.create_cluster("c1", cluster_body).status_code == 200
    again = emulator_api.create_cluster("c1", cluster_body)
    assert again.status_code == 409
    name = "projects/test-project/locations/us-central1/modelDevelopmentClusters/c1"
    assert again.json() == {
        "error": {
            "code": 409,
            "message": f'ModelDevelopmentCluster "{name}" already exists.',
            "status": "ALREADY_EXISTS",
        }
    }


@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
def test_missing_cluster_is_not_found(emulator_api, method):
    response = requests.request(
        method, emulator_api.clusters_url("nope"), params={"updateMask": "labels"}, json={}
    )
    assert response.status_code == 404
    name = "projects/test-project/locations/us-central1/modelDevelopmentClusters/nope"
    assert response.json() == {
        "error": {
            "code": 404,
            "message": f'ModelDevelopmentCluster "{name}" not found.',
            "status": "NOT_FOUND",
        }
    }


def test_missing_operation_and_unknown_route_are_not_found(emulator_api):
    operation = requests.get(emulator_api.url(f"{emulator_api.parent}/operations/123"))
    assert operation.status_code == 404
    assert operation.json()["error"]["status"] == "NOT_FOUND"
    unknown = requests.get(emulator_api.url(f"{emulator_api.parent}/bananas"))
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == 404
    wrong_version = requests.get(f"{emulator_api.emulator.base_url}/v2/{emulator_api.parent}")
    assert wrong_version.status_code == 404


def test_bad_json_is_invalid_argument(emulator_api):
    response = requests.post(
        emulator_api.clusters_url(),
        params={"model_development_cluster_id": "c1"},
        data="{not json",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"].startswith("Invalid JSON payload received.")


@pytest.mark.parametrize(
    ("cluster_id", "mutate", "field"),
    [
        ("Bad", None, "model_development_cluster_id"),
        ("c-1", None, "model_development_cluster_id"),
        ("", None, "model_development_cluster_id"),
        ("c1", lambda b: b.pop("node_pools"), "node_pools"),
        ("c1", lambda b: b.pop("orchestrator_spec"), "orchestrator_spec.slurm_spec"),
        (
            "c1",
            lambda b: b["orchestrator_spec"]["slurm_spec"].pop("home_directory_storage"),
            "orchestrator_spec.slurm_spec.home_directory_storage",
        ),
        (
            "c1",
            lambda b: b["orchestrator_spec"]["slurm_spec"].update(login_node_pool_id="nope"),
            "orchestrator_spec.slurm_spec.login_node_pool_id",
        ),
        (
            "c1",
            lambda b: b["orchestrator_spec"]["slurm_spec"]["partitions"][0].update(
                node_pool_ids=["a4", "ghost"]
            ),
            "orchestrator_spec.slurm_spec.partitions[0].node_pool_ids[1]",
        ),
        ("c1", lambda b: b["node_pools"][1].update(provisioning_model="STANDARD"), None),
        ("c1", lambda b: b["node_pools"][0].update(colour="blue"), "node_pools[0].colour"),
    ],
)
def test_invalid_argument_names_the_field(emulator_api, cluster_body, cluster_id, mutate, field):
    if mutate:
        mutate(cluster_body)
    response = emulator_api.create_cluster(cluster_id, cluster_body)
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    expected = field or "node_pools[1].provisioning_model"
    assert [v["field"] for v in violations(response)] == [expected]
    assert all(v["description"] for v in violations(response))
    assert requests.get(emulator_api.clusters_url()).json() == {}


def test_cluster_id_with_hyphen_is_fine_without_slurm(emulator_api, cluster_body):
    del cluster_body["orchestrator_spec"]
    response = emulator_api.create_cluster("c-1", cluster_body)
    assert [v["field"] for v in violations(response)] == ["orchestrator_spec.slurm_spec"]


def test_flex_start_pools_get_their_effective_duration(emulator_api, cluster_body):
    cluster_body["node_pools"][1]["provisioning_model"] = "FLEX_START"
    cluster = emulator_api.create_running("c1", cluster_body)
    assert cluster["nodePools"][1]["effectiveFlexStartMaxDuration"] == "604800s"
    assert "effectiveFlexStartMaxDuration" not in cluster["nodePools"][0]


def test_background_tick_completes_operations_without_requests(
    emulator, emulator_api, cluster_body
):
    created = emulator_api.create_cluster("c1", cluster_body).json()
    deadline = time.monotonic() + 5
    while not emulator.app.operations.get(created["name"])["done"]:
        assert time.monotonic() < deadline, "the background tick never completed the operation"
        time.sleep(0.02)
    assert len(emulator.journal()) == 1
