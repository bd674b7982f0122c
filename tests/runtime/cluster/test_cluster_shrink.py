"""Shrink a kept cluster (GPU pools to no nodes), and scale it back up on the next run.

Against the emulator, with the journal as the record of what was sent: the expiry labels go
first, then one ``node_pools`` PATCH with every compute pool at 0/0 and the login pool as it
was; a refused labels update or a refused pool of no nodes deletes the cluster instead; the
next ``create_cluster`` PATCHes the pools back up (whatever its update policy) and claims it.
"""

from __future__ import annotations

import copy
import logging

import pytest
import requests

from vsp.components.runtime.cluster import builder, resource
from vsp.components.runtime.core import errors, polling, rest
from vsp.components.runtime.steps import create_cluster
from vsp.components.runtime.teardown import shrink
from vsp.vertex_emulator import config
from vsp.vertex_emulator.clusters import api as cluster_api

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "shrunk"
REF = resource.ClusterRef(PROJECT, LOCATION, CLUSTER)
LABELS = {"vsp-teardown": "shrink", "vsp-expires-at": "20300101t000000z"}
FAST = resource.ClusterOptions(
    timeout=30, backoff=polling.Backoff(initial=0.05, maximum=0.2, jitter=0)
)
FLAT = {
    "project": PROJECT,
    "cluster_id": CLUSTER,
    "zone": "us-central1-b",
    "home_directory_storage": f"projects/{PROJECT}/locations/us-central1-b/instances/home",
    "machine_type": "a3-highgpu-8g",
    "accelerator_type": "NVIDIA_H100_80GB",
    "accelerator_count": 8,
    "spot_max_nodes": 2,
    "ondemand_max_nodes": 1,
}


def options() -> resource.ClusterOptions:
    return copy.deepcopy(FAST)


def create(run: str, update_policy: str = "apply") -> create_cluster.ops.EnsureResult:
    return create_cluster.create_cluster(
        project=PROJECT,
        location=LOCATION,
        cluster_id=CLUSTER,
        cluster_spec=None,
        spec_params=FLAT,
        update_policy=update_policy,
        pipeline_run=run,
        options=options(),
    )


def writes(emulator, since: int = 0) -> list[tuple[str, dict, dict | None]]:
    """Cluster writes after the first ``since`` journal entries (Slurm API calls left out)."""
    return [
        (e["method"], e["query"], e.get("body"))
        for e in emulator.journal()[since:]
        if e["method"] in ("PATCH", "DELETE", "POST") and ":" not in e["path"].rsplit("/", 1)[-1]
    ]


def scaling(cluster: dict) -> dict[str, tuple[int, int]]:
    return {
        p["id"]: (int(p["scalingSpec"]["minNodeCount"]), int(p["scalingSpec"]["maxNodeCount"]))
        for p in cluster["nodePools"]
    }


def cluster_now(emulator_api) -> dict:
    return requests.get(emulator_api.clusters_url(CLUSTER)).json()


@pytest.fixture
def client(emulator) -> rest.VertexRestClient:
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


def test_shrunk_pools_scales_compute_pools_and_leaves_the_login_pool():
    body = builder.build_cluster_spec(**FLAT).to_request_body()
    pools, changed = shrink.shrunk_pools(body)
    assert changed == ["spot", "ondemand"]
    assert scaling({"nodePools": pools}) == {"login": (1, 1), "spot": (0, 0), "ondemand": (0, 0)}
    # Everything else in a pool is sent back unchanged (the list is replaced whole).
    assert [p["machineSpec"] for p in pools] == [p["machineSpec"] for p in body["nodePools"]]
    again, changed = shrink.shrunk_pools({**body, "nodePools": pools})
    assert (again, changed) == (pools, [])


@pytest.mark.slow
def test_shrink_labels_first_then_one_node_pools_patch(emulator, emulator_api, client):
    create("run-1")
    mark = len(emulator.journal())
    result = shrink.shrink(client, REF, dict(LABELS), pipeline_run="run-1")
    assert result == "shrunk"
    sent = writes(emulator, mark)
    assert [(m, q) for m, q, _ in sent] == [
        ("PATCH", {"updateMask": "labels", "updateMode": "USER_ONLY"}),
        ("PATCH", {"updateMask": "node_pools", "updateMode": "USER_ONLY"}),
    ]
    assert set(sent[1][2]) == {"nodePools"}
    assert scaling(sent[1][2]) == {"login": (1, 1), "spot": (0, 0), "ondemand": (0, 0)}
    cluster = cluster_now(emulator_api)
    assert cluster["clusterStatus"]["state"] == "RUNNING"
    assert scaling(cluster) == {"login": (1, 1), "spot": (0, 0), "ondemand": (0, 0)}
    assert {k: cluster["labels"][k] for k in LABELS} == LABELS
    assert shrink.is_shrunk(cluster)
    # Shrinking again changes nothing: the labels and the pools are already so.
    mark = len(emulator.journal())
    assert shrink.shrink(client, REF, dict(LABELS)) == "shrunk"
    assert writes(emulator, mark) == []


