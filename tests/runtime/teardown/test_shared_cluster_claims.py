"""Claims on a shared cluster: the race where B reuses the cluster and A deletes it before B's
first Slurm job exists.

Before, the in-use check counted Slurm jobs only: A's delete went through, and B's first Slurm
call met a STOPPING cluster and failed. Now B's reuse records a claim (a ``vsp-lease-*`` label)
before ``create_cluster`` returns, and every teardown honours another run's live claim.
"""

from __future__ import annotations

import logging
import sys
import time

import pytest

from tests.conftest import DATA, LOCATION, PROJECT
from vsp.components.runtime.cluster import claims, resource, rules
from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.core import gcp_labels, polling, rest
from vsp.components.runtime.steps import (
    create_cluster,
    delete_cluster,
    keep_cluster,
    train_on_cluster,
)
from vsp.components.runtime.teardown import exit_task, in_use, reaper, shrink
from vsp.components.runtime.training.backends import slurm

CLUSTER = "shared"
REF = resource.ClusterRef(PROJECT, LOCATION, CLUSTER)
TRAINER = [sys.executable, "-m", "vsp.examples.trainer", "--steps", "5", "--samples", "64"]


def _spec() -> dict:
    body = rules.load_cluster_spec(DATA / "cluster_full.yaml").to_request_body()
    body["orchestratorSpec"]["slurmSpec"]["prologBashScripts"] = ["#!/bin/bash\ntrue\n"]
    return body


@pytest.fixture
def warm(slurm_cluster):
    """A's warm cluster: created by run A, kept with an expiry (as keep_cluster leaves it)."""
    labels = {"vsp-managed": "true", "vsp-pipeline-run": "run-a", "vsp-teardown": "keep"}
    return slurm_cluster(CLUSTER, labels={**labels, "vsp-expires-at": "20991231t000000z"})


def _reuse_as_b():
    return create_cluster.create_cluster(
        project=PROJECT,
        location=LOCATION,
        cluster_id=CLUSTER,
        cluster_spec=_spec(),
        spec_params={},
        pipeline_run="run-b",
    )


def _train_as_b(work):
    return train_on_cluster.train_on_cluster(
        project=PROJECT,
        location=LOCATION,
        cluster_id=CLUSTER,
        training=slurm.SlurmTraining(
            command=TRAINER,
            working_directory=str(work),
            checkpoint_dir=str(work / "ckpt"),
            model_dir=str(work / "model"),
            account="ml",
        ),  # fmt: skip
        spot_partition="spot",
        pipeline_run="run-b",
        poll_backoff=polling.Backoff(initial=0.1, maximum=0.2, jitter=0),
        timeout_seconds=120,
    )


def _cluster():
    return resource.ClusterResource(rest.VertexRestClient(LOCATION), REF).get()


@pytest.mark.slow  # jobs on the emulator across two runs: seconds each
def test_a_deletes_after_b_reused_the_cluster_it_is_kept_and_b_trains(warm, tmp_path, caplog):
    reused = _reuse_as_b()
    assert reused.reused
    lease = gcp_labels.lease_key("run-b")
    assert lease in _cluster()["labels"]  # B's claim is recorded before create returns

    # A's teardown decided to delete, before B submitted anything.
    with caplog.at_level(logging.WARNING):
        deleted = delete_cluster.delete_cluster(
            project=PROJECT, location=LOCATION, cluster_id=CLUSTER, pipeline_run="run-a"
        )
    assert deleted is False
    assert f"not deleting cluster {CLUSTER}: in use by claim {lease} of another run until" in (
        caplog.text
    )
    labels = _cluster()["labels"]
    assert labels["vsp-teardown"] == "in-use" and labels[lease]

    # B trains on the cluster that survived.
    work = tmp_path / "b"
    outcome = _train_as_b(work)
    assert len(outcome.result.job_ids) == 1
    assert (work / "model" / "model.npz").is_file()

    # B's own teardown does not count B's claim: it deletes.
    assert delete_cluster.delete_cluster(
        project=PROJECT, location=LOCATION, cluster_id=CLUSTER, pipeline_run="run-b"
    )


