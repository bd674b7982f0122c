"""Managed-label updates of a cluster against the in-process Vertex emulator."""

from __future__ import annotations

import copy
import re

import pytest
import requests

from vsp.components.runtime.cluster import claims, resource
from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.core import errors, gcp_labels, polling, rest

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "kept"
CLUSTER_PATH = (
    f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/modelDevelopmentClusters/{CLUSTER}"
)
PARAMS = {"updateMask": "labels", "updateMode": "USER_ONLY"}
BASE = {"team": "ml", "vsp-managed": "true", "vsp-pipeline-run": "run-1"}
FUTURE = "20300101t000000z"
FAST = resource.ClusterOptions(
    timeout=30, backoff=polling.Backoff(initial=0.05, maximum=0.2, jitter=0)
)
REF = resource.ClusterRef(PROJECT, LOCATION, CLUSTER)


@pytest.fixture
def client(emulator) -> rest.VertexRestClient:
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


def options() -> resource.ClusterOptions:
    return copy.deepcopy(FAST)


def existing(emulator_api, cluster_body, labels=None):
    """A RUNNING cluster created directly through the API, with ``labels``."""
    cluster_body["labels"] = dict(BASE if labels is None else labels)
    return emulator_api.create_running(CLUSTER, cluster_body)


def patches(emulator):
    return [e for e in emulator.journal() if e["method"] == "PATCH"]


def labels_now(emulator_api):
    return requests.get(emulator_api.clusters_url(CLUSTER)).json().get("labels")


def test_mark_kept_patches_only_the_labels_with_an_exact_body(
    emulator, emulator_api, cluster_body, client
):
    existing(emulator_api, cluster_body)
    decision = {"vsp-teardown": "keep", "vsp-expires-at": FUTURE}
    cluster = cluster_labels.mark_kept(client, REF, decision, options=options())
    (patch,) = patches(emulator)
    assert patch["path"] == CLUSTER_PATH
    assert patch["query"] == PARAMS
    assert patch["body"] == {"labels": {**BASE, **decision}}
    assert patch["status"] == 200
    assert cluster["labels"] == {**BASE, **decision}
    assert resource.cluster_state(cluster) == "RUNNING"
    assert labels_now(emulator_api) == {**BASE, **decision}


def test_no_write_when_the_labels_already_match(emulator, emulator_api, cluster_body, client):
    decision = {"vsp-teardown": "keep", "vsp-expires-at": FUTURE}
    existing(emulator_api, cluster_body, {**BASE, **decision})
    cluster = cluster_labels.mark_kept(client, REF, decision, options=options())
    assert cluster["labels"] == {**BASE, **decision}
    assert patches(emulator) == []
    writes = [e["method"] for e in emulator.journal() if e["method"] != "GET"]
    assert writes == ["POST"]  # only the create above


def test_mark_kept_without_expiry_removes_a_stale_expiry(
    emulator, emulator_api, cluster_body, client
):
    existing(emulator_api, cluster_body, {**BASE, "vsp-teardown": "keep", "vsp-expires-at": FUTURE})
    cluster_labels.mark_kept(client, REF, {"vsp-teardown": "keep"}, options=options())
    (patch,) = patches(emulator)
    assert patch["body"] == {"labels": {**BASE, "vsp-teardown": "keep"}}
    assert labels_now(emulator_api) == {**BASE, "vsp-teardown": "keep"}


def test_claim_for_run_removes_the_expiry_records_the_user_and_keeps_the_run_label(
    emulator, emulator_api, cluster_body, client
):
    existing(emulator_api, cluster_body, {**BASE, "vsp-teardown": "keep", "vsp-expires-at": FUTURE})
    cluster = claims.claim_for_run(client, REF, "run-2", options=options())
    (patch,) = patches(emulator)
    assert patch["query"] == PARAMS
    used = patch["body"]["labels"].pop("vsp-last-used-at")
    assert re.fullmatch(r"\d{8}t\d{6}z", used)
    # The claim: the run's lease label, expiring LEASE_MINUTES after the claim.
    lease = gcp_labels.lease_key("run-2")
    expires = patch["body"]["labels"].pop(lease)
    claimed = gcp_labels.parse_label_time(used)
    assert gcp_labels.parse_label_time(expires) - claimed == claims.LEASE_MINUTES * 60
    assert patch["body"] == {"labels": {**BASE, "vsp-last-run": "run-2"}}
    assert cluster["labels"] == {
        **BASE, "vsp-last-run": "run-2", "vsp-last-used-at": used, lease: expires,
    }  # fmt: skip
    assert cluster["labels"]["vsp-pipeline-run"] == "run-1"  # who created it stays
    again = claims.claim_for_run(client, REF, "run-3", options=options())
    assert again["labels"]["vsp-last-run"] == "run-3"
    # Both claims are live; an expired one is dropped by the next update of the labels.
    assert {lease, gcp_labels.lease_key("run-3")} <= set(again["labels"])
    assert cluster_labels.desired_labels(again["labels"], {}, (), now=claimed + 7200) == {
        k: v for k, v in again["labels"].items() if not k.startswith("vsp-lease-")
    }


