"""Tests of the cluster body models: key spellings, request bodies, API responses, shape errors."""

from __future__ import annotations

import copy
import json
import pathlib

import pytest

from vsp.components.runtime.cluster import keys, rules
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.core import errors

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"

PROLOG = (
    "#!/bin/bash\n"
    "# Fail fast when a GPU is missing, so Slurm drains the node instead of running the job.\n"
    "nvidia-smi -L | grep -c GPU | grep -qx 8\n"
)
EPILOG = '#!/bin/bash\nrm -rf "/tmp/job-${SLURM_JOB_ID}"\n'
DATASETS = "projects/acme-ml/locations/us-central1-b/instances/datasets"


def _gpu_pool(pool_id: str, model: str, max_nodes: int) -> dict:
    return {
        "id": pool_id,
        "machineSpec": {
            "machineType": "a3-highgpu-8g",
            "acceleratorType": "NVIDIA_H100_80GB",
            "acceleratorCount": 8,
        },
        "provisioningModel": model,
        "scalingSpec": {"minNodeCount": 0, "maxNodeCount": max_nodes},
        "zone": "us-central1-b",
        "enablePublicIps": True,
        "bootDisk": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 500},
        "filestores": [DATASETS],
        "labels": {"pool": pool_id},
    }


# The request body of tests/data/cluster_full.yaml, written out by hand.
EXPECTED_BODY = {
    "displayName": "llmtrain",
    "labels": {"team": "ml-platform", "cost-center": "research"},
    "network": {
        "network": "projects/acme-ml/global/networks/train-net",
        "subnetwork": "projects/acme-ml/regions/us-central1/subnetworks/train-subnet",
    },
    "nodePools": [
        {
            "id": "login",
            "machineSpec": {"machineType": "n2-standard-8"},
            "provisioningModel": "ON_DEMAND",
            "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1},
            "zone": "us-central1-b",
            "enablePublicIps": True,
            "bootDisk": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 200},
        },
        _gpu_pool("spot", "SPOT", 4),
        _gpu_pool("ondemand", "ON_DEMAND", 2),
    ],
    "orchestratorSpec": {
        "slurmSpec": {
            "homeDirectoryStorage": "projects/acme-ml/locations/us-central1-b/instances/home",
            "loginNodePoolId": "login",
            "partitions": [
                {
                    "id": "spot",
                    "nodePoolIds": ["spot"],
                    "config": {
                        "MaxTime": "2-00:00:00",
                        "PriorityTier": "1",
                        "PreemptMode": "REQUEUE",
                    },
                },
                {
                    "id": "ondemand",
                    "nodePoolIds": ["ondemand"],
                    "config": {"MaxTime": "7-00:00:00", "PriorityTier": "10"},
                },
            ],
            "defaultPartitionId": "spot",
            "config": {
                "PriorityType": "priority/multifactor",
                "PriorityWeightAge": "1000",
                "PriorityWeightFairshare": "10000",
                "PreemptType": "preempt/partition_prio",
                "PreemptMode": "REQUEUE",
                "PreemptExemptTime": "00:10:00",
                "AccountingStorageEnforce": "associations,limits,qos",
            },
            "nodeSets": [
                {"nodePoolId": "spot", "config": {"Weight": "10", "Features": "h100,spot"}},
                {
                    "nodePoolId": "ondemand",
                    "config": {"Weight": "100", "Features": "h100,ondemand"},
                },
            ],
            "prologBashScripts": [PROLOG],
            "epilogBashScripts": [EPILOG],
        }
    },
    "runtimeSpec": {"serviceAccount": "vtc-nodes@acme-ml.iam.gserviceaccount.com"},
}


def _problem(data: dict) -> errors.SpecValidationError:
    with pytest.raises(errors.SpecValidationError) as caught:
        rules.parse_cluster_spec(data)
    return caught.value


def test_full_yaml_round_trips_to_the_expected_camel_case_body():
    spec = rules.load_cluster_spec(DATA / "cluster_full.yaml")

    assert spec.to_request_body() == EXPECTED_BODY


def test_camel_case_file_gives_the_same_body_as_the_snake_case_file():
    snake = rules.load_cluster_spec(DATA / "cluster_full.yaml")
    camel = rules.load_cluster_spec(DATA / "cluster_full_camel.json")

    assert camel == snake
    assert camel.to_request_body() == snake.to_request_body() == EXPECTED_BODY


def test_mixed_spellings_parse_to_the_same_spec():
    mixed = copy.deepcopy(EXPECTED_BODY)
    mixed["display_name"] = mixed.pop("displayName")
    pool = mixed["nodePools"][1]
    pool["machine_spec"] = pool.pop("machineSpec")
    pool["machine_spec"]["accelerator_count"] = pool["machine_spec"].pop("acceleratorCount")

    spec = rules.parse_cluster_spec(mixed)

    assert spec.to_request_body() == EXPECTED_BODY
    assert spec.node_pools[1].machine_spec.accelerator_count == 8


def test_map_keys_are_kept_verbatim():
    spec = rules.parse_cluster_spec(
        {
            "labels": {"cost_center": "x", "team-name": "y"},
            "orchestrator_spec": {
                "slurm_spec": {"config": {"preempt_mode": "REQUEUE", "MaxTime": "1"}}
            },
        }
    )

    body = spec.to_request_body()

    assert body["labels"] == {"cost_center": "x", "team-name": "y"}
    assert body["orchestratorSpec"]["slurmSpec"]["config"] == {
        "preempt_mode": "REQUEUE",
        "MaxTime": "1",
    }


