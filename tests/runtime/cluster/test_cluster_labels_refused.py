"""Label PATCHes are USER_ONLY, and a service that refuses the ``labels`` mask is handled.

``labels`` is not in the manage-cluster doc's list of updatable fields, so the emulator's
``cluster_labels_updatable`` false plays a service that refuses it: the label update raises
``LabelsRefusedError``, the keep path deletes the cluster instead, and a reuse goes on.
"""

from __future__ import annotations

import copy
import logging

import pytest
import requests

from vsp.components.runtime.cluster import builder, labels, ops, resource
from vsp.components.runtime.core import errors, polling, rest
from vsp.components.runtime.steps import create_cluster, delete_cluster
from vsp.components.runtime.teardown import in_use

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "kept"
PATH = f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/modelDevelopmentClusters/{CLUSTER}"
REF = resource.ClusterRef(PROJECT, LOCATION, CLUSTER)
BASE = {"team": "ml", "vsp-managed": "true"}
DECISION = {"vsp-teardown": "keep", "vsp-expires-at": "20300101t000000z"}
FAST = resource.ClusterOptions(
    timeout=30, backoff=polling.Backoff(initial=0.05, maximum=0.2, jitter=0)
)
FLAT = {
    "project": PROJECT,
    "cluster_id": CLUSTER,
    "zone": "us-central1-b",
    "home_directory_storage": f"projects/{PROJECT}/locations/us-central1-b/instances/home",
    "machine_type": "n2-standard-8",
    "spot_max_nodes": 1,
}
REFUSED_FIX = (
    "Fix: delete the cluster instead of keeping it (as cluster_in_use.keep_or_delete does), or "
    "set the teardown policy to delete."
)


@pytest.fixture
def client(emulator) -> rest.VertexRestClient:
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


def options() -> resource.ClusterOptions:
    return copy.deepcopy(FAST)


def existing(emulator_api, cluster_body) -> dict:
    cluster_body["labels"] = dict(BASE)
    return emulator_api.create_running(CLUSTER, cluster_body)


def writes(emulator) -> list[tuple[str, dict]]:
    return [
        (e["method"], e["query"]) for e in emulator.journal() if e["method"] in ("PATCH", "DELETE")
    ]


def test_label_patch_is_user_only_and_recorded_so(emulator, emulator_api, cluster_body, client):
    existing(emulator_api, cluster_body)
    labels.mark_kept(client, REF, DECISION, options=options())
    assert writes(emulator) == [("PATCH", {"updateMask": "labels", "updateMode": "USER_ONLY"})]
    record = emulator.app.store.get("clusters", REF.name)
    assert record["update_mode"] == "USER_ONLY"


def test_refused_labels_mask_raises_the_distinct_error_naming_the_fix(
    emulator, emulator_api, cluster_body, client
):
    existing(emulator_api, cluster_body)
    emulator.update_settings(cluster_labels_updatable=False)
    with pytest.raises(labels.LabelsRefusedError) as info:
        labels.mark_kept(client, REF, DECISION, options=options())
    assert isinstance(info.value, errors.UserError)
    message = str(info.value)
    assert f"refused to update the labels of cluster {REF.name}" in message
    assert 'update_mask: "labels" cannot be updated.' in message
    assert message.endswith(REFUSED_FIX)
    assert writes(emulator) == [("PATCH", {"updateMask": "labels", "updateMode": "USER_ONLY"})]
    assert requests.get(emulator_api.clusters_url(CLUSTER)).json()["labels"] == BASE


def test_refusal_as_a_failed_operation_is_recognised(emulator, emulator_api, cluster_body, client):
    existing(emulator_api, cluster_body)
    message = "Field labels is not updatable."
    emulator.add_fault(action="lro_error", method="PATCH", path=f"{PATH}$", code=3, message=message)
    with pytest.raises(labels.LabelsRefusedError, match="Field labels is not updatable"):
        labels.mark_kept(client, REF, DECISION, options=options())


def test_other_invalid_arguments_are_not_a_labels_refusal(
    emulator, emulator_api, cluster_body, client
):
    existing(emulator_api, cluster_body)
    emulator.add_fault(
        action="status", method="PATCH", path=f"{PATH}$", http_status=400, message="Bad request."
    )
    with pytest.raises(errors.InvalidArgumentError) as info:
        labels.mark_kept(client, REF, DECISION, options=options())
    assert not isinstance(info.value, labels.LabelsRefusedError)


