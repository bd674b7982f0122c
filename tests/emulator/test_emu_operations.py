"""Long-running operations: listed a page at a time, pruned after the retention period, waited
on (``:wait``) until done or the timeout."""

from __future__ import annotations

import threading
import time

import pytest
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


def _pending(emulator, emulator_api):
    return emulator.app.operations.create(
        parent=emulator_api.parent, kind="test.never", metadata={"@type": "t"}, due=None
    )["name"]


def _finish_later(emulator, name, seconds):
    def finish():
        time.sleep(seconds)
        emulator.app.operations.finish(name, at=emulator.app.now(), response={"@type": "t"})

    thread = threading.Thread(target=finish, daemon=True)
    thread.start()
    return thread


def test_wait_answers_when_the_operation_ends(emulator, emulator_api):
    name = _pending(emulator, emulator_api)
    finisher = _finish_later(emulator, name, 0.3)
    started = time.monotonic()
    answer = requests.post(emulator_api.url(f"{name}:wait"), json={"timeout": "20s"})
    took = time.monotonic() - started
    finisher.join()
    assert answer.status_code == 200, answer.text
    assert answer.json()["done"] is True
    assert answer.json()["response"] == {"@type": "t"}
    assert 0.25 <= took < 2.0


def test_wait_answers_the_pending_operation_after_its_timeout(emulator, emulator_api):
    name = _pending(emulator, emulator_api)
    started = time.monotonic()
    answer = requests.post(emulator_api.url(f"{name}:wait"), json={"timeout": "0.4s"})
    took = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    assert answer.json()["done"] is False and answer.json()["name"] == name
    assert 0.4 <= took < 2.0


def test_wait_takes_the_timeout_as_a_query_parameter_under_v1(emulator, emulator_api):
    name = _pending(emulator, emulator_api)
    v1 = emulator_api.url(name).replace("/v1beta1/", "/v1/") + ":wait"
    started = time.monotonic()
    answer = requests.post(v1, params={"timeout": "0.3s"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["done"] is False
    assert 0.3 <= time.monotonic() - started < 2.0
    in_body = requests.post(v1, json={"timeout": "0.3s"})
    assert in_body.status_code == 400
    assert in_body.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "timeout"


def test_wait_of_a_done_operation_answers_at_once(emulator, emulator_api):
    name = _pending(emulator, emulator_api)
    emulator.app.operations.finish(name, at=emulator.app.now(), response={"@type": "t"})
    started = time.monotonic()
    answer = requests.post(emulator_api.url(f"{name}:wait"), json={"timeout": "30s"})
    assert answer.json()["done"] is True
    assert time.monotonic() - started < 1.0


def test_wait_is_capped_by_the_service_timeout(emulator_factory, emulator_api_for):
    emulator = emulator_factory(operation_wait_cap_seconds=0.3)
    api = emulator_api_for(emulator)
    name = _pending(emulator, api)
    started = time.monotonic()
    answer = requests.post(api.url(f"{name}:wait"), json={})
    assert answer.json()["done"] is False
    assert 0.3 <= time.monotonic() - started < 2.0


@pytest.mark.parametrize("timeout", ["2", "-1s", "1.5m", "abc", "1.0000000001s"])
def test_wait_refuses_a_timeout_that_is_not_a_duration(emulator, emulator_api, timeout):
    name = _pending(emulator, emulator_api)
    answer = requests.post(emulator_api.url(f"{name}:wait"), json={"timeout": timeout})
    assert answer.status_code == 400
    assert answer.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "timeout"


def test_wait_of_an_unknown_operation_is_not_found(emulator, emulator_api):
    name = f"{emulator_api.parent}/operations/1234567890123456789"
    answer = requests.post(emulator_api.url(f"{name}:wait"), json={"timeout": "1s"})
    assert answer.status_code == 404


def test_wait_refuses_the_timeout_as_a_query_parameter_under_v1beta1(emulator, emulator_api):
    name = _pending(emulator, emulator_api)
    answer = requests.post(emulator_api.url(f"{name}:wait"), params={"timeout": "2s"}, json={})
    assert answer.status_code == 400
    violation = answer.json()["error"]["details"][0]["fieldViolations"][0]
    assert violation == {"field": "timeout", "description": "Under v1beta1 pass it in the body."}
