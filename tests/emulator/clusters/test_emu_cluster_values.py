"""Cluster values the service refuses: counts, labels and slurm.conf maps, on create and PATCH.

Each refusal is 400 INVALID_ARGUMENT with one field violation naming the field, nothing is
stored, and the emulator goes on serving.
"""

from __future__ import annotations

import json

import pytest
import requests

SLURM = "orchestrator_spec.slurm_spec"
INT32_MAX = 2**31 - 1


def violations(response: requests.Response) -> list[dict]:
    details = response.json()["error"].get("details") or [{}]
    return details[0].get("fieldViolations", [])


def assert_refused(emulator_api, response: requests.Response, field: str, phrase: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert [v["field"] for v in violations(response)] == [field]
    assert phrase in violations(response)[0]["description"]
    assert phrase in error["message"]
    assert requests.get(emulator_api.clusters_url()).json() == {}  # nothing stored
    assert requests.get(f"{emulator_api.emulator.base_url}/emulator/v1/health").status_code == 200


def set_pool(body: dict, pool: int, section: str, name: str, value) -> dict:
    body["node_pools"][pool].setdefault(section, {})[name] = value
    return body


@pytest.mark.parametrize(
    "value",
    ["two", "", " 2", "2.5", "1e3", "0x10", 2.5, -1, "-1", True, 2**31, str(2**63), 1e12, [2], {}],
)
def test_a_node_count_that_is_not_an_int32_count_is_refused(emulator_api, cluster_body, value):
    # 10**12 nodes once created a cluster.
    set_pool(cluster_body, 1, "scaling_spec", "max_node_count", value)
    response = emulator_api.create_cluster("c1", cluster_body)
    field = "node_pools[1].scaling_spec.max_node_count"
    assert_refused(emulator_api, response, field, "Invalid value (TYPE_INT32)")


@pytest.mark.parametrize("literal", [b"Infinity", b"-Infinity", b"NaN", b"1e999"])
def test_an_infinite_node_count_is_refused_and_never_served_back(
    emulator_api, cluster_body, literal
):
    set_pool(cluster_body, 1, "scaling_spec", "max_node_count", "PLACEHOLDER")
    body = json.dumps(cluster_body).encode().replace(b'"PLACEHOLDER"', literal)
    response = requests.post(
        emulator_api.clusters_url(),
        params={"model_development_cluster_id": "c1"},
        data=body,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("Invalid JSON payload received.")
    assert requests.get(emulator_api.clusters_url()).json() == {}


@pytest.mark.parametrize(
    ("section", "name", "field"),
    [
        ("machine_spec", "accelerator_count", "node_pools[1].machine_spec.accelerator_count"),
        ("boot_disk", "boot_disk_size_gb", "node_pools[1].boot_disk.boot_disk_size_gb"),
        ("scaling_spec", "min_node_count", "node_pools[1].scaling_spec.min_node_count"),
    ],
)
@pytest.mark.parametrize("value", ["eight", 8.5, -8, 2**64])
def test_other_pool_numbers_are_int64_too(emulator_api, cluster_body, section, name, field, value):
    set_pool(cluster_body, 1, section, name, value)
    response = emulator_api.create_cluster("c1", cluster_body)
    assert_refused(emulator_api, response, field, "expected a whole number from 0")


def test_counts_as_decimal_strings_whole_floats_and_the_int32_maximum_are_accepted(
    emulator_api, cluster_body
):
    set_pool(cluster_body, 1, "scaling_spec", "min_node_count", "0")
    set_pool(cluster_body, 1, "scaling_spec", "max_node_count", str(INT32_MAX))
    set_pool(cluster_body, 1, "machine_spec", "accelerator_count", 8.0)
    set_pool(cluster_body, 1, "boot_disk", "boot_disk_size_gb", "65536")
    response = emulator_api.create_cluster("c1", cluster_body)
    assert response.status_code == 200, response.text
    # A count beyond int32 on a node_pools PATCH is refused like on create.
    emulator_api.wait_operation(response.json()["name"])
    set_pool(cluster_body, 1, "scaling_spec", "max_node_count", str(INT32_MAX + 1))
    patch = requests.patch(
        emulator_api.clusters_url("c1"), params={"updateMask": "node_pools"}, json=cluster_body
    )
    assert patch.status_code == 400
    assert [v["field"] for v in violations(patch)] == ["node_pools[1].scaling_spec.max_node_count"]


@pytest.mark.parametrize("size", [65537, 10**15, "1000000000000000"])
def test_a_boot_disk_beyond_64_tib_is_refused(emulator_api, cluster_body, size):
    # A boot disk of 10**15 GB once created a cluster.
    set_pool(cluster_body, 1, "boot_disk", "boot_disk_size_gb", size)
    response = emulator_api.create_cluster("c1", cluster_body)
    field = "node_pools[1].boot_disk.boot_disk_size_gb"
    assert_refused(emulator_api, response, field, "expected a whole number from 0 to 65536")


@pytest.mark.parametrize(
    ("name", "phrase"),
    [
        (12345, "Invalid value 12345: display_name must be a string."),
        (["c"], "display_name must be a string."),
        ("d" * 129, "display_name has 129 characters; at most 128 are allowed."),
    ],
)
def test_a_cluster_display_name_must_be_a_string_of_at_most_128(
    emulator_api, cluster_body, name, phrase
):
    # A numeric display name once created a cluster.
    cluster_body["display_name"] = name
    response = emulator_api.create_cluster("c1", cluster_body)
    assert_refused(emulator_api, response, "display_name", phrase)
    cluster_body["display_name"] = "d" * 128
    assert emulator_api.create_cluster("c1", cluster_body).status_code == 200


@pytest.mark.parametrize(
    ("labels", "field", "phrase"),
    [
        ({"Team": "ml"}, "labels[Team]", "Invalid label key 'Team'"),
        ({"team": "ML"}, "labels[team]", "Invalid label value 'ML'"),
        ({"1team": "ml"}, "labels[1team]", "Invalid label key"),
        ({"": "ml"}, "labels[]", "Invalid label key"),
        ({"team\n": "ml"}, "labels[team\n]", "Invalid label key"),
        ({"team": "ml\n"}, "labels[team]", "Invalid label value"),
        ({"te.am": "ml"}, "labels[te.am]", "Invalid label key"),
        ({"k" * 64: "v"}, f"labels[{'k' * 64}]", "Invalid label key"),
        ({"team": "v" * 64}, "labels[team]", "Invalid label value"),
        ({"team": 7}, "labels[team]", "Invalid label value 7"),
        ({f"k{i}": "v" for i in range(65)}, "labels", "At most 64 labels are allowed, got 65."),
    ],
)
def test_labels_break_google_label_rules(emulator_api, cluster_body, labels, field, phrase):
    cluster_body["labels"] = labels
    response = emulator_api.create_cluster("c1", cluster_body)
    assert_refused(emulator_api, response, field, phrase)


def test_node_pool_labels_follow_the_same_rules_with_their_limits(emulator_api, cluster_body):
    cluster_body["node_pools"][1]["labels"] = {"pool": "A4"}
    response = emulator_api.create_cluster("c1", cluster_body)
    assert_refused(emulator_api, response, "node_pools[1].labels[pool]", "Invalid label value")
    # At the limits, and with international lowercase or caseless letters, labels are fine.
    labels = {f"k{i}": "v" * 63 for i in range(63)}
    labels["k" * 63] = ""
    cluster_body["labels"] = labels
    cluster_body["node_pools"][1]["labels"] = {"équipe": "données-2", "学習": "ml_1"}
    response = emulator_api.create_cluster("c1", cluster_body)
    assert response.status_code == 200, response.text


def test_a_labels_patch_is_checked_too(emulator_api, cluster_body):
    emulator_api.create_running("c1", cluster_body)
    cluster_body["labels"] = {"vsp-teardown": "Keep"}
    patch = requests.patch(
        emulator_api.clusters_url("c1"), params={"updateMask": "labels"}, json=cluster_body
    )
    assert patch.status_code == 400
    assert [v["field"] for v in violations(patch)] == ["labels[vsp-teardown]"]
    assert requests.get(emulator_api.clusters_url("c1")).json()["labels"] == {"team": "ml"}


@pytest.mark.parametrize(
    ("name", "phrase"),
    [
        ("HealthCheckProgram", "the service runs its own node health checks"),
        ("health_check_interval", "the service runs its own node health checks"),
        ("HEALTHCHECKNODESTATE", "the service runs its own node health checks"),
        ("RequeueExit", "the service owns requeueing"),
        ("RequeueExitHold", "the service owns requeueing"),
        ("Prolog", "is set by the service"),
        ("epilog", "is set by the service"),
        ("StorageHost", "is a slurmdbd.conf parameter"),
        ("ArchiveJobs", "is a slurmdbd.conf parameter"),
        ("PurgeJobAfter", "is a slurmdbd.conf parameter"),
        ("DbdPort", "is a slurmdbd.conf parameter"),
        ("CommitDelay", "is a slurmdbd.conf parameter"),
    ],
)
def test_refused_cluster_config_keys(emulator_api, cluster_body, name, phrase):
    cluster_body["orchestrator_spec"]["slurm_spec"]["config"][name] = "1"
    response = emulator_api.create_cluster("c1", cluster_body)
    assert_refused(emulator_api, response, f"{SLURM}.config[{name}]", phrase)


def test_default_is_refused_in_a_partition_but_not_at_cluster_scope(emulator_api, cluster_body):
    slurm = cluster_body["orchestrator_spec"]["slurm_spec"]
    slurm["partitions"][0]["config"]["Default"] = "YES"
    response = emulator_api.create_cluster("c1", cluster_body)
    field = f"{SLURM}.partitions[0].config[Default]"
    assert_refused(emulator_api, response, field, "set default_partition_id instead")
    del slurm["partitions"][0]["config"]["Default"]
    slurm["config"]["AccountingStorageEnforce"] = "associations,limits,qos"
    slurm["partitions"][0]["config"]["OverSubscribe"] = "NO"
    assert emulator_api.create_cluster("c1", cluster_body).status_code == 200


@pytest.mark.parametrize(
    ("where", "value", "phrase"),
    [
        ("config", "REQUEUE\nHealthCheckProgram=/tmp/x", "cannot hold a line break"),
        ("config", "REQUEUE\rEpilog=/tmp/x", "cannot hold a line break"),
        ("config", 5, "slurm.conf values must be strings"),
        ("partition", "1:00:00\nDefault=YES", "cannot hold a line break"),
        ("node_set", "gpu\nWeight=1", "cannot hold a line break"),
    ],
)
def test_config_values_must_be_single_line_strings(
    emulator_api, cluster_body, where, value, phrase
):
    slurm = cluster_body["orchestrator_spec"]["slurm_spec"]
    if where == "config":
        slurm["config"]["PreemptMode"] = value
        field = f"{SLURM}.config[PreemptMode]"
    elif where == "partition":
        slurm["partitions"][0]["config"]["MaxTime"] = value
        field = f"{SLURM}.partitions[0].config[MaxTime]"
    else:
        slurm["node_sets"] = [{"node_pool_id": "a4", "config": {"Features": value}}]
        field = f"{SLURM}.node_sets[0].config[Features]"
    response = emulator_api.create_cluster("c1", cluster_body)
    assert_refused(emulator_api, response, field, phrase)


@pytest.mark.parametrize("name", ["Preempt Mode", "PreemptMode=REQUEUE\nX", "1Weight", "Mode;"])
def test_a_config_key_that_is_not_a_parameter_name_is_refused(emulator_api, cluster_body, name):
    cluster_body["orchestrator_spec"]["slurm_spec"]["config"] = {name: "x"}
    response = emulator_api.create_cluster("c1", cluster_body)
    assert_refused(
        emulator_api, response, f"{SLURM}.config[{name}]", "is not a slurm.conf parameter name"
    )


def test_a_config_patch_with_a_refused_key_is_refused(emulator_api, cluster_body):
    emulator_api.create_running("c1", cluster_body)
    cluster_body["orchestrator_spec"]["slurm_spec"]["config"] = {"HealthCheckInterval": "60"}
    patch = requests.patch(
        emulator_api.clusters_url("c1"),
        params={"updateMask": f"{SLURM}.config"},
        json=cluster_body,
    )
    assert patch.status_code == 400
    assert [v["field"] for v in violations(patch)] == [f"{SLURM}.config[HealthCheckInterval]"]
    stored = requests.get(emulator_api.clusters_url("c1")).json()
    assert stored["orchestratorSpec"]["slurmSpec"]["config"] == {"PreemptMode": "REQUEUE"}


def test_a_huge_valid_pool_is_emulated_with_a_bounded_number_of_nodes(emulator_api, cluster_body):
    set_pool(cluster_body, 1, "scaling_spec", "max_node_count", str(INT32_MAX))
    emulator_api.create_running("c1", cluster_body)
    call = {"method": "HTTP_METHOD_GET", "path": "/slurm/v0.0.42/nodes"}
    url = f"{emulator_api.clusters_url('c1')}:callSlurmRestApi"
    response = requests.post(url, json=call, timeout=30)
    assert response.status_code == 200, response.text
    nodes = json.loads(response.json()["body"])["nodes"]
    assert len(nodes) == 1024
    assert nodes[0]["name"] == "c1-a4-0"