@pytest.mark.parametrize(
    ("error", "refused"),
    [
        (errors.InvalidArgumentError("x", status="INVALID_ARGUMENT", details=[
            {"fieldViolations": [{"field": "update_mask", "description": "bad path"}]}
        ]), True),
        (errors.InvalidArgumentError("updateMask contains an unsupported path",
                                     status="INVALID_ARGUMENT"), True),
        (errors.InvalidArgumentError("labels busy", status="FAILED_PRECONDITION"), False),
        (errors.InvalidArgumentError("display_name too long", status="INVALID_ARGUMENT"), False),
        (errors.RejectedOperationError("operations/1", 3, "labels: immutable"), True),
        (errors.RejectedOperationError("operations/1", 9, "labels: not now"), False),
        (errors.UnavailableError("labels", status="UNAVAILABLE"), False),
    ],
)  # fmt: skip
def test_labels_refused_reads_both_readings_of_the_answer(error, refused):
    assert labels.labels_refused(error) is refused


def test_keep_or_delete_keeps_when_labels_are_accepted(
    emulator, emulator_api, cluster_body, client
):
    existing(emulator_api, cluster_body)
    assert in_use.keep_or_delete(client, REF, DECISION, options=options()) == "kept"
    assert requests.get(emulator_api.clusters_url(CLUSTER)).json()["labels"] == {
        **BASE,
        **DECISION,
    }


def test_keep_or_delete_deletes_when_labels_are_refused(
    emulator, emulator_api, cluster_body, client, caplog
):
    existing(emulator_api, cluster_body)
    emulator.update_settings(cluster_labels_updatable=False)
    caplog.set_level(logging.WARNING, "vsp.components.runtime.teardown.in_use")
    assert in_use.keep_or_delete(client, REF, DECISION, options=options()) == "deleted"
    assert [m for m, _ in writes(emulator)] == ["PATCH", "DELETE"]
    assert requests.get(emulator_api.clusters_url(CLUSTER)).status_code == 404
    (warning,) = [r.getMessage() for r in caplog.records if "cannot be kept" in r.getMessage()]
    assert warning.startswith(f"cluster {CLUSTER} cannot be kept, so it is deleted: ")
    assert 'update_mask: "labels" cannot be updated.' in warning


def test_keep_or_delete_uses_the_given_delete_and_reports_absent(
    emulator, emulator_api, cluster_body, client
):
    assert in_use.keep_or_delete(client, REF, DECISION, options=options()) == "absent"
    existing(emulator_api, cluster_body)
    emulator.update_settings(cluster_labels_updatable=False)
    deleted = []
    result = in_use.keep_or_delete(
        client, REF, DECISION, delete=lambda: deleted.append(1) or True, options=options()
    )
    assert (result, deleted) == ("deleted", [1])


def test_a_labels_only_spec_change_is_patched_user_only(emulator, tmp_path):
    spec = builder.build_cluster_spec(**FLAT)
    manager = ops.ClusterManager(
        resource.ClusterResource(rest.VertexRestClient(LOCATION), REF, options=options())
    )
    manager.ensure(spec, {"vsp-managed": "true"})
    relabelled = builder.build_cluster_spec(**FLAT, labels={"team": "infra"})
    assert manager.ensure(relabelled, {"vsp-managed": "true"}).update_mask == ["labels"]
    assert writes(emulator) == [("PATCH", {"updateMask": "labels", "updateMode": "USER_ONLY"})]
    emulator.update_settings(cluster_labels_updatable=False)
    again = builder.build_cluster_spec(**FLAT, labels={"team": "ops"})
    with pytest.raises(labels.LabelsRefusedError, match="Fix: leave the cluster's labels"):
        manager.ensure(again, {"vsp-managed": "true"})
    assert ops.update_mode(["labels", "node_pools"]) == "USER_AND_SERVICE"


def test_a_reuse_goes_on_when_the_claim_is_refused(emulator, caplog):
    def create(run: str):
        return create_cluster.create_cluster(
            project=PROJECT,
            location=LOCATION,
            cluster_id=CLUSTER,
            cluster_spec=None,
            spec_params=FLAT,
            pipeline_run=run,
            options=options(),
        )

    assert create("run-1").action == "created"
    emulator.update_settings(cluster_labels_updatable=False)
    caplog.set_level(logging.WARNING, "vsp.components.runtime.steps.create_cluster")
    result = create("run-2")
    assert (result.action, result.reused) == ("reused", True)
    assert any("reused without recording this run" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("timeout", ["abc", -1, float("nan"), True])
def test_a_bad_timeout_is_refused_before_any_request(emulator, timeout):
    with pytest.raises(errors.UserError, match="timeout_seconds = .*must be a number of seconds"):
        create_cluster.create_cluster(
            project=PROJECT, location=LOCATION, cluster_id=CLUSTER, cluster_spec=None,
            spec_params=FLAT, timeout_seconds=timeout, options=options(),
        )  # fmt: skip
    with pytest.raises(errors.UserError, match="timeout_seconds"):
        delete_cluster.delete_cluster(
            project=PROJECT, location=LOCATION, cluster_id=CLUSTER, timeout_seconds=timeout
        )
    assert emulator.journal() == []