@pytest.mark.slow  # jobs on the emulator across two runs: seconds each
def test_the_reaper_and_a_shrink_honour_a_live_claim(warm, caplog):
    _reuse_as_b()
    lease = gcp_labels.lease_key("run-b")
    client, ref = rest.VertexRestClient(LOCATION), REF
    with caplog.at_level(logging.WARNING):
        action = shrink.shrink_or_delete(
            client, ref, {"vsp-teardown": "shrink", "vsp-expires-at": "20991231t000000z"},
            pipeline_run="run-a",
        )  # fmt: skip
    assert action == shrink.KEPT_WHOLE
    assert f"kept whole, not shrunk: in use by claim {lease}" in caplog.text
    # At full size it carries the in-use expiry, not the long one priced for a shrunk cluster.
    labels = _cluster()["labels"]
    assert labels["vsp-teardown"] == "in-use"
    expires = gcp_labels.parse_label_time(labels["vsp-expires-at"])
    assert 29 * 60 <= expires - time.time() <= 31 * 60
    assert labels[lease]  # B's claim stays: B is still using the cluster
    # An expired cluster with B's live claim: the reaper keeps it.
    cluster_labels.update_managed_labels(
        client, ref, set_labels={"vsp-expires-at": "20000101t000000z"}
    )
    report = reaper.reap_expired(client, f"projects/{PROJECT}/locations/{LOCATION}")
    assert list(report.kept) == [ref.name]
    assert f"in use by claim {lease}" in report.kept[ref.name]
    assert report.deleted == []


def test_a_claim_past_its_expiry_keeps_nothing(warm):
    _reuse_as_b()
    cluster = _cluster()
    lease = gcp_labels.lease_key("run-b")

    expires = gcp_labels.parse_label_time(cluster["labels"][lease])
    assert [c.key for c in in_use.foreign_leases(cluster, "run-a", now=expires - 1)] == [lease]
    assert in_use.foreign_leases(cluster, "run-a", now=expires + 1) == []
    assert in_use.foreign_leases(cluster, "run-b", now=expires - 1) == []


def test_the_window_left_is_one_read_to_the_delete(warm):
    """What remains: a claim that lands between A's read of the cluster and A's DELETE is
    lost with the cluster. The reads are the last requests before the DELETE, nothing between."""
    before = len(warm.journal())
    assert delete_cluster.delete_cluster(
        project=PROJECT, location=LOCATION, cluster_id=CLUSTER, pipeline_run="run-a"
    )
    entries = warm.journal()[before:]
    calls = [(e["method"], e["path"].rsplit("/", 1)[-1]) for e in entries]
    delete_at = calls.index(("DELETE", CLUSTER))
    assert calls[:delete_at] == [
        ("GET", CLUSTER),  # the labels: the claims
        ("POST", f"{CLUSTER}:callSlurmRestApi"),  # the live queue: the jobs
        ("GET", CLUSTER),  # the delete's own look-up
    ]


@pytest.mark.slow  # scaling on the emulator: seconds
def test_a_shrink_ends_its_own_claim_so_the_next_runs_shrink_goes_through(warm):
    # B reused the cluster and ends within its claim's 15 minutes: its shrink removes its own
    # claim, so the next run's teardown does not take B for a run still using the cluster.
    _reuse_as_b()
    lease = gcp_labels.lease_key("run-b")
    client, ref = rest.VertexRestClient(LOCATION), REF
    decision = {"vsp-teardown": "shrink", "vsp-expires-at": "20991231t000000z"}
    assert shrink.shrink_or_delete(client, ref, decision, pipeline_run="run-b") == shrink.SHRUNK
    assert lease not in _cluster()["labels"]
    assert _cluster()["labels"]["vsp-teardown"] == "shrink"


def _reuse_then_delete_as_c():
    """Run C, right after: reuses the cluster, decides delete, and the cluster is gone."""
    create_cluster.create_cluster(
        project=PROJECT, location=LOCATION, cluster_id=CLUSTER, cluster_spec=_spec(),
        spec_params={}, pipeline_run="run-c",
    )  # fmt: skip
    assert delete_cluster.delete_cluster(
        project=PROJECT, location=LOCATION, cluster_id=CLUSTER, pipeline_run="run-c",
        timeout_seconds=60,
    )  # fmt: skip
    assert _cluster() is None


