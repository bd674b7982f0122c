"""Fixed-size node pools: built by default, warned about otherwise, under both readings.

The create-cluster reference says a pool's MIN_NODE_COUNT must equal its MAX_NODE_COUNT; the
FLEX_START pages use min 0 / max N. Whether the service refuses other pools that scale from 0 is
not known, so the rules warn, and the emulator refuses them only with
``cluster_fixed_size_pools``.
"""

from __future__ import annotations

import copy
import logging
import pathlib

import pytest

from vsp.components.runtime.cluster import builder, resource, rules
from vsp.components.runtime.core import errors, polling
from vsp.components.runtime.steps import create_cluster

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "fixed"
HOME = f"projects/{PROJECT}/locations/us-central1-b/instances/home"
FLAT = {
    "project": PROJECT,
    "cluster_id": CLUSTER,
    "zone": "us-central1-b",
    "network": "default",
    "home_directory_storage": HOME,
    "machine_type": "a3-highgpu-8g",
    "accelerator_type": "NVIDIA_H100_80GB",
    "accelerator_count": 8,
    "spot_max_nodes": 2,
    "ondemand_max_nodes": 1,
    "boot_disk_size_gb": 200,
}
FAST = resource.ClusterOptions(
    timeout=30, backoff=polling.Backoff(initial=0.05, maximum=0.2, jitter=0)
)
RULES_LOGGER = "vsp.components.runtime.cluster.rules"


def full_body() -> dict:
    return rules.load_cluster_spec(DATA / "cluster_full.yaml").to_request_body()


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == RULES_LOGGER]


def create(cluster_id: str = CLUSTER, **spec_params):
    return create_cluster.create_cluster(
        project=PROJECT,
        location=LOCATION,
        cluster_id=cluster_id,
        cluster_spec=spec_params.pop("cluster_spec", None),
        spec_params={**spec_params, "cluster_id": cluster_id},
        options=copy.deepcopy(FAST),
    )


def test_builder_makes_spot_and_ondemand_pools_fixed_size_without_warnings(caplog):
    caplog.set_level(logging.WARNING, RULES_LOGGER)
    spec = builder.build_cluster_spec(**FLAT)
    sizes = {
        p.id: (p.scaling_spec.min_node_count, p.scaling_spec.max_node_count)
        for p in spec.node_pools
    }
    assert sizes == {"login": (1, 1), "spot": (2, 2), "ondemand": (1, 1)}
    assert warnings_of(caplog) == []


def test_pool_scaling_from_zero_is_a_warning_citing_the_reference_not_an_error(caplog):
    caplog.set_level(logging.WARNING, RULES_LOGGER)
    spec = rules.parse_cluster_spec(full_body())
    rules.validate_cluster(spec, "llmtrain")  # does not raise
    assert warnings_of(caplog) == [
        f"node_pools[{index}].scaling_spec.min_node_count = 0 (pool {pool!r}, max_node_count "
        f"{high}): the create-cluster reference says a node pool's minimum node count must "
        "equal its maximum; the service may refuse the create or the node pool update. Fix: "
        f"set min_node_count to {high} (a fixed-size pool), or make the pool FLEX_START "
        "(min 0 / max N is documented for it)."
        for index, pool, high in ((1, "spot", 4), (2, "ondemand", 2))
    ]


def test_flex_start_pools_and_an_unset_maximum_are_not_warned_about():
    body = full_body()
    body["nodePools"][1].update(provisioningModel="FLEX_START", flexStartMaxDuration="86400s")
    body["nodePools"][2]["scalingSpec"] = {"minNodeCount": 1}
    assert rules.pool_size_warnings(rules.parse_cluster_spec(body)) == []
    body["nodePools"][2]["scalingSpec"] = {"maxNodeCount": 3}  # unset min is 0 (proto3)
    (warning,) = rules.pool_size_warnings(rules.parse_cluster_spec(body))
    assert warning.startswith("node_pools[2].scaling_spec.min_node_count = 0 (pool 'ondemand'")


def test_login_pool_scaling_stays_an_error():
    body = full_body()
    body["nodePools"][0]["scalingSpec"] = {"minNodeCount": 0, "maxNodeCount": 1}
    spec = rules.parse_cluster_spec(body)
    with pytest.raises(errors.SpecValidationError) as info:
        rules.validate_cluster(spec, "llmtrain")
    assert info.value.fields == ["node_pools[0].scaling_spec.min_node_count"]
    assert all("node_pools[0]" not in w for w in rules.pool_size_warnings(spec))


