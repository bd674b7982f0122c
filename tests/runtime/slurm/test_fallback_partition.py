"""The on-demand fallback is used only where the cluster has that partition."""

from __future__ import annotations

import copy
import json
import logging
import pathlib

import pytest

from vsp.components.runtime.steps import train_on_cluster

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
CLUSTER = json.loads((DATA / "cluster_api_response.json").read_text())


def _without_ondemand(cluster: dict) -> dict:
    changed = copy.deepcopy(cluster)
    slurm = changed["orchestratorSpec"]["slurmSpec"]
    slurm["partitions"] = [p for p in slurm["partitions"] if p["id"] != "ondemand"]
    changed["nodePools"] = [p for p in changed["nodePools"] if p["id"] != "ondemand"]
    return changed


def test_a_cluster_with_the_partition_keeps_the_fallback():
    assert train_on_cluster.fallback_if_present(CLUSTER, "ondemand") == "ondemand"


def test_a_cluster_without_it_trains_on_spot_only_and_says_why(caplog):
    caplog.set_level(logging.INFO, logger=train_on_cluster.__name__)
    assert train_on_cluster.fallback_if_present(_without_ondemand(CLUSTER), "ondemand") == ""
    assert caplog.messages == [
        "cluster has no partition 'ondemand' (partitions: spot): no on-demand fallback; set "
        "ondemand_max_nodes > 0 to have one"
    ]


@pytest.mark.parametrize(
    "cluster", [None, {}, {"name": "x"}, {"orchestratorSpec": {"slurmSpec": {"partitions": []}}}]
)
def test_unknown_partitions_keep_the_fallback_as_given(cluster):
    assert train_on_cluster.fallback_if_present(cluster, "ondemand") == "ondemand"
