"""The exit task does not give up after one failure, deletes an ERROR cluster, and leaves an
expiry as its last resort: no cluster stays up without one after a failed or cancelled run."""

from __future__ import annotations

import copy
import logging
import time

import pytest
import requests

from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import errors, gcp_labels, polling, rest
from vsp.components.runtime.teardown import exit_task, in_use

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "exit"
REF = cluster_resource.ClusterRef(PROJECT, LOCATION, CLUSTER)
PATH = f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/modelDevelopmentClusters/{CLUSTER}"
FAST = polling.Backoff(initial=0.05, maximum=0.1, jitter=0)


@pytest.fixture
def client(emulator) -> rest.VertexRestClient:
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


def resource(client) -> cluster_resource.ClusterResource:
    options = cluster_resource.ClusterOptions(timeout=30, backoff=FAST)
    return cluster_resource.ClusterResource(client, REF, options=options)


def make_cluster(emulator_api, cluster_body) -> dict:
    body = copy.deepcopy(cluster_body)
    body["labels"] = {**body["labels"], "vsp-managed": "true"}
    return emulator_api.create_running(CLUSTER, body)


def finalize(client, state: str, minutes: float = 30.0, deadline: float = 60.0, run: str = ""):
    return exit_task.finalize(
        client,
        REF,
        state=state,
        failure_keep_minutes=minutes,
        delete=resource(client).delete,
        deadline_seconds=deadline,
        backoff=FAST,
        pipeline_run=run,
    )


def test_a_failed_delete_operation_is_retried_until_the_cluster_is_gone(
    emulator, emulator_api, cluster_body, client
):
    make_cluster(emulator_api, cluster_body)
    # The first DELETE's operation ends in error (the cluster is left in ERROR).
    emulator.add_fault(action="lro_error", method="DELETE", path=f"{PATH}$", code=13)
    result = finalize(client, "CANCELLED")
    assert (result.action, result.reason) == ("deleted", "the run was cancelled")
    deletes = [e for e in emulator.journal() if e["method"] == "DELETE"]
    assert len(deletes) == 2
    assert requests.get(emulator_api.clusters_url(CLUSTER)).status_code == 404


def test_a_cluster_in_error_after_a_failure_is_deleted_not_refused(
    emulator, emulator_api, cluster_body, client
):
    make_cluster(emulator_api, cluster_body)
    record = emulator.app.store.get("clusters", REF.name)
    record["cluster"]["clusterStatus"] = {"state": "ERROR", "detail": "stockout"}
    emulator.app.store.put("clusters", REF.name, record)
    mark = len(emulator.journal())
    result = finalize(client, "FAILED")
    assert result.action == "deleted"
    assert result.reason == "the run failed and the cluster is in ERROR, so no retry could use it"
    writes = [
        e["method"]
        for e in emulator.journal()[mark:]
        if e["method"] != "GET" and not e["path"].endswith(":wait")
    ]
    assert writes == ["DELETE"]


def test_a_rejected_delete_operation_is_retried_so_no_cluster_is_left_in_error(
    emulator, emulator_api, cluster_body, client
):
    """Found by the fault campaign: a DELETE whose operation the service rejected (code 3, a
    user error) ended the exit task at once and left the cluster in ERROR without an expiry
    (its labels cannot change), so no reaper would ever delete it."""
    make_cluster(emulator_api, cluster_body)
    emulator.add_fault(action="lro_error", method="DELETE", path=f"{PATH}$", code=3)
    result = finalize(client, "CANCELLED")
    assert (result.action, result.reason) == ("deleted", "the run was cancelled")
    assert len([e for e in emulator.journal() if e["method"] == "DELETE"]) == 2
    assert requests.get(emulator_api.clusters_url(CLUSTER)).status_code == 404


