"""Long-running operations: listed a page at a time, pruned after the retention period."""

from __future__ import annotations

import requests

from vsp.vertex_emulator import operations

RETENTION = 7 * 24 * 3600.0


def _operations(emulator_api, page_size):
    pages, token = [], ""
    while True:
        params = {"pageSize": page_size, **({"pageToken": token} if token else {})}
        answer = requests.get(emulator_api.url(f"{emulator_api.parent}/operations"), params=params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        pages.append([op["name"] for op in body.get("operations", [])])
        token = body.get("nextPageToken", "")
        if not token:
            return pages


def test_operations_are_listed_by_page(emulator, emulator_api, emulator_clock, cluster_body):
    names = []
    for cluster_id in ("c1", "c2", "c3"):
        created = emulator_api.create_cluster(cluster_id, cluster_body)
        assert created.status_code == 200, created.text
        names.append(created.json()["name"])
    pages = _operations(emulator_api, 2)
    assert [len(page) for page in pages] == [2, 1]
    assert [name for page in pages for name in page] == sorted(names)
    refused = requests.get(
        emulator_api.url(f"{emulator_api.parent}/operations"), params={"filter": "done=true"}
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "filter"


def test_finished_operations_are_pruned_after_the_retention(
    emulator, emulator_api, emulator_clock, cluster_body
):
    created = emulator_api.create_cluster("c1", cluster_body).json()["name"]
    pending = emulator.app.operations.create(
        parent=emulator_api.parent, kind="test.never", metadata={"@type": "t"}, due=None
    )["name"]
    emulator_clock.advance(1.0)
    finished = requests.get(emulator_api.url(created)).json()
    assert finished["done"] is True
    done_at = emulator.app.operations.record(created)["done_at"]
    emulator_clock.now = done_at + RETENTION - 1.0
    assert requests.get(emulator_api.url(created)).json() == finished
    emulator_clock.now = done_at + RETENTION
    gone = requests.get(emulator_api.url(created))
    assert gone.status_code == 404
    assert gone.json()["error"]["status"] == "NOT_FOUND"
    assert emulator.app.store.get("operations", created) is not None  # hidden, not yet swept
    emulator_clock.advance(operations.PRUNE_EVERY_SECONDS)
    assert requests.get(emulator_api.url(created)).status_code == 404
    assert emulator.app.store.get("operations", created) is None  # swept by the next sweep
    assert emulator.app.store.keys("operations_due") == []  # only pending ops with a due time
    assert requests.get(emulator_api.url(pending)).json()["done"] is False
    assert _operations(emulator_api, 10) == [[pending]]
    assert requests.get(emulator_api.clusters_url("c1")).json()["clusterStatus"]["state"] == (
        "RUNNING"
    )
