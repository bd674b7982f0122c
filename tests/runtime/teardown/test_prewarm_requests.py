"""Pre-warm requests: the file the decision writes, and the reaper that creates the cluster from
it (against the in-process Vertex emulator)."""

from __future__ import annotations

import copy
import dataclasses
import json
import logging

import pytest
import requests

from tests.runtime.teardown.prewarm_cases import (
    FAST,
    LOCATION,
    NOW,
    PARENT,
    PROJECT,
    TICK,
    intent_for,
    live_body,
    name,
    posts,
    utc,
    with_margin,
)
from vsp.components.runtime.cluster import ops, resource
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.core import errors, gcp_labels, rest
from vsp.components.runtime.steps import decide_teardown
from vsp.components.runtime.teardown import (
    decision,
    prewarm_intents,
    prewarm_reaper,
    reaper,
)


@pytest.fixture
def client(emulator) -> rest.VertexRestClient:
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


# ----- the request the decision writes -------------------------------------------------------


def test_a_request_round_trips_and_a_newer_one_replaces_it(tmp_path):
    intent = prewarm_intents.Intent(
        f"{PARENT}/modelDevelopmentClusters/c1", {"labels": {"team": "a"}}, TICK, 1.0, 2.0, 3.0,
        "run-7",
    )  # fmt: skip
    path = prewarm_intents.write(str(tmp_path), intent)
    expected = f"{PARENT}/modelDevelopmentClusters/c1".replace("/", "__") + ".prewarm.json"
    assert (
        path.name
        == expected
        == (
            "projects__test-project__locations__us-central1__modelDevelopmentClusters__c1"
            ".prewarm.json"
        )
    )
    newer = dataclasses.replace(intent, create_at=5.0)
    prewarm_intents.write(str(tmp_path), newer)
    assert prewarm_intents.read_all(str(tmp_path)) == [(path, newer)]
    assert json.loads(path.read_text())["version"] == 1


def test_an_unreadable_request_is_skipped_and_left_in_place(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(logging.getLogger("vsp"), "propagate", True)  # a step may have cut it
    bad = tmp_path / ("x" + prewarm_intents.SUFFIX)
    bad.write_text("{not json")
    assert prewarm_intents.read_all(str(tmp_path)) == []
    assert bad.exists() and "skipping unreadable pre-warm request" in caplog.text
    assert prewarm_intents.read_all(str(tmp_path / "missing")) == []


def test_a_margin_without_a_folder_is_refused_with_the_fix():
    with pytest.raises(errors.UserError) as caught:
        prewarm_intents.check_folder_given(5, "")
    assert "Fix: set prewarm_dir" in str(caught.value)
    prewarm_intents.check_folder_given(0, "")


# ----- against the emulator ------------------------------------------------------------------


def test_the_decision_records_the_clusters_spec_before_it_is_deleted(
    emulator_api, cluster_body, client, tmp_path
):
    emulator_api.create_running("warm1", live_body(cluster_body))
    ref = resource.ClusterRef(PROJECT, LOCATION, "warm1")
    chosen = decision.decide(with_margin(5))
    kept = decide_teardown.record_prewarm(client, ref, chosen, str(tmp_path), "run-9")
    assert kept is chosen
    [(_, intent)] = prewarm_intents.read_all(str(tmp_path))
    live = resource.ClusterResource(client, ref).get()
    expected = cluster_spec.ClusterSpec.from_api(live).to_request_body()
    expected["labels"] = {**cluster_body.get("labels", {}), "team": "vision"}
    assert intent.body == expected
    assert "name" not in intent.body and "createTime" not in intent.body
    assert (intent.cluster, intent.create_at, intent.decided_by) == (
        name("warm1"), utc(2026, 12, 5, 5, 30), "run-9",
    )  # fmt: skip


def test_a_cluster_already_gone_records_no_request(client, tmp_path):
    chosen = decision.decide(with_margin(5))
    ref = resource.ClusterRef(PROJECT, LOCATION, "gone1")
    plain = decide_teardown.record_prewarm(client, ref, chosen, str(tmp_path))
    assert plain.prewarm is None and "no pre-warm was recorded" in plain.reason
    assert prewarm_intents.read_all(str(tmp_path)) == []


def test_a_due_request_creates_the_cluster_with_an_expiry_and_is_removed(
    emulator, emulator_api, cluster_body, client, tmp_path
):
    now = NOW
    intent = intent_for("warm2", live_body(cluster_body), now)
    prewarm_intents.write(str(tmp_path), intent)
    report = reaper.reap_expired(
        client, PARENT, now=now, options=copy.deepcopy(FAST), prewarm_dir=str(tmp_path)
    )
    [entry] = report.prewarm
    assert entry.action == prewarm_reaper.PREWARMED
    [post] = posts(emulator)
    assert post["query"]["model_development_cluster_id"] in (["warm2"], "warm2")
    cluster = requests.get(emulator_api.clusters_url("warm2")).json()
    labels = cluster["labels"]
    assert labels["team"] == "vision"
    assert labels[gcp_labels.TEARDOWN] == "prewarmed"
    assert labels[gcp_labels.EXPIRES_AT] == gcp_labels.format_label_time(now + 7200)
    assert labels[gcp_labels.MANAGED] == "true"
    assert gcp_labels.PIPELINE_RUN not in labels
    assert prewarm_intents.read_all(str(tmp_path)) == []
    assert report.summary().endswith("pre-warm requests: 1 pre-warmed")


def test_the_next_runs_create_step_reuses_the_pre_warmed_cluster(
    emulator, emulator_api, cluster_body, client, tmp_path
):
    body = live_body(cluster_body)
    prewarm_intents.write(str(tmp_path), intent_for("warm3", body, NOW))
    prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW)
    ref = resource.ClusterRef(PROJECT, LOCATION, "warm3")
    manager = ops.ClusterManager(resource.ClusterResource(client, ref, options=copy.deepcopy(FAST)))
    users = copy.deepcopy(cluster_body)  # the run's own spec: no vsp- labels
    users["labels"] = {**users.get("labels", {}), "team": "vision"}
    desired = cluster_spec.ClusterSpec.from_api(users)
    result = manager.ensure(desired, {gcp_labels.PIPELINE_RUN: "run-2"})
    assert result.action == "reused"
    assert len(posts(emulator)) == 1  # the reaper's create, none from the run