@pytest.mark.slow
def test_a_failed_label_operation_is_retried_then_the_cluster_is_kept(
    emulator, emulator_api, cluster_body, client
):
    make_cluster(emulator_api, cluster_body)
    emulator.add_fault(action="lro_error", method="PATCH", path=f"{PATH}$", code=14)
    result = finalize(client, "FAILED")
    assert result.action == "kept"
    labels = requests.get(emulator_api.clusters_url(CLUSTER)).json()["labels"]
    assert labels["vsp-teardown"] == "retry" and labels["vsp-expires-at"]
    assert len([e for e in emulator.journal() if e["method"] == "PATCH"]) == 2


@pytest.mark.slow
def test_a_delete_cut_by_the_deadline_is_waited_for_then_the_cluster_labelled(
    emulator, emulator_api, cluster_body, client
):
    # The delete takes 1.5 s and fails: the 0.5 s deadline cuts the wait for it while the
    # cluster is STOPPING. The last resort waits for that delete, finds the cluster RUNNING
    # again, and labels it; a STOPPING cluster's labels could not be changed.
    make_cluster(emulator_api, cluster_body)
    emulator.app.update_settings(delete_delay_seconds=1.5)
    emulator.add_fault(
        action="lro_error", method="DELETE", path=f"{PATH}$", code=13, cluster_state="RUNNING",
        times=None,
    )  # fmt: skip
    with pytest.raises(errors.TransientError) as caught:
        finalize(client, "CANCELLED", deadline=0.5)
    assert str(caught.value).endswith("It is labelled to expire now, so the next reap deletes it.")
    cluster = requests.get(emulator_api.clusters_url(CLUSTER)).json()
    assert cluster["clusterStatus"]["state"] == "RUNNING"
    assert cluster["labels"]["vsp-teardown"] == "teardown-failed"


@pytest.mark.slow
def test_a_delete_cut_by_the_deadline_that_then_succeeds_ends_the_task_deleted(
    emulator, emulator_api, cluster_body, client
):
    make_cluster(emulator_api, cluster_body)
    emulator.app.update_settings(delete_delay_seconds=1.5)
    result = finalize(client, "CANCELLED", deadline=0.5)
    assert result.action == "deleted"
    assert "still running at the 0.5 s deadline, went through" in result.reason
    assert requests.get(emulator_api.clusters_url(CLUSTER)).status_code == 404
    assert [e["method"] for e in emulator.journal() if e["method"] in ("DELETE", "PATCH")] == [
        "DELETE"
    ]


@pytest.mark.slow
def test_the_last_resort_is_an_expiry_now_and_a_transient_error(
    emulator, emulator_api, cluster_body, client, caplog
):
    # It left the run's own claim, which the reaper took for another run's use: kept 30 min.
    body = copy.deepcopy(cluster_body)
    mine, theirs = gcp_labels.lease_key("run-a"), gcp_labels.lease_key("run-b")
    later = gcp_labels.format_label_time(time.time() + 600)
    body["labels"] = {**body["labels"], mine: later, theirs: later}
    make_cluster(emulator_api, body)
    emulator.add_fault(
        action="lro_error", method="DELETE", path=f"{PATH}$", code=13, cluster_state="RUNNING",
        times=None,
    )  # fmt: skip
    caplog.set_level(logging.WARNING, "vsp.components.runtime.teardown.exit_task")
    with pytest.raises(errors.TransientError) as caught:
        finalize(client, "CANCELLED", deadline=0.5, run="run-a")
    message = str(caught.value)
    assert message.startswith(f"the exit task could not delete cluster {REF.name} within 0.5 s")
    assert message.endswith("It is labelled to expire now, so the next reap deletes it.")
    labels = requests.get(emulator_api.clusters_url(CLUSTER)).json()["labels"]
    assert labels["vsp-teardown"] == "teardown-failed"
    assert gcp_labels.expired(labels, gcp_labels.parse_label_time(labels["vsp-expires-at"]) + 1)
    assert mine not in labels and labels[theirs] == later  # another run's claim stands
    assert any("retrying in" in r.getMessage() for r in caplog.records)


