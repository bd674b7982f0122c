"""Tests of diff_cluster: immutable differences, update masks and tolerance of API defaults."""

from __future__ import annotations

import json
import pathlib

import pytest

from vsp.components.runtime.cluster import builder, rules
from vsp.components.runtime.cluster import diff as cluster_diff
from vsp.components.runtime.cluster import spec as cluster_spec

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
SLURM = "orchestrator_spec.slurm_spec"
HOME = "projects/acme-ml/locations/us-central1-b/instances/home"


def full() -> cluster_spec.ClusterSpec:
    return rules.load_cluster_spec(DATA / "cluster_full.yaml")


def api_cluster() -> dict:
    return json.loads((DATA / "cluster_api_response.json").read_text())


def changed(**updates) -> cluster_spec.ClusterSpec:
    """The full spec with ``merge_spec`` overrides applied."""
    return rules.parse_cluster_spec(builder.merge_spec(full(), updates))


def test_identical_specs_have_no_diff():
    diff = cluster_diff.diff_cluster(full(), full())

    assert diff.is_empty and diff.immutable == [] and diff.update_mask == []


def test_the_api_answer_of_the_same_cluster_has_no_diff():
    actual = cluster_spec.ClusterSpec.from_api(api_cluster())

    diff = cluster_diff.diff_cluster(full(), actual)

    assert diff.changes == []


def test_machine_change_is_immutable():
    pools = full().model_dump(exclude_none=True)["node_pools"]
    pools[2]["machine_spec"].update(machine_type="a4-highgpu-8g", accelerator_type="NVIDIA_B200")
    desired = changed(node_pools=pools)

    diff = cluster_diff.diff_cluster(desired, full())

    assert diff.immutable == [
        "node_pools[ondemand].machine_spec.machine_type: 'a3-highgpu-8g' -> 'a4-highgpu-8g'",
        "node_pools[ondemand].machine_spec.accelerator_type: 'NVIDIA_H100_80GB' -> 'NVIDIA_B200'",
    ]
    assert diff.update_mask == []


def test_config_change_gives_the_exact_update_mask():
    desired = changed(
        orchestrator_spec={"slurm_spec": {"config": {"PreemptExemptTime": "00:30:00"}}}
    )

    diff = cluster_diff.diff_cluster(desired, full())

    assert diff.immutable == []
    assert diff.update_mask == [f"{SLURM}.config"]
    assert diff.changes[0].path == f"{SLURM}.config"


def test_several_mutable_changes_give_an_ordered_mask():
    spec = full().model_dump(exclude_none=True)
    pools = spec["node_pools"]
    pools[1]["scaling_spec"]["max_node_count"] = 8
    slurm = spec["orchestrator_spec"]["slurm_spec"]
    overrides = {
        "display_name": "llmtrain2",
        "labels": {"team": "research"},
        "node_pools": pools,
        "orchestrator_spec": {
            "slurm_spec": {
                "partitions": list(reversed(slurm["partitions"])),
                "default_partition_id": "ondemand",
                "prolog_bash_scripts": [],
                "node_sets": slurm["node_sets"][:1],
            }
        },
    }

    diff = cluster_diff.diff_cluster(changed(**overrides), full())

    assert diff.immutable == []
    assert diff.update_mask == [
        "display_name",
        "labels",
        "node_pools",
        f"{SLURM}.partitions",
        f"{SLURM}.prolog_bash_scripts",
        f"{SLURM}.node_sets",
        f"{SLURM}.default_partition_id",
    ]


@pytest.mark.parametrize(
    ("overrides", "immutable_path"),
    [
        ({"network": {"network": "projects/acme-ml/global/networks/other"}}, "network.network"),
        (
            {"runtime_spec": {"service_account": "x@acme-ml.iam.gserviceaccount.com"}},
            "runtime_spec.service_account",
        ),
        (
            {"orchestrator_spec": {"slurm_spec": {"home_directory_storage": HOME + "2"}}},
            f"{SLURM}.home_directory_storage",
        ),
    ],
)
def test_immutable_top_level_changes(overrides, immutable_path):
    diff = cluster_diff.diff_cluster(changed(**overrides), full())

    assert [c.path for c in diff.changes] == [immutable_path]
    assert diff.immutable[0].startswith(f"{immutable_path}: ")
    assert diff.update_mask == []


