"""A run that reuses a cluster another run uses does not update it under that run.

Before, ``create_cluster`` (``update_policy`` apply) sent the node-pool PATCH of a smaller Spot
pool while another run's job ran on the pool's nodes; deletes and shrinks already looked for
other users first.
"""

from __future__ import annotations

import copy
import logging
import time

from tests.runtime.cluster.test_cluster_pool_sizes import FAST, FLAT, LOCATION, PROJECT
from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import gcp_labels, rest
from vsp.components.runtime.steps import create_cluster

CLUSTER = "shared"
REF = resource.ClusterRef(PROJECT, LOCATION, CLUSTER)
OPS_LOGGER = "vsp.components.runtime.cluster.ops"


def ensure(run: str, **changes):
    return create_cluster.create_cluster(
        project=PROJECT,
        location=LOCATION,
        cluster_id=CLUSTER,
        cluster_spec=None,
        spec_params={**FLAT, "cluster_id": CLUSTER, **changes},
        pipeline_run=run,
        options=copy.deepcopy(FAST),
    )


def cluster_now() -> dict:
    return resource.ClusterResource(rest.VertexRestClient(LOCATION), REF).get()


def patches(emulator) -> list[dict]:
    return [
        e
        for e in emulator.journal()
        if e["method"] == "PATCH" and "node_pools" in e["query"].get("updateMask", "")
    ]


def test_a_pool_change_waits_while_another_run_holds_the_cluster(emulator, caplog):
    caplog.set_level(logging.WARNING, OPS_LOGGER)
    assert ensure("run-a").action == "created"
    assert ensure("run-b").action == "reused"  # run-b's claim: it trains next
    smaller = ensure("run-c", spot_max_nodes=1)
    assert smaller.action == "reused" and patches(emulator) == []
    [warning] = [r.getMessage() for r in caplog.records if r.name == OPS_LOGGER]
    claim = gcp_labels.lease_key("run-b")
    assert warning.startswith(
        f"cluster {CLUSTER} differs from the spec in node_pools, but another run uses it "
        f"(claim {claim} of another run until "
    ), warning
    assert "not updating it" in warning


def test_the_creators_claim_keeps_another_run_from_changing_its_pools(emulator, caplog):
    caplog.set_level(logging.WARNING, OPS_LOGGER)
    assert ensure("run-a").action == "created"
    labels = cluster_now()["labels"]
    claim = gcp_labels.lease_key("run-a")
    assert gcp_labels.parse_label_time(labels[claim]) > time.time() + 14 * 60
    # run-a is between its steps (no job of it on the cluster): run-c leaves the pools alone.
    assert ensure("run-c", spot_max_nodes=1).action == "reused" and patches(emulator) == []
    [warning] = [r.getMessage() for r in caplog.records if r.name == OPS_LOGGER]
    assert f"(claim {claim} of another run until " in warning


def test_a_pool_change_is_applied_when_nobody_else_uses_the_cluster(emulator):
    assert ensure("run-a").action == "created"
    assert ensure("run-a", spot_max_nodes=1).action == "attached"  # its own cluster
    # run-a's teardown ends its claim (keep_cluster, or the exit task keeping it).
    client = rest.VertexRestClient(LOCATION)
    cluster_labels.mark_kept(client, REF, {"vsp-teardown": "keep"}, pipeline_run="run-a")
    assert gcp_labels.lease_key("run-a") not in cluster_now()["labels"]
    assert ensure("run-c", spot_max_nodes=2).action == "updated"
    assert len(patches(emulator)) == 2