@pytest.mark.parametrize("fixed_size_pools", [False, True])
def test_builder_defaults_are_accepted_under_both_readings(emulator, fixed_size_pools):
    emulator.update_settings(cluster_fixed_size_pools=fixed_size_pools)
    result = create(**FLAT)
    assert result.action == "created"
    (post,) = [
        e
        for e in emulator.journal()
        if e["method"] == "POST" and e["path"].endswith("/modelDevelopmentClusters")
    ]
    assert [p["scalingSpec"] for p in post["body"]["nodePools"]] == [
        {"minNodeCount": 1, "maxNodeCount": 1},
        {"minNodeCount": 2, "maxNodeCount": 2},
        {"minNodeCount": 1, "maxNodeCount": 1},
    ]


def test_a_spec_scaling_from_zero_is_warned_then_accepted_or_refused_by_reading(emulator, caplog):
    caplog.set_level(logging.WARNING, RULES_LOGGER)
    body = full_body()
    assert create(cluster_spec=body).action == "created"  # setting off: accepted
    assert len(warnings_of(caplog)) == 2
    emulator.update_settings(cluster_fixed_size_pools=True)
    with pytest.raises(errors.InvalidArgumentError) as info:
        create("other", cluster_spec=body)
    assert "node_pools[1].scaling_spec.min_node_count" in info.value.message
    assert 'Node pool "spot": min_node_count (0) must equal max_node_count (4)' in (
        info.value.message
    )


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (
            {"boot_disk_size_gb": 10**15},
            "node_pools[1].boot_disk.boot_disk_size_gb",
            "Boot disk is larger than 65536 GB (64 TiB, the largest disk).",
        ),
        (
            {"spot_max_nodes": 10**12},
            "node_pools[1].scaling_spec.min_node_count",
            "Node count is above 2147483647 (int32).",
        ),
    ],
)
def test_sizes_the_service_refuses_are_refused_before_any_request(change, field, problem):
    # The emulator created such a cluster once; the service refuses them.
    with pytest.raises(errors.SpecValidationError) as caught:
        builder.build_cluster_spec(**{**FLAT, **change})
    assert field in caught.value.fields
    assert problem in str(caught.value)


def test_the_first_step_uses_the_cluster_rules_limits():
    from vsp.components.runtime.cluster import rules_pools
    from vsp.components.runtime.core import param_rules

    assert param_rules.MAX_BOOT_DISK_GB == rules_pools.MAX_BOOT_DISK_GB
    assert param_rules.MAX_NODE_COUNT == rules_pools.MAX_NODE_COUNT


def test_an_accelerator_type_outside_the_enum_is_warned_about_on_each_pool(caplog):
    caplog.set_level(logging.WARNING, logger=RULES_LOGGER)
    builder.build_cluster_spec(**FLAT)
    assert caplog.messages == []  # NVIDIA_H100_80GB is listed
    newer = {**FLAT, "machine_type": "a9-hypergpu-8g"}  # a family this version does not know
    builder.build_cluster_spec(**{**newer, "accelerator_type": "NVIDIA_H100"})
    assert [m.split(":")[0] for m in caplog.messages] == [
        "node_pools[1].machine_spec.accelerator_type = 'NVIDIA_H100' (pool 'spot')",
        "node_pools[2].machine_spec.accelerator_type = 'NVIDIA_H100' (pool 'ondemand')",
    ]
    assert "NVIDIA_H100_80GB" in caplog.messages[0].split("(close: ")[1].split(")")[0]


def test_a_pool_whose_machine_comes_with_other_gpus_is_refused_before_any_request():
    with pytest.raises(errors.SpecValidationError) as info:
        builder.build_cluster_spec(**{**FLAT, "accelerator_type": "NVIDIA_B200"})
    assert "node_pools[1].machine_spec.accelerator_type" in info.value.fields
    assert "a3-highgpu-8g comes with NVIDIA_H100_80GB, not NVIDIA_B200" in str(info.value)
    assert "Set accelerator_type NVIDIA_H100_80GB and accelerator_count 8" in str(info.value)
