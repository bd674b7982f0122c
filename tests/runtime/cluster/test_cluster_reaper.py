"""The reaper of expired kept clusters, against the in-process Vertex emulator."""

from __future__ import annotations

import copy
import time

import pytest
import requests

from vsp.components.runtime.cluster import claims, resource
from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.core import gcp_labels, polling, rest
from vsp.components.runtime.teardown import reaper

PROJECT, LOCATION = "test-project", "us-central1"
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"
COLLECTION = f"/v1beta1/{PARENT}/modelDevelopmentClusters"
FAST = resource.ClusterOptions(
    timeout=30, backoff=polling.Backoff(initial=0.05, maximum=0.2, jitter=0)
)
NOW = time.time()
PAST = gcp_labels.format_label_time(NOW - 3600)
LATER = gcp_labels.format_label_time(NOW + 3600)
MANAGED = {"vsp-managed": "true", "vsp-pipeline-run": "run-1", "vsp-teardown": "keep"}


@pytest.fixture
def client(emulator) -> rest.VertexRestClient:
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


def name(cluster_id: str) -> str:
    return f"{PARENT}/modelDevelopmentClusters/{cluster_id}"


def make(emulator_api, cluster_body, cluster_id, expires_at=None, *, wait=True):
    """Creates a cluster directly through the API, with ``vsp-expires-at`` when given."""
    body = copy.deepcopy(cluster_body)
    body["labels"] = {**body["labels"], **MANAGED}
    if expires_at:
        body["labels"][gcp_labels.EXPIRES_AT] = expires_at
    if wait:
        return emulator_api.create_running(cluster_id, body)
    assert emulator_api.create_cluster(cluster_id, body).status_code == 200
    return None


def three(emulator_api, cluster_body):
    make(emulator_api, cluster_body, "expired", PAST)
    make(emulator_api, cluster_body, "future", LATER)
    make(emulator_api, cluster_body, "nolabel")


def deletes(emulator):
    return [e for e in emulator.journal() if e["method"] == "DELETE"]


def reap(client, **kwargs):
    return reaper.reap_expired(client, PARENT, now=NOW, options=copy.deepcopy(FAST), **kwargs)


def exists(emulator_api, cluster_id) -> bool:
    return requests.get(emulator_api.clusters_url(cluster_id)).status_code == 200


def test_only_the_expired_cluster_is_deleted(emulator, emulator_api, cluster_body, client):
    three(emulator_api, cluster_body)
    report = reap(client)
    (delete,) = deletes(emulator)
    assert delete["path"] == f"{COLLECTION}/expired"
    assert report.deleted == [name("expired")]
    expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(gcp_labels.parse_label_time(LATER)))
    assert report.kept == {
        name("future"): f"expires at {expiry}",
        name("nolabel"): "no vsp-expires-at label",
    }
    assert report.summary() == "3 clusters: 1 deleted, 2 kept"
    assert not exists(emulator_api, "expired")
    assert exists(emulator_api, "future") and exists(emulator_api, "nolabel")


def test_dry_run_deletes_nothing(emulator, emulator_api, cluster_body, client):
    three(emulator_api, cluster_body)
    report = reap(client, dry_run=True)
    assert report.dry_run
    assert report.would_delete == [name("expired")]
    assert report.deleted == []
    assert report.summary() == "3 clusters: 1 to delete, 2 kept"
    assert {e["method"] for e in emulator.journal()} == {"POST", "GET"}
    assert exists(emulator_api, "expired")


@pytest.mark.parametrize("claim", ["cleared", "moved"])
def test_cluster_claimed_between_listing_and_delete_is_kept(
    emulator, emulator_api, cluster_body, client, monkeypatch, claim
):
    make(emulator_api, cluster_body, "expired", PAST)
    real_list = resource.list_clusters
    ref = resource.ClusterRef(PROJECT, LOCATION, "expired")

    def list_then_claim(*args, **kwargs):
        listed = list(real_list(*args, **kwargs))  # the reaper sees the expired label
        if claim == "cleared":  # a new run starts on the cluster meanwhile
            claims.claim_for_run(client, ref, "run-2", options=copy.deepcopy(FAST))
        else:  # a run ended meanwhile and kept the cluster for longer
            labels = {"vsp-teardown": "keep", gcp_labels.EXPIRES_AT: LATER}
            cluster_labels.mark_kept(client, ref, labels, options=copy.deepcopy(FAST))
        yield from listed

    monkeypatch.setattr(resource, "list_clusters", list_then_claim)
    report = reap(client)
    assert deletes(emulator) == []
    assert report.deleted == []
    reason = report.kept[name("expired")]
    assert reason.startswith("claimed meanwhile: ")
    assert ("no vsp-expires-at label" in reason) == (claim == "cleared")
    assert ("expires at " in reason) == (claim == "moved")
    assert exists(emulator_api, "expired")


def test_busy_and_stopping_expired_clusters_are_kept(emulator, emulator_api, cluster_body, client):
    make(emulator_api, cluster_body, "stopping", PAST)
    emulator.update_settings(delete_delay_seconds=30, provisioning_delay_seconds=30)
    assert requests.delete(emulator_api.clusters_url("stopping")).status_code == 200
    make(emulator_api, cluster_body, "starting", PAST, wait=False)
    report = reap(client)
    assert report.kept[name("stopping")] == "already being deleted"
    assert report.kept[name("starting")].endswith("but PROVISIONING: busy, not deleted")
    assert len(deletes(emulator)) == 1  # only the one sent above


def test_unreadable_expiry_is_never_deleted(emulator, emulator_api, cluster_body, client):
    make(emulator_api, cluster_body, "odd", "yesterday")
    report = reap(client)
    assert report.kept == {name("odd"): "unreadable vsp-expires-at 'yesterday'"}
    assert deletes(emulator) == []


def test_a_failed_delete_is_reported_and_the_others_are_still_reaped(
    emulator, emulator_api, cluster_body, client
):
    make(emulator_api, cluster_body, "first", PAST)
    make(emulator_api, cluster_body, "second", PAST)
    emulator.add_fault(
        action="status", method="DELETE", path="/first$", http_status=403, times=None
    )
    report = reap(client)
    assert list(report.failed) == [name("first")]
    assert "403" in report.failed[name("first")]
    assert report.deleted == [name("second")]
    assert report.summary() == "2 clusters: 1 deleted, 1 failed"
    assert exists(emulator_api, "first") and not exists(emulator_api, "second")