def test_unset_fields_are_omitted_from_the_body():
    spec = cluster_spec.ClusterSpec(display_name="a", node_pools=[cluster_spec.NodePool(id="p")])

    assert spec.to_request_body() == {"displayName": "a", "nodePools": [{"id": "p"}]}


def test_from_api_ignores_output_only_and_unknown_fields():
    api = json.loads((DATA / "cluster_api_response.json").read_text())

    spec = cluster_spec.ClusterSpec.from_api(api)

    body = spec.to_request_body()
    assert "name" not in body and "clusterStatus" not in body and "createTime" not in body
    assert "effectiveFlexStartMaxDuration" not in body["nodePools"][2]
    assert body["nodePools"][1]["scalingSpec"] == {"maxNodeCount": 4}  # int64 sent as "4"
    assert body["labels"]["vsp-managed"] == "true"
    assert spec.slurm.login_node_pool_id == "login"


def test_the_api_answer_is_rejected_by_the_strict_parser():
    api = json.loads((DATA / "cluster_api_response.json").read_text())

    error = _problem(api)

    assert "name" in error.fields and "clusterStatus" in error.fields


def test_from_api_rejects_a_non_object_and_wrong_types():
    with pytest.raises(errors.SpecValidationError):
        cluster_spec.ClusterSpec.from_api(["not", "a", "cluster"])
    with pytest.raises(errors.SpecValidationError) as caught:
        cluster_spec.ClusterSpec.from_api({"nodePools": [{"scalingSpec": {"maxNodeCount": "x"}}]})
    assert caught.value.fields == ["node_pools[0].scaling_spec.max_node_count"]


def test_unknown_key_is_rejected_with_a_suggestion():
    error = _problem({"node_pools": [{"id": "a", "machine_spec": {"machineTyp": "n2-standard-8"}}]})

    assert error.fields == ["node_pools[0].machine_spec.machineTyp"]
    assert "did you mean 'machine_type'" in str(error)
    assert "Rename it to 'machine_type'" in str(error)


def test_unknown_key_without_a_close_match_lists_the_known_fields():
    error = _problem({"runtime_spec": {"zzz": 1}})

    assert error.fields == ["runtime_spec.zzz"]
    assert "service_account" in str(error)


def test_a_field_given_in_both_spellings_is_rejected():
    error = _problem({"display_name": "a", "displayName": "b"})

    assert error.fields == ["display_name"]
    assert "given twice" in str(error)


@pytest.mark.parametrize(
    ("data", "field", "hint"),
    [
        (
            {"node_pools": [{"machine_spec": {"accelerator_count": True}}]},
            "node_pools[0].machine_spec.accelerator_count",
            "whole number",
        ),
        (
            {"node_pools": [{"machine_spec": {"accelerator_count": "eight"}}]},
            "node_pools[0].machine_spec.accelerator_count",
            "'eight'",
        ),
        (
            {"node_pools": [{"scaling_spec": {"max_node_count": 2.5}}]},
            "node_pools[0].scaling_spec.max_node_count",
            "whole number",
        ),
        (
            {"orchestrator_spec": {"slurm_spec": {"node_sets": [{"config": {"Weight": 10}}]}}},
            "orchestrator_spec.slurm_spec.node_sets[0].config.Weight",
            "quote it",
        ),
        ({"labels": {"team": False}}, "labels.team", "quote it"),
        ({"node_pools": {"id": "a"}}, "node_pools", "Give a list"),
        ({"network": "projects/p/global/networks/n"}, "network", "mapping"),
        (
            {"node_pools": [{"enable_public_ips": "maybe"}]},
            "node_pools[0].enable_public_ips",
            "true or false",
        ),
    ],
)
def test_wrong_types_name_the_field_the_value_and_the_fix(data, field, hint):
    error = _problem(data)

    assert error.fields == [field]
    assert hint in str(error)


def test_all_shape_problems_are_reported_together():
    error = _problem({"displayNam": "a", "node_pools": [{"zone": 1}], "labels": {"a": 2}})

    assert set(error.fields) == {"displayNam", "node_pools[0].zone", "labels.a"}


def test_snake_keys_converts_fields_but_not_map_keys():
    data = {"nodePools": [{"machineSpec": {"machineType": "x"}, "labels": {"fooBar": "y"}}]}

    assert keys.snake_keys(data, cluster_spec.ClusterSpec) == {
        "node_pools": [{"machine_spec": {"machine_type": "x"}, "labels": {"fooBar": "y"}}]
    }


def test_format_loc():
    assert keys.format_loc(("node_pools", 1, "machine_spec", "accelerator_count")) == (
        "node_pools[1].machine_spec.accelerator_count"
    )
    assert keys.format_loc(()) == "cluster"


def test_helpers_find_pools_and_slurm():
    spec = rules.load_cluster_spec(DATA / "cluster_full.yaml")

    assert spec.pool("spot").provisioning_model == "SPOT"
    assert spec.pool("nope") is None
    assert spec.slurm.default_partition_id == "spot"
    assert cluster_spec.ClusterSpec().slurm is None
