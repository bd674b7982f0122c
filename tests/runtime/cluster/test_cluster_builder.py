"""Tests of the flat-parameter builder and merge_spec (diff_cluster: test_cluster_diff.py)."""

from __future__ import annotations

import pathlib

import pytest

from vsp.components.runtime.cluster import builder as cluster_builder
from vsp.components.runtime.cluster import rules as cluster_rules
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.core import errors

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
SLURM = "orchestrator_spec.slurm_spec"
HOME = "projects/acme-ml/locations/us-central1-b/instances/home"
H100 = {
    "machineType": "a3-highgpu-8g",
    "acceleratorType": "NVIDIA_H100_80GB",
    "acceleratorCount": 8,
}


def full() -> cluster_spec.ClusterSpec:
    return cluster_rules.load_cluster_spec(DATA / "cluster_full.yaml")


# ---- build_cluster_spec ----


def test_spot_and_ondemand_pools_from_flat_parameters():
    spec = cluster_builder.build_cluster_spec(
        cluster_id="llmtrain",
        project="acme-ml",
        network="train-net",
        subnetwork="train-subnet",
        zone="us-central1-b",
        home_directory_storage=HOME,
        machine_type="a3-highgpu-8g",
        accelerator_type="NVIDIA_H100_80GB",
        accelerator_count=8,
        spot_max_nodes=4,
        ondemand_max_nodes=2,
        boot_disk_size_gb=500,
        slurm_config={"PreemptMode": "REQUEUE", "PriorityWeightAge": 1000},
        labels={"team": "ml"},
        service_account="vtc@acme-ml.iam.gserviceaccount.com",
    )

    def gpu(pool_id: str, model: str, high: int) -> dict:
        return {
            "id": pool_id,
            "machineSpec": H100,
            "provisioningModel": model,
            "scalingSpec": {"minNodeCount": 0, "maxNodeCount": high},
            "bootDisk": {"bootDiskSizeGb": 500},
            "zone": "us-central1-b",
        }

    assert spec.to_request_body() == {
        "displayName": "llmtrain",
        "labels": {"team": "ml"},
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
            },
            gpu("spot", "SPOT", 4),
            gpu("ondemand", "ON_DEMAND", 2),
        ],
        "orchestratorSpec": {
            "slurmSpec": {
                "homeDirectoryStorage": HOME,
                "loginNodePoolId": "login",
                "partitions": [
                    {"id": "spot", "nodePoolIds": ["spot"]},
                    {"id": "ondemand", "nodePoolIds": ["ondemand"]},
                ],
                "defaultPartitionId": "spot",
                "config": {"PreemptMode": "REQUEUE", "PriorityWeightAge": "1000"},
            }
        },
        "runtimeSpec": {"serviceAccount": "vtc@acme-ml.iam.gserviceaccount.com"},
    }


def test_single_pool_with_a_bare_reservation_name_becomes_reservation():
    spec = cluster_builder.build_cluster_spec(
        cluster_id="resv",
        zone="us-central1-b",
        home_directory_storage=HOME,
        pool_id="h100",
        machine_type="a3-highgpu-8g",
        accelerator_type="NVIDIA_H100_80GB",
        accelerator_count=8,
        reservation="h100-res",
        min_nodes=2,
        max_nodes=2,
    )

    pool = spec.pool("h100")
    assert pool.provisioning_model == "RESERVATION"
    assert pool.machine_spec.reservation_affinity.values == [
        "projects/acme-ml/zones/us-central1-b/reservations/h100-res"
    ]
    assert (pool.scaling_spec.min_node_count, pool.scaling_spec.max_node_count) == (2, 2)
    assert [p.id for p in spec.slurm.partitions] == ["h100"]


def test_kfp_style_empty_values_mean_unset_and_extra_pools_are_accepted():
    spec = cluster_builder.build_cluster_spec(
        cluster_id="cpu",
        display_name="",
        network="",
        subnetwork="",
        zone="europe-west4-a",
        home_directory_storage=HOME,
        machine_type="",
        accelerator_type="",
        accelerator_count=0,
        labels={},
        slurm_config={},
        service_account="",
        node_pools=[
            {
                "id": "cpu",
                "machineSpec": {"machineType": "c2-standard-60"},
                "scalingSpec": {"maxNodeCount": 3},
            },
            {
                "id": "gpu",
                "machine_spec": H100,
                "provisioning_model": "SPOT",
                "zone": "europe-west4-b",
            },
        ],
        partition_config={"cpu": {"MaxTime": "1:00:00"}},
        node_set_config={"gpu": {"Features": "h100"}},
        default_partition_id="gpu",
    )

    body = spec.to_request_body()
    assert body["displayName"] == "cpu"
    assert "network" not in body and "labels" not in body and "runtimeSpec" not in body
    assert [p.get("zone") for p in body["nodePools"]] == [
        "europe-west4-a",
        "europe-west4-a",
        "europe-west4-b",
    ]
    slurm = body["orchestratorSpec"]["slurmSpec"]
    assert slurm["partitions"] == [
        {"id": "cpu", "nodePoolIds": ["cpu"], "config": {"MaxTime": "1:00:00"}},
        {"id": "gpu", "nodePoolIds": ["gpu"]},
    ]
    assert slurm["defaultPartitionId"] == "gpu"
    assert slurm["nodeSets"] == [{"nodePoolId": "gpu", "config": {"Features": "h100"}}]
    assert "config" not in slurm