@pytest.mark.parametrize(
    ("set_labels", "remove", "message"),
    [
        ({"team": "infra"}, (), r"\['team'\] are not managed by this tool.*Fix:"),
        ({}, ("owner",), r"\['owner'\] are not managed by this tool"),
        ({"vsp-teardown": "keep"}, ("vsp-teardown",), r"both set and removed. Fix:"),
        ({"vsp-teardown": "Keep Me"}, (), r"set_labels.vsp-teardown = 'Keep Me'.*Fix:"),
    ],
)
def test_invalid_changes_are_refused_before_any_request(
    emulator, client, set_labels, remove, message
):
    with pytest.raises(errors.UserError, match=message):
        cluster_labels.update_managed_labels(
            client, REF, set_labels=set_labels, remove=remove, options=options()
        )
    assert emulator.journal() == []


def test_missing_cluster_gets_nothing_sent(emulator, client):
    result = cluster_labels.mark_kept(client, REF, {"vsp-teardown": "keep"}, options=options())
    assert result is None
    assert [e["method"] for e in emulator.journal()] == ["GET"]


def test_lost_patch_answer_is_read_again_not_resent(emulator, emulator_api, cluster_body, client):
    existing(emulator_api, cluster_body)
    emulator.add_fault(action="reset_after", method="PATCH", path=f"{CLUSTER_PATH}$")
    decision = {"vsp-teardown": "keep", "vsp-expires-at": FUTURE}
    cluster = cluster_labels.mark_kept(client, REF, decision, options=options())
    assert cluster["labels"] == {**BASE, **decision}
    assert resource.cluster_state(cluster) == "RUNNING"
    (patch,) = patches(emulator)
    assert patch["status"] == "reset"
    assert patch["body"] == {"labels": {**BASE, **decision}}
    after = emulator.journal()[emulator.journal().index(patch) + 1 :]
    assert after and all(e["method"] == "GET" for e in after)


@pytest.mark.parametrize(
    ("fault", "first_status"),
    [
        ({"action": "reset"}, "reset"),
        ({"action": "status", "http_status": 503}, 503),
        ({"action": "status", "http_status": 400, "error_status": "FAILED_PRECONDITION"}, 400),
    ],
)
def test_patch_that_did_not_take_effect_is_sent_again(
    emulator, emulator_api, cluster_body, client, fault, first_status
):
    existing(emulator_api, cluster_body)
    emulator.add_fault(method="PATCH", path=f"{CLUSTER_PATH}$", **fault)
    cluster = cluster_labels.update_managed_labels(
        client, REF, remove=["vsp-expires-at"], options=options()
    )
    assert cluster["labels"] == BASE
    assert patches(emulator) == []  # nothing to remove: no write at all
    cluster = cluster_labels.mark_kept(client, REF, {"vsp-teardown": "delete"}, options=options())
    assert cluster["labels"] == {**BASE, "vsp-teardown": "delete"}
    assert [p["status"] for p in patches(emulator)] == [first_status, 200]
    assert patches(emulator)[0]["body"] == patches(emulator)[1]["body"]


def test_provisioning_cluster_is_waited_for_before_the_patch(
    emulator, emulator_api, cluster_body, client
):
    emulator.update_settings(provisioning_delay_seconds=0.5)
    cluster_body["labels"] = dict(BASE)
    assert emulator_api.create_cluster(CLUSTER, cluster_body).status_code == 200
    cluster = cluster_labels.mark_kept(client, REF, {"vsp-teardown": "keep"}, options=options())
    assert cluster["labels"] == {**BASE, "vsp-teardown": "keep"}
    assert [p["status"] for p in patches(emulator)] == [200]


def test_cluster_being_deleted_gets_nothing_sent(emulator, emulator_api, cluster_body, client):
    existing(emulator_api, cluster_body)
    emulator.update_settings(delete_delay_seconds=30)
    assert requests.delete(emulator_api.clusters_url(CLUSTER)).status_code == 200
    result = cluster_labels.mark_kept(client, REF, {"vsp-teardown": "keep"}, options=options())
    assert result is None
    assert patches(emulator) == []


def test_cluster_in_error_is_a_user_error_naming_the_fix(
    emulator, emulator_api, cluster_body, client
):
    emulator.add_fault(action="lro_error", method="POST")
    cluster_body["labels"] = dict(BASE)
    operation = emulator_api.create_cluster(CLUSTER, cluster_body).json()
    emulator_api.wait_operation(operation["name"])
    with pytest.raises(errors.UserError, match=r"is ERROR.*Fix: delete it \(`vsp clusters delete"):
        cluster_labels.mark_kept(client, REF, {"vsp-teardown": "keep"}, options=options())
    assert patches(emulator) == []
