"""Cluster settings that pick a reading of the reference: fixed-size pools and the labels mask.

``cluster_fixed_size_pools`` follows the create-cluster reference ("MIN_NODE_COUNT must be the
same as MAX_NODE_COUNT"); ``cluster_labels_updatable`` false follows the manage-cluster doc's
list of updatable fields, which does not name ``labels``. The PATCH's ``updateMode`` is recorded
on the stored cluster record.
"""

from __future__ import annotations

import copy

import pytest
import requests

from vsp.vertex_emulator.clusters import api as clusters_api

FLEX_POOL = {
    "id": "flex",
    "machine_spec": {
        "machine_type": "a4-highgpu-8g",
        "accelerator_type": "NVIDIA_B200",
        "accelerator_count": 8,
    },
    "provisioning_model": "FLEX_START",
    "scaling_spec": {"min_node_count": 0, "max_node_count": 2},
    "zone": "us-central1-b",
}
POOL_VIOLATION = {
    "field": "node_pools[1].scaling_spec.min_node_count",
    "description": 'Node pool "a4": min_node_count (0) must equal max_node_count (2); only '
    "FLEX_START pools may scale from 0.",
}


def refusal(response: requests.Response) -> tuple[str, list[dict]]:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    (bad_request,) = error["details"]
    return error["message"], bad_request["fieldViolations"]


def patch(emulator_api, cluster_id: str, body: dict, mask: str, mode: str | None = None):
    params = {"updateMask": mask, **({"updateMode": mode} if mode else {})}
    return requests.patch(emulator_api.clusters_url(cluster_id), params=params, json=body)


def fixed(body: dict) -> dict:
    body = copy.deepcopy(body)
    body["node_pools"][1]["scaling_spec"] = {"min_node_count": 2, "max_node_count": 2}
    return body


def stored(emulator, emulator_api, cluster_id: str) -> dict:
    name = f"{emulator_api.parent}/modelDevelopmentClusters/{cluster_id}"
    return emulator.app.store.get(clusters_api.COLLECTION, name)


def test_pools_that_scale_from_zero_are_accepted_by_default(emulator, emulator_api, cluster_body):
    assert emulator.settings.cluster_fixed_size_pools is False
    cluster = emulator_api.create_running("c1", cluster_body)
    assert cluster["nodePools"][1]["scalingSpec"] == {"minNodeCount": 0, "maxNodeCount": 2}


def test_fixed_size_setting_refuses_a_create_naming_the_pool_and_fields(
    emulator, emulator_api, cluster_body
):
    emulator.update_settings(cluster_fixed_size_pools=True)
    message, violations = refusal(emulator_api.create_cluster("c1", cluster_body))
    assert violations == [POOL_VIOLATION]
    assert message == (
        f"Invalid ModelDevelopmentCluster: {POOL_VIOLATION['field']}: "
        f"{POOL_VIOLATION['description']}"
    )
    assert requests.get(emulator_api.clusters_url("c1")).status_code == 404


def test_fixed_size_setting_accepts_fixed_pools_and_flex_start_from_zero(
    emulator, emulator_api, cluster_body
):
    emulator.update_settings(cluster_fixed_size_pools=True)
    body = fixed(cluster_body)
    body["node_pools"].append(copy.deepcopy(FLEX_POOL))
    cluster = emulator_api.create_running("c1", body)
    assert [p["scalingSpec"] for p in cluster["nodePools"]] == [
        {"minNodeCount": 1, "maxNodeCount": 1},
        {"minNodeCount": 2, "maxNodeCount": 2},
        {"minNodeCount": 0, "maxNodeCount": 2},
    ]


def test_fixed_size_setting_refuses_a_node_pool_patch_that_unfixes_a_pool(
    emulator, emulator_api, cluster_body
):
    emulator.update_settings(cluster_fixed_size_pools=True)
    before = emulator_api.create_running("c1", fixed(cluster_body))
    changed = copy.deepcopy(before)
    changed["nodePools"][1]["scalingSpec"] = {"minNodeCount": 0, "maxNodeCount": 2}
    message, violations = refusal(patch(emulator_api, "c1", changed, "node_pools"))
    assert violations == [POOL_VIOLATION]
    assert message.startswith("Invalid ModelDevelopmentCluster: node_pools[1]")
    changed["nodePools"][1]["scalingSpec"] = {"minNodeCount": 3, "maxNodeCount": 3}
    response = patch(emulator_api, "c1", changed, "node_pools", "USER_AND_SERVICE")
    assert response.status_code == 200, response.text
    emulator_api.wait_operation(response.json()["name"])
    after = requests.get(emulator_api.clusters_url("c1")).json()
    assert after["nodePools"][1]["scalingSpec"] == {"minNodeCount": 3, "maxNodeCount": 3}


def test_fixed_size_setting_leaves_other_patches_of_an_older_cluster_alone(
    emulator, emulator_api, cluster_body
):
    emulator_api.create_running("c1", cluster_body)  # min 0 / max 2, made while the setting was off
    emulator.update_settings(cluster_fixed_size_pools=True)
    response = patch(emulator_api, "c1", {"labels": {"a": "b"}}, "labels", "USER_ONLY")
    assert response.status_code == 200, response.text


def test_labels_mask_refused_when_labels_are_not_updatable(emulator, emulator_api, cluster_body):
    emulator_api.create_running("c1", cluster_body)
    emulator.update_settings(cluster_labels_updatable=False)
    message, violations = refusal(patch(emulator_api, "c1", {"labels": {}}, "labels", "USER_ONLY"))
    assert violations == [{"field": "update_mask", "description": '"labels" cannot be updated.'}]
    assert message == 'Invalid update request: update_mask: "labels" cannot be updated.'
    config = {"orchestratorSpec": {"slurmSpec": {"config": {"PreemptMode": "OFF"}}}}
    mask = "orchestrator_spec.slurm_spec.config"
    assert patch(emulator_api, "c1", config, mask, "USER_AND_SERVICE").status_code == 200


@pytest.mark.parametrize("mode", ["USER_ONLY", "USER_AND_SERVICE", None])
def test_both_update_modes_are_accepted_and_recorded(emulator, emulator_api, cluster_body, mode):
    emulator_api.create_running("c1", cluster_body)
    assert stored(emulator, emulator_api, "c1").get("update_mode") is None
    response = patch(emulator_api, "c1", {"labels": {"a": "b"}}, "labels", mode)
    assert response.status_code == 200, response.text
    emulator_api.wait_operation(response.json()["name"])
    assert stored(emulator, emulator_api, "c1")["update_mode"] == mode
    assert requests.get(emulator_api.clusters_url("c1")).json()["labels"] == {"a": "b"}