def test_provisioning_and_confidential_changes_are_immutable():
    pools = full().model_dump(exclude_none=True)["node_pools"]
    pools[1]["provisioning_model"] = "ON_DEMAND"
    pools[2]["confidential_instance_config"] = {"confidential_instance_type": "TDX"}

    diff = cluster_diff.diff_cluster(changed(node_pools=pools), full())

    assert [c.path for c in diff.changes] == [
        "node_pools[spot].provisioning_model",
        "node_pools[ondemand].confidential_instance_config.confidential_instance_type",
    ]
    assert diff.update_mask == []


def test_pool_added_or_removed_is_a_node_pools_update():
    pools = full().model_dump(exclude_none=True)["node_pools"]

    added = cluster_diff.diff_cluster(changed(node_pools=[*pools, {"id": "extra"}]), full())
    removed = cluster_diff.diff_cluster(changed(node_pools=pools[:2]), full())

    assert [str(c) for c in added.changes] == ["node_pools[extra]: None -> '<added>'"]
    assert [str(c) for c in removed.changes] == ["node_pools[ondemand]: '<present>' -> None"]
    assert added.update_mask == removed.update_mask == ["node_pools"]


def test_vsp_labels_are_ignored():
    actual = changed(labels={"vsp-managed": "true", "vsp-run": "r1"})
    desired = changed(labels={"vsp-managed": "false"})

    diff = cluster_diff.diff_cluster(desired, actual)

    assert diff.is_empty


def test_api_defaults_and_omitted_zeros_are_tolerated():
    desired = rules.parse_cluster_spec(
        {
            "display_name": "t",
            "node_pools": [
                {
                    "id": "p",
                    "machine_spec": {"machine_type": "n2-standard-8"},
                    "scaling_spec": {"min_node_count": 0, "max_node_count": 2},
                    "enable_public_ips": False,
                    "filestores": [],
                },
            ],
            "orchestrator_spec": {
                "slurm_spec": {"config": {"preempt_mode": "REQUEUE"}, "prolog_bash_scripts": []}
            },
        }
    )
    actual = cluster_spec.ClusterSpec.from_api(
        {
            "displayName": "t",
            "nodePools": [
                {
                    "id": "p",
                    "machineSpec": {"machineType": "n2-standard-8"},
                    "scalingSpec": {"maxNodeCount": "2"},
                    "provisioningModel": "ON_DEMAND",
                    "bootDisk": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                },
            ],
            "orchestratorSpec": {"slurmSpec": {"config": {"PreemptMode": "REQUEUE"}}},
            "runtimeSpec": {"serviceAccount": "123-compute@developer.gserviceaccount.com"},
        }
    )

    assert cluster_diff.diff_cluster(desired, actual).is_empty


def test_durations_and_resource_name_spellings_compare_by_meaning():
    base = {
        "network": {"network": "projects/acme-ml/global/networks/n"},
        "node_pools": [
            {"id": "f", "provisioning_model": "FLEX_START", "flex_start_max_duration": "3600s"}
        ],
    }
    desired = rules.parse_cluster_spec(base)
    actual = cluster_spec.ClusterSpec.from_api(
        {
            "network": {
                "network": "https://www.googleapis.com/compute/v1/projects/42/global/networks/n"
            },
            "nodePools": [
                {"id": "f", "provisioningModel": "FLEX_START", "flexStartMaxDuration": "3600.000s"}
            ],
        }
    )

    assert cluster_diff.diff_cluster(desired, actual).is_empty
    other = cluster_spec.ClusterSpec.from_api(
        {"network": {"network": "projects/42/global/networks/m"}}
    )
    assert cluster_diff.diff_cluster(desired, other).immutable[0].startswith("network.network")


def test_flex_duration_change_is_a_node_pools_update():
    desired = rules.parse_cluster_spec(
        {"node_pools": [{"id": "f", "flex_start_max_duration": "7200s"}]}
    )
    actual = rules.parse_cluster_spec(
        {"node_pools": [{"id": "f", "flex_start_max_duration": "3600s"}]}
    )

    diff = cluster_diff.diff_cluster(desired, actual)

    assert diff.update_mask == ["node_pools"] and diff.immutable == []
