"""Tests of the flat-parameter builder and merge_spec (diff_cluster: test_cluster_diff.py)."""

from __future__ import annotations

import pathlib

import pytest

from vsp.components.runtime.cluster import builder as cluster_builder
from vsp.components.runtime.cluster import rules
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
    return rules.load_cluster_spec(DATA / "cluster_full.yaml")


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
            "scalingSpec": {"minNodeCount": high, "maxNodeCount": high},  # fixed size
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


def test_the_ondemand_pool_takes_a_bare_reservation_name():
    spec = cluster_builder.build_cluster_spec(
        cluster_id="resv",
        zone="us-central1-b",
        home_directory_storage=HOME,
        machine_type="a3-highgpu-8g",
        accelerator_type="NVIDIA_H100_80GB",
        accelerator_count=8,
        reservation="h100-res",
        ondemand_max_nodes=2,
        boot_disk_size_gb=300,
    )

    pool = spec.pool("ondemand")
    assert pool.provisioning_model == "RESERVATION"
    assert pool.machine_spec.reservation_affinity.values == [
        "projects/acme-ml/zones/us-central1-b/reservations/h100-res"
    ]
    assert (pool.scaling_spec.min_node_count, pool.scaling_spec.max_node_count) == (2, 2)
    assert pool.boot_disk == cluster_spec.BootDisk(boot_disk_size_gb=300)
    assert [p.id for p in spec.slurm.partitions] == ["ondemand"]
    assert spec.slurm.default_partition_id == "ondemand"


def test_kfp_style_empty_values_mean_unset():
    spec = cluster_builder.build_cluster_spec(
        cluster_id="cpu",
        display_name="",
        network="",
        subnetwork="",
        zone="europe-west4-a",
        home_directory_storage=HOME,
        machine_type="c2-standard-60",
        accelerator_type="",
        accelerator_count=0,
        reservation="",
        spot_max_nodes=3,
        boot_disk_size_gb=0,
        labels={},
        slurm_config={},
        service_account="",
    )

    body = spec.to_request_body()
    assert body["displayName"] == "cpu"
    assert "network" not in body and "labels" not in body and "runtimeSpec" not in body
    assert [p["id"] for p in body["nodePools"]] == ["login", "spot"]
    assert [p.get("zone") for p in body["nodePools"]] == ["europe-west4-a", "europe-west4-a"]
    assert "bootDisk" not in body["nodePools"][1]
    assert body["nodePools"][1]["machineSpec"] == {"machineType": "c2-standard-60"}
    slurm = body["orchestratorSpec"]["slurmSpec"]
    assert slurm["partitions"] == [{"id": "spot", "nodePoolIds": ["spot"]}]
    assert slurm["defaultPartitionId"] == "spot"
    assert "config" not in slurm


def test_only_the_parameters_create_cluster_passes_are_taken():
    import inspect  # noqa: PLC0415

    from vsp.components import catalog  # noqa: PLC0415

    builder = set(inspect.signature(cluster_builder.build_cluster_spec).parameters) - {"validate"}
    component = set(inspect.signature(catalog.declarations()["create_cluster"]).parameters)
    assert builder <= component
    with pytest.raises(TypeError):
        cluster_builder.build_cluster_spec(node_pools=[{"id": "cpu"}])


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "spot_max_nodes"),  # no training pool: told as the counts, not the partitions
        ({"spot_max_nodes": 1, "accelerator_count": 8}, "node_pools[1].machine_spec.machine_type"),
        (
            {"spot_max_nodes": 1, "machine_type": "n2-standard-8", "cluster_id": "my-cluster"},
            "cluster_id",
        ),
        (
            {
                "spot_max_nodes": 1,
                "machine_type": "n2-standard-8",
                "slurm_config": {"Weight": True},
            },
            f"{SLURM}.config.Weight",
        ),
        (
            {
                "spot_max_nodes": 1,
                "machine_type": "n2-standard-8",
                "network": "projects/x/networks/n",
            },
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


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({"cluster_id": ""}, ["cluster_id"]),  # not the display name that defaults to it
        ({"cluster_id": "Train1"}, ["cluster_id"]),
        ({"cluster_id": "Train1", "display_name": "Train1"}, ["cluster_id", "display_name"]),
        ({"spot_max_nodes": 0}, ["spot_max_nodes"]),  # not the Slurm partitions
    ],
)
def test_flat_parameter_problems_name_the_parameters_passed(params, fields):
    params = {
        "cluster_id": "t1", "zone": "us-central1-b", "home_directory_storage": HOME,
        "machine_type": "n2-standard-8", "spot_max_nodes": 1, **params,
    }  # fmt: skip
    with pytest.raises(errors.SpecValidationError) as caught:
        cluster_builder.build_cluster_spec(**params)
    assert caught.value.fields == fields