@pytest.mark.slow
def test_shrink_then_reuse_scales_back_up_and_claims(emulator, emulator_api, client):
    create("run-1")
    shrink.shrink(client, REF, dict(LABELS), pipeline_run="run-1")
    mark = len(emulator.journal())
    # Even with update_policy "report", a pool this tool shrank is scaled back up.
    result = create("run-2", update_policy="report")
    assert (result.action, result.reused, result.update_mask) == ("scaled_up", True, ["node_pools"])
    sent = writes(emulator, mark)
    assert [(m, q) for m, q, _ in sent] == [
        ("PATCH", {"updateMask": "node_pools", "updateMode": "USER_AND_SERVICE"}),
        ("PATCH", {"updateMask": "labels", "updateMode": "USER_ONLY"}),
    ]
    assert scaling(sent[0][2]) == {"login": (1, 1), "spot": (2, 2), "ondemand": (1, 1)}
    cluster = cluster_now(emulator_api)
    assert scaling(cluster) == {"login": (1, 1), "spot": (2, 2), "ondemand": (1, 1)}
    assert "vsp-teardown" not in cluster["labels"] and "vsp-expires-at" not in cluster["labels"]
    assert cluster["labels"]["vsp-last-run"] == "run-2"
    # No cluster was created or deleted along the way.
    assert [m for m, _, _ in sent if m in ("POST", "DELETE")] == []


def test_the_emulated_scale_up_takes_its_own_time():
    settings = config.EmulatorSettings(update_delay_seconds=0.1, scale_up_delay_seconds=1.5)
    body = builder.build_cluster_spec(**FLAT).to_request_body()
    shrunk = {**body, "nodePools": shrink.shrunk_pools(body)[0]}
    paths = ["node_pools"]
    assert cluster_api._update_seconds(settings, body, shrunk, paths) == 0.1
    assert cluster_api._update_seconds(settings, shrunk, body, paths) == 1.5
    assert cluster_api._update_seconds(settings, shrunk, body, ["labels"]) == 0.1


@pytest.mark.slow
def test_a_refused_pool_of_no_nodes_deletes_the_cluster(emulator, emulator_api, client, caplog):
    create("run-1")
    emulator.update_settings(cluster_empty_pools_allowed=False)
    mark = len(emulator.journal())
    caplog.set_level(logging.WARNING, "vsp.components.runtime.teardown.shrink")
    assert shrink.shrink(client, REF, dict(LABELS), pipeline_run="run-1") == "deleted"
    assert [m for m, _, _ in writes(emulator, mark)] == ["PATCH", "PATCH", "DELETE"]
    assert requests.get(emulator_api.clusters_url(CLUSTER)).status_code == 404
    (warning,) = [r.getMessage() for r in caplog.records if "refused to scale" in r.getMessage()]
    assert 'Node pool "spot": max_node_count must be at least 1.' in warning
    assert warning.endswith("it is deleted instead, so that it does not stay up at full size")


@pytest.mark.slow
def test_refused_labels_delete_before_any_scaling(emulator, emulator_api, client):
    create("run-1")
    emulator.update_settings(cluster_labels_updatable=False)
    mark = len(emulator.journal())
    assert shrink.shrink(client, REF, dict(LABELS), pipeline_run="run-1") == "deleted"
    sent = writes(emulator, mark)
    assert [(m, q.get("updateMask")) for m, q, _ in sent] == [
        ("PATCH", "labels"),
        ("DELETE", None),
    ]


def test_a_missing_cluster_is_absent_and_wrong_labels_are_refused(emulator, client):
    assert shrink.shrink(client, REF, dict(LABELS)) == "absent"
    with pytest.raises(errors.UserError, match="do not say vsp-teardown=shrink"):
        shrink.shrink(client, REF, {"vsp-teardown": "keep"})
    with pytest.raises(errors.UserError, match="are not teardown labels"):
        shrink.shrink(client, REF, {**LABELS, "team": "x"})