def test_explicit_partitions_scripts_and_disk():
    spec = cluster_builder.build_cluster_spec(
        cluster_id="t1",
        zone="us-central1-b",
        home_directory_storage=HOME,
        machine_type="a3-highgpu-8g",
        accelerator_type="NVIDIA_H100_80GB",
        accelerator_count=8,
        spot_max_nodes=2,
        ondemand_max_nodes=1,
        boot_disk_type="hyperdisk-balanced",
        boot_disk_size_gb=300,
        enable_public_ips=True,
        filestores=["projects/acme-ml/locations/us-central1-b/instances/data"],
        partitions=[{"id": "all", "nodePoolIds": ["spot", "ondemand"]}],
        prolog_bash_scripts=["#!/bin/bash\ntrue\n"],
        epilog_bash_scripts=["#!/bin/bash\ntrue\n"],
    )

    assert [p.id for p in spec.slurm.partitions] == ["all"]
    assert spec.slurm.default_partition_id == "all"
    spot = spec.pool("spot")
    assert spot.boot_disk == cluster_spec.BootDisk(
        boot_disk_type="hyperdisk-balanced", boot_disk_size_gb=300
    )
    assert spot.enable_public_ips is True and spot.filestores and spec.pool("login").filestores
    assert spec.slurm.prolog_bash_scripts == ["#!/bin/bash\ntrue\n"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, f"{SLURM}.partitions"),
        ({"spot_max_nodes": 1, "accelerator_count": 8}, "node_pools[1].machine_spec.machine_type"),
        (
            {"spot_max_nodes": 1, "machine_type": "n2-standard-8", "cluster_id": "my-cluster"},
            "cluster_id",
        ),
        (
            {"max_nodes": 1, "machine_type": "n2-standard-8", "slurm_config": {"Weight": True}},
            f"{SLURM}.config.Weight",
        ),
        (
            {
                "max_nodes": 1,
                "machine_type": "a3-highgpu-8g",
                "accelerator_type": "NVIDIA_H100_80GB",
                "accelerator_count": 8,
                "provisioning_model": "STANDARD",
            },
            "node_pools[1].provisioning_model",
        ),
        (
            {"max_nodes": 1, "machine_type": "n2-standard-8", "network": "projects/x/networks/n"},
            "network.network",
        ),
    ],
)
def test_builder_validates(params, field):
    params = {"cluster_id": "t1", "zone": "us-central1-b", "home_directory_storage": HOME, **params}

    with pytest.raises(errors.SpecValidationError) as caught:
        cluster_builder.build_cluster_spec(**params)

    assert field in caught.value.fields


def test_builder_can_skip_validation():
    spec = cluster_builder.build_cluster_spec(cluster_id="Bad-Id", validate=False)

    assert spec.display_name == "Bad-Id"


# ---- merge_spec ----


def test_merge_spec_deep_merges_maps_and_replaces_lists():
    base = {"displayName": "a", "labels": {"x": "1", "y": "2"}, "nodePools": [{"id": "p"}]}
    overrides = {"labels": {"y": None, "z": "3"}, "node_pools": [{"id": "q"}], "display_name": None}

    merged = cluster_builder.merge_spec(base, overrides)

    assert merged == {"labels": {"x": "1", "z": "3"}, "node_pools": [{"id": "q"}]}
    assert base == {"displayName": "a", "labels": {"x": "1", "y": "2"}, "nodePools": [{"id": "p"}]}


def test_merge_spec_replaces_config_keys_by_slurm_name():
    merged = cluster_builder.merge_spec(
        full(), {"orchestratorSpec": {"slurmSpec": {"config": {"preempt_mode": "CANCEL"}}}}
    )

    config = merged["orchestrator_spec"]["slurm_spec"]["config"]
    assert config["preempt_mode"] == "CANCEL" and "PreemptMode" not in config
    assert config["PreemptType"] == "preempt/partition_prio"