@pytest.mark.parametrize(
    ("changes", "action", "why"),
    [
        ({"create_at": NOW + 60}, prewarm_reaper.WAITING, "due at"),
        ({"expires_at": NOW - 1}, prewarm_reaper.DROPPED, "did not come"),
    ],
)
def test_a_request_not_due_or_past_its_run_creates_nothing(
    emulator, cluster_body, client, tmp_path, changes, action, why
):
    prewarm_intents.write(
        str(tmp_path), intent_for("warm4", live_body(cluster_body), NOW, **changes)
    )
    [entry] = prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW)
    assert entry.action == action and why in entry.reason
    assert posts(emulator) == []
    assert bool(prewarm_intents.read_all(str(tmp_path))) == (action == prewarm_reaper.WAITING)


def test_an_existing_cluster_drops_the_request_without_a_create(
    emulator, emulator_api, cluster_body, client, tmp_path
):
    emulator_api.create_running("warm5", live_body(cluster_body))
    created = len(posts(emulator))
    prewarm_intents.write(str(tmp_path), intent_for("warm5", live_body(cluster_body), NOW))
    [entry] = prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW)
    assert (entry.action, entry.reason) == (prewarm_reaper.DROPPED, "the cluster exists (RUNNING)")
    assert len(posts(emulator)) == created
    assert prewarm_intents.read_all(str(tmp_path)) == []


def test_a_dry_run_sends_no_create_and_keeps_the_request(emulator, cluster_body, client, tmp_path):
    prewarm_intents.write(str(tmp_path), intent_for("warm6", live_body(cluster_body), NOW))
    [entry] = prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW, dry_run=True)
    assert entry.action == prewarm_reaper.WOULD_CREATE
    assert posts(emulator) == [] and len(prewarm_intents.read_all(str(tmp_path))) == 1


def test_a_create_without_an_answer_keeps_the_request_for_a_read_first(
    emulator, cluster_body, client, tmp_path, monkeypatch
):
    prewarm_intents.write(str(tmp_path), intent_for("warm7", live_body(cluster_body), NOW))

    def lost(*_args, **_kwargs):
        raise errors.TransientError("connection reset")

    monkeypatch.setattr(client, "post", lost)
    [entry] = prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW)
    assert entry.action == prewarm_reaper.WAITING and "read again" in entry.reason
    assert len(prewarm_intents.read_all(str(tmp_path))) == 1


def test_requests_of_another_location_are_left_alone(emulator, cluster_body, client, tmp_path):
    other = intent_for("warm8", live_body(cluster_body), NOW)
    other = dataclasses.replace(other, cluster=other.cluster.replace(LOCATION, "europe-west4"))
    prewarm_intents.write(str(tmp_path), other)
    assert prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW) == []
    assert posts(emulator) == [] and len(prewarm_intents.read_all(str(tmp_path))) == 1
