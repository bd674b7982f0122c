"""The runtime reads every page of the lists it uses: an item on a later page is found."""

from __future__ import annotations

import pytest

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import rest
from vsp.components.runtime.training.backends import custom_job

PROJECT, LOCATION = "test-project", "us-central1"
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"


@pytest.fixture
def one_per_page(emulator_factory):
    """An emulator whose lists answer one item per page whatever ``pageSize`` asks."""
    return emulator_factory(max_page_size=1)


def _client() -> rest.VertexRestClient:
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


def _list_calls(emulator, suffix: str) -> list[str | None]:
    return [
        (entry["query"] or {}).get("pageToken")
        for entry in emulator.journal()
        if entry["method"] == "GET" and entry["path"].endswith(suffix)
    ]


def test_clusters_on_later_pages_are_listed(one_per_page, emulator_api_for, cluster_body):
    api = emulator_api_for(one_per_page)
    for cluster_id in ("c3", "c1", "c2"):
        assert api.create_cluster(cluster_id, cluster_body).status_code == 200
    names = [c["name"] for c in resource.list_clusters(_client(), PARENT)]
    assert names == [f"{PARENT}/modelDevelopmentClusters/{c}" for c in ("c1", "c2", "c3")]
    tokens = _list_calls(one_per_page, "/modelDevelopmentClusters")
    assert len(tokens) == 3 and tokens[0] is None and None not in tokens[1:]


def test_custom_jobs_on_later_pages_are_found(one_per_page):
    for number, run in ((1, "other"), (2, "other"), (3, "mine")):
        name = f"{PARENT}/customJobs/{number}"
        job = {"name": name, "state": "JOB_STATE_SUCCEEDED", "labels": {"vsp-run": run}}
        one_per_page.app.store.put("custom_jobs", name, {"id": number, "job": job})
    found = custom_job.labelled_jobs(_client(), PARENT, "vsp-run", "other")
    assert [j["name"] for j in found] == [f"{PARENT}/customJobs/1", f"{PARENT}/customJobs/2"]
    assert len(_list_calls(one_per_page, "/customJobs")) == 2
