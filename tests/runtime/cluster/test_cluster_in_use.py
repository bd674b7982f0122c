"""In-use protection: a teardown never deletes a cluster another run is training on."""

from __future__ import annotations

import pathlib
import sys
import time

import pytest

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import errors, gcp_labels, rest
from vsp.components.runtime.slurm import api, script
from vsp.components.runtime.steps import delete_cluster
from vsp.components.runtime.teardown import in_use, reaper

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "shared"
REF = resource.ClusterRef(PROJECT, LOCATION, CLUSTER)
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"
ANY_ID = (
    "pass the cluster's id: 1-10 lowercase letters and digits, starting with a letter, as "
    "create_cluster was given it."
)


@pytest.fixture
def cluster(slurm_cluster):
    return slurm_cluster(CLUSTER, labels={"vsp-managed": "true"})


def _start_job(tmp_path, pipeline_run: str, seconds: float = 60) -> int:
    """A job of another run's training, as ``train_on_cluster`` submits it."""
    client = api.SlurmClient(rest.VertexRestClient(LOCATION), REF)
    job_id = client.submit(
        script.JobDescription(
            run_key=f"vsp-{pipeline_run}-train",
            partition="spot",
            working_directory=str(tmp_path),
            command=[sys.executable, "-c", f"import time; time.sleep({seconds})"],
            account="ml",
            pipeline_run=pipeline_run,
        )
    )
    deadline = time.monotonic() + 10
    while client.get_job(job_id).base_state != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return job_id


def _cluster_writes(server):
    return [
        (e["method"], e["path"].rsplit("/", 1)[-1])
        for e in server.journal()
        if e["method"] in ("PATCH", "DELETE")
    ]


def _labels(server):
    return rest.VertexRestClient(LOCATION).get(REF.path)["labels"]


def _delete(pipeline_run):
    return delete_cluster.delete_cluster(
        project=PROJECT, location=LOCATION, cluster_id=CLUSTER, pipeline_run=pipeline_run,
        timeout_seconds=60,
    )  # fmt: skip


@pytest.mark.slow
def test_run_b_does_not_delete_the_cluster_run_a_trains_on(cluster, tmp_path):
    job = _start_job(tmp_path, "run-a")
    before = len(cluster.journal())
    assert _delete("run-b") is False
    entries = cluster.journal()[before:]
    queue_reads = [e for e in entries if (e.get("body") or {}).get("path", "").endswith("/jobs")]
    assert len(queue_reads) == 1  # the live queue, read right before the decision
    assert _cluster_writes(cluster) == [("PATCH", CLUSTER)]  # labels only, no DELETE
    labels = _labels(cluster)
    assert labels[gcp_labels.TEARDOWN] == in_use.IN_USE
    expires = gcp_labels.parse_label_time(labels[gcp_labels.EXPIRES_AT])
    assert 29 * 60 < expires - time.time() <= 30 * 60
    client = api.SlurmClient(rest.VertexRestClient(LOCATION), REF)
    assert client.get_job(job).base_state == "RUNNING"


@pytest.mark.slow
def test_a_run_deletes_the_cluster_when_only_its_own_jobs_are_there(cluster, tmp_path):
    _start_job(tmp_path, "run-a")
    assert _delete("run-a") is True
    assert ("DELETE", CLUSTER) in _cluster_writes(cluster)


@pytest.mark.slow
def test_finished_jobs_of_other_runs_do_not_block_the_delete(cluster, tmp_path):
    job = _start_job(tmp_path, "run-a", seconds=0.2)
    client = api.SlurmClient(rest.VertexRestClient(LOCATION), REF)
    deadline = time.monotonic() + 10
    while not client.get_job(job).is_terminal:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert _delete("run-b") is True


@pytest.mark.slow
def test_the_reaper_keeps_an_expired_cluster_in_use_and_deletes_it_once_idle(cluster, tmp_path):
    job = _start_job(tmp_path, "run-a")
    client = rest.VertexRestClient(LOCATION)
    past = {gcp_labels.TEARDOWN: "keep", gcp_labels.EXPIRES_AT: "20200101t000000z"}
    from vsp.components.runtime.cluster import labels as cluster_labels  # noqa: PLC0415

    cluster_labels.update_managed_labels(client, REF, set_labels=past)
    report = reaper.reap_expired(client, PARENT, delete_timeout=60)
    [entry] = report.entries
    assert entry.action == reaper.KEPT
    assert f"in use by job {job} (RUNNING" in entry.reason and "run run-a" in entry.reason
    assert ("DELETE", CLUSTER) not in _cluster_writes(cluster)
    assert _labels(cluster)[gcp_labels.TEARDOWN] == in_use.IN_USE
    api.SlurmClient(client, REF).cancel(job)
    deadline = time.monotonic() + 10
    while not api.SlurmClient(client, REF).get_job(job).is_terminal:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    later = time.time() + 3600  # past the in-use expiry
    [entry] = reaper.reap_expired(client, PARENT, now=later, delete_timeout=60).entries
    assert entry.action == reaper.DELETED


@pytest.mark.parametrize(
    ("cluster_id", "fix"),
    [
        (
            f"{PARENT}/modelDevelopmentClusters/{CLUSTER}",
            f"pass the id alone, '{CLUSTER}' (the last part of the cluster's name).",
        ),
        ("", ANY_ID),
        (CLUSTER.upper(), ANY_ID),
    ],
)
def test_an_id_no_cluster_can_have_is_refused_before_any_request(cluster, cluster_id, fix):
    """Not "nothing to delete": the cluster meant would keep running."""
    before = len(cluster.journal())
    with pytest.raises(errors.UserError) as caught:
        delete_cluster.delete_cluster(
            project=PROJECT, location=LOCATION, cluster_id=cluster_id, timeout_seconds=60
        )
    assert str(caught.value) == f"cluster_id {cluster_id!r} is not a cluster id. Fix: {fix}"
    assert cluster.journal()[before:] == []
    assert rest.VertexRestClient(LOCATION).get(REF.path)["name"].endswith(f"/{CLUSTER}")


def test_a_missing_cluster_is_nothing_to_delete_and_says_so(emulator, caplog):
    caplog.set_level("INFO")
    assert (
        delete_cluster.delete_cluster(
            project=PROJECT, location=LOCATION, cluster_id="gone", timeout_seconds=60
        )
        is False
    )
    assert f"cluster gone does not exist in {PARENT}: nothing to delete" in caplog.messages


@pytest.mark.parametrize("minutes", [-5.0, 0, 0.5, 20000.0, True])
def test_a_recheck_time_out_of_range_is_refused_before_any_request(emulator, minutes):
    with pytest.raises(errors.UserError, match=r"in_use_recheck_minutes = .*: not between 1"):
        delete_cluster.delete_cluster(
            project=PROJECT, location=LOCATION, cluster_id=CLUSTER, timeout_seconds=60,
            recheck_minutes=minutes,
        )  # fmt: skip
    assert emulator.journal() == []