def test_a_keep_ends_its_own_claim_so_the_next_runs_delete_goes_through(warm):
    # B reused the cluster and kept it: C, right after, reuses it with teardown_policy=delete.
    # B's claim ended with its keep, so C's delete is not held up by a run that is done.
    _reuse_as_b()
    lease_b = gcp_labels.lease_key("run-b")
    client = rest.VertexRestClient(LOCATION)
    decision = {"vsp-teardown": "keep", "vsp-expires-at": "20991231t000000z"}
    assert keep_cluster.keep(client, REF, decision, pipeline_run="run-b") is True
    labels = _cluster()["labels"]
    assert lease_b not in labels
    assert (labels["vsp-teardown"], labels["vsp-expires-at"]) == ("keep", "20991231t000000z")
    _reuse_then_delete_as_c()


def test_a_failed_runs_exit_task_ends_its_claim_as_it_keeps_the_cluster_for_a_retry(warm):
    # B reused the cluster and failed: its exit task keeps the cluster for a retry. C, right
    # after, decides delete; B's claim no longer holds C's delete up for 15 minutes.
    _reuse_as_b()
    client = rest.VertexRestClient(LOCATION)

    def delete() -> bool:
        return delete_cluster.delete_cluster(
            project=PROJECT, location=LOCATION, cluster_id=CLUSTER, pipeline_run="run-b",
            timeout_seconds=60, client=client,
        )  # fmt: skip

    result = exit_task.finalize(
        client, REF, state="FAILED", failure_keep_minutes=60, delete=delete,
        pipeline_run="run-b",
    )  # fmt: skip
    assert result.action == "kept"
    labels = _cluster()["labels"]
    assert gcp_labels.lease_key("run-b") not in labels
    assert labels["vsp-teardown"] == exit_task.RETRY_LABEL_VALUE
    _reuse_then_delete_as_c()


def test_a_created_cluster_carries_its_creators_claim(emulator, caplog):
    """B creates the cluster; A, which reused it meanwhile, deletes it before B's first job."""
    created = _reuse_as_b()
    assert created.action == "created"
    _assert_b_holds_a_fresh_claim_that_keeps_it_from_a(caplog)
    assert _cluster()["labels"]["vsp-teardown"] == "in-use"


@pytest.mark.slow  # a job on the emulator: seconds
def test_a_training_step_claims_the_cluster_again_for_the_runs_next_step(warm, tmp_path, caplog):
    """Between B's two training steps no job of B protects the cluster: B's claim does.

    Before, B's claim dated from its create_cluster, long expired after hours of training, and
    A's exit task deleted the cluster under B's next step.
    """
    _reuse_as_b()
    lease = gcp_labels.lease_key("run-b")
    client = rest.VertexRestClient(LOCATION)
    # Hours of training later: the claim from create_cluster has expired.
    cluster_labels.update_managed_labels(client, REF, set_labels={lease: "20000101t000000z"})
    _train_as_b(tmp_path / "b")
    _assert_b_holds_a_fresh_claim_that_keeps_it_from_a(caplog)


def _assert_b_holds_a_fresh_claim_that_keeps_it_from_a(caplog):
    lease = gcp_labels.lease_key("run-b")
    expires = gcp_labels.parse_label_time(_cluster()["labels"][lease])
    assert time.time() + 14 * 60 < expires <= time.time() + 15 * 60
    with caplog.at_level(logging.WARNING):
        deleted = delete_cluster.delete_cluster(
            project=PROJECT, location=LOCATION, cluster_id=CLUSTER, pipeline_run="run-a"
        )
    assert deleted is False
    assert f"in use by claim {lease} of another run until" in caplog.text


def test_a_create_that_took_long_renews_the_claim_it_was_sent_with():
    labels = create_cluster.managed_labels("run-b")
    lease = gcp_labels.lease_key("run-b")
    assert time.time() + 14 * 60 < gcp_labels.parse_label_time(labels[lease])
    fresh = {"labels": labels}
    short = {"labels": {lease: gcp_labels.format_label_time(time.time() + 5 * 60)}}
    assert not claims.claim_runs_short(fresh, "run-b")
    assert claims.claim_runs_short(short, "run-b")  # provisioning took 10 minutes
    assert claims.claim_runs_short({"labels": {}}, "run-b")  # re-attached, no claim
    assert not claims.claim_runs_short({"labels": {}}, "")  # no run: no claim
