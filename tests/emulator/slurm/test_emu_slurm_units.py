"""Pure helpers of the emulated Slurm: topology, time strings, host lists, plans, job specs."""

from __future__ import annotations

import pytest

from vsp.vertex_emulator import config
from vsp.vertex_emulator.clusters import schema as cluster_schema
from vsp.vertex_emulator.slurm import jobdesc as slurm_jobdesc
from vsp.vertex_emulator.slurm import preemption as slurm_preemption
from vsp.vertex_emulator.slurm import shapes as slurm_shapes
from vsp.vertex_emulator.slurm import topology as slurm_topology


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800.0),
        ("1:30", 90.0),
        ("1:00:00", 3600.0),
        ("2-00:00:00", 172800.0),
        ("1-2", 93600.0),
        ("1-0:30", 88200.0),
        ("UNLIMITED", None),
        ("", None),
    ],
)
def test_parse_slurm_time(text, seconds):
    assert slurm_topology.parse_slurm_time(text) == seconds


def test_parse_slurm_time_rejects_garbage():
    with pytest.raises(ValueError):
        slurm_topology.parse_slurm_time("soon")


def test_hostlist_compression():
    assert slurm_shapes.hostlist(["c1-a4-0"]) == "c1-a4-0"
    assert slurm_shapes.hostlist(["c1-a4-0", "c1-a4-1", "c1-a4-3"]) == "c1-a4-[0-1,3]"
    assert slurm_shapes.hostlist(["c1-a4-1", "c1-b-0", "c1-a4-0"]) == "c1-a4-[0-1],c1-b-0"
    assert slurm_shapes.hostlist([]) == ""


def test_topology_from_cluster(cluster_body):
    slurm = cluster_body["orchestrator_spec"]["slurm_spec"]
    slurm["partitions"] = [
        {"id": "spot", "node_pool_ids": ["a4", "login"], "config": {"PriorityTier": "2"}},
        {"id": "big", "node_pool_ids": ["a4"], "config": {"MaxTime": "4-00:00:00"}},
    ]
    slurm["default_partition_id"] = "big"
    slurm["config"] = {"accounting_storage_enforce": "Limits", "PreemptMode": "REQUEUE"}
    cluster = cluster_schema.normalize(cluster_body, strict=True)
    cluster["name"] = "projects/p/locations/l/modelDevelopmentClusters/c1"
    topo = slurm_topology.from_cluster(cluster)
    assert topo.nodes == ("c1-a4-0", "c1-a4-1")
    assert topo.spot_nodes == {"c1-a4-0", "c1-a4-1"}
    assert topo.gpus == {"c1-a4-0": 8, "c1-a4-1": 8}
    assert topo.partitions["spot"].nodes == topo.nodes
    assert (topo.partitions["spot"].tier, topo.partitions["big"].tier) == (2, 1)
    assert topo.partitions["big"].max_time == 4 * 24 * 60
    assert topo.partitions["big"].preempt_mode == "REQUEUE"
    assert topo.default_partition == "big"
    assert topo.enforce_associations and topo.preemption_enabled and topo.job_requeue_default


def test_gpu_and_node_specs():
    assert slurm_jobdesc.gpus_per_node("gres/gpu:8") == 8
    assert slurm_jobdesc.gpus_per_node("gres/gpu:b200:4") == 4
    assert slurm_jobdesc.gpus_per_node("gres/gpu") == 1
    assert slurm_jobdesc.gpus_per_node("") == 0
    assert slurm_jobdesc.node_range({"nodes": "1-4"}) == (1, 4)
    assert slurm_jobdesc.node_range({"minimum_nodes": {"set": True, "number": 2}}) == (2, 2)
    assert slurm_jobdesc.number({"set": False, "infinite": True, "number": 0}, "x") == (None, True)
    with pytest.raises(slurm_jobdesc.SlurmError):
        slurm_jobdesc.number(True, "x")


def test_warning_signal_specs():
    assert slurm_jobdesc.warn_signal({"signal": "B:USR1@30"}) == (10, 30.0, True)
    assert slurm_jobdesc.warn_signal({"kill_warning_signal": "SIGUSR2"}) == (12, 60.0, False)
    with pytest.raises(slurm_jobdesc.SlurmError):
        slurm_jobdesc.warn_signal({"signal": "NOPE@3"})


def test_output_path_expansion():
    job = {"job_id": 42, "name": "train", "user": "vsp", "cwd": "/home/w"}
    assert slurm_jobdesc.expand_path("slurm-%j.out", job) == "/home/w/slurm-42.out"
    assert slurm_jobdesc.expand_path("/logs/%x-%5j-%u.%%", job) == "/logs/train-00042-vsp.%"


def test_plans_validate_and_poisson_is_seeded():
    plan = slurm_preemption.normalize_plan({"afterSeconds": [1, 2], "count": 3})
    assert plan["mode"] == "fixed" and plan["after_seconds"] == [1.0, 2.0]
    assert plan["max_count"] == 3
    for bad in ({"mode": "fixed"}, {"mode": "poisson"}, {"mode": "x"}, {"afterSeconds": 1, "y": 2}):
        with pytest.raises(ValueError):
            slurm_preemption.normalize_plan(bad)
    first = slurm_preemption.poisson_delays(3, 60.0, 200)
    assert first == slurm_preemption.poisson_delays(3, 60.0, 200)
    assert 40 < sum(first) / len(first) < 80
    settings = config.EmulatorSettings(slurm_spot_preempt_mean_seconds=5, slurm_spot_preempt_seed=9)
    assert slurm_preemption.settings_plan(settings)["mode"] == "poisson"
    assert slurm_preemption.settings_plan(config.EmulatorSettings()) is None