def test_a_cancelled_run_whose_cluster_another_run_uses_reports_it_kept_not_absent(
    emulator, emulator_api, cluster_body, client
):
    body = copy.deepcopy(cluster_body)
    claim = gcp_labels.lease_key("run-b")
    body["labels"] = {**body["labels"], "vsp-managed": "true", claim: "20991231t000000z"}
    emulator_api.create_running(CLUSTER, body)

    def delete() -> bool:  # as the finalize_cluster step deletes: unless another run uses it
        deleted = in_use.delete_unless_in_use(
            client, REF, pipeline_run="run-a", delete=resource(client).delete
        )
        return deleted == in_use.DELETED

    result = exit_task.finalize(
        client, REF, state="CANCELLED", failure_keep_minutes=30.0, delete=delete, backoff=FAST
    )
    assert result.action == "kept" and result.in_use
    assert result.reason == "the run was cancelled, and another run uses the cluster"
    labels = requests.get(emulator_api.clusters_url(CLUSTER)).json()["labels"]
    assert labels["vsp-teardown"] == "in-use"
    assert result.expires_at == gcp_labels.parse_label_time(labels["vsp-expires-at"])
    assert result.summary(REF).startswith(
        "kept: the run was cancelled, and another run uses the cluster; labelled in use until "
    )


@pytest.mark.parametrize("state", ["FAILED", "CANCELLED"])
def test_a_run_that_ended_before_using_a_kept_cluster_leaves_it_as_it_was(
    emulator, emulator_api, cluster_body, client, state
):
    # Kept warm by last night's run; tonight's failed its parameter check (or was cancelled)
    # before reusing it. Before, it was labelled "retry" with an expiry an hour on (a schedule
    # failing hourly kept it for ever), or deleted although the next run would reuse it.
    body = copy.deepcopy(cluster_body)
    kept = {
        "vsp-managed": "true",
        gcp_labels.PIPELINE_RUN: "run-monday",
        gcp_labels.LAST_RUN: "run-tuesday",
        gcp_labels.TEARDOWN: "keep",
        gcp_labels.EXPIRES_AT: "20991231t000000z",
    }
    body["labels"] = {**body["labels"], **kept}
    emulator_api.create_running(CLUSTER, body)
    before = len(emulator.journal())
    result = exit_task.finalize(
        client, REF, state=state, failure_keep_minutes=60.0, delete=resource(client).delete,
        backoff=FAST, pipeline_run="run-wednesday",
    )  # fmt: skip
    assert result.action == "none"
    assert result.reason == (
        "the run ended before it created or reused the cluster, which stays as its last run "
        "(run-tuesday) left it: labels and expiry unchanged"
    )
    assert [e["method"] for e in emulator.journal()[before:]] == ["GET"]
    labels = requests.get(emulator_api.clusters_url(CLUSTER)).json()["labels"]
    assert {k: labels[k] for k in kept} == kept


@pytest.mark.parametrize(
    "mark",
    [
        {gcp_labels.PIPELINE_RUN: "run-wednesday"},  # it created the cluster
        {gcp_labels.LAST_RUN: "run-wednesday"},  # it reused it
        {gcp_labels.lease_key("run-wednesday"): "20991231t000000z"},  # it holds a claim
    ],
)
def test_a_failed_run_that_used_the_cluster_keeps_it_for_a_retry(
    emulator_api, cluster_body, client, mark
):
    body = copy.deepcopy(cluster_body)
    body["labels"] = {**body["labels"], "vsp-managed": "true", **mark}
    emulator_api.create_running(CLUSTER, body)
    result = exit_task.finalize(
        client, REF, state="FAILED", failure_keep_minutes=60.0, delete=resource(client).delete,
        backoff=FAST, pipeline_run="run-wednesday",
    )  # fmt: skip
    assert result.action == "kept" and not result.in_use
    labels = requests.get(emulator_api.clusters_url(CLUSTER)).json()["labels"]
    assert labels[gcp_labels.TEARDOWN] == exit_task.RETRY_LABEL_VALUE
