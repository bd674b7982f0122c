"""The request journal: exact lines, no control calls, concurrent appends, torn lines."""

from __future__ import annotations

import concurrent.futures
import re

import requests

from vsp.vertex_emulator import journal

CLUSTERS_PATH = "/v1beta1/projects/test-project/locations/us-central1/modelDevelopmentClusters"


def without_time(entries: list[dict]) -> list[dict]:
    for entry in entries:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", entry["time"])
    return [{k: v for k, v in e.items() if k != "time"} for e in entries]


def test_journal_lines_are_exact(emulator, emulator_api, cluster_body):
    emulator_api.create_cluster("c1", cluster_body)
    requests.get(emulator_api.clusters_url(), params={"pageSize": "2", "filter": ["a", "b"]})
    requests.post(emulator_api.clusters_url(), data="{oops")
    rule = emulator.add_fault(action="status", http_status=503, method="DELETE")
    requests.delete(emulator_api.clusters_url("c1"))
    requests.get(f"{emulator.base_url}/emulator/v1/health")
    assert without_time(emulator.journal()) == [
        {
            "method": "POST",
            "path": CLUSTERS_PATH,
            "query": {"model_development_cluster_id": "c1"},
            "body": cluster_body,
            "status": 200,
            "fault": None,
        },
        {
            "method": "GET",
            "path": CLUSTERS_PATH,
            "query": {"pageSize": "2", "filter": ["a", "b"]},
            "body": None,
            "status": 200,
            "fault": None,
        },
        {
            "method": "POST",
            "path": CLUSTERS_PATH,
            "query": {},
            "body": None,
            "status": 400,
            "fault": None,
        },
        {
            "method": "DELETE",
            "path": f"{CLUSTERS_PATH}/c1",
            "query": {},
            "body": None,
            "status": 503,
            "fault": rule.id,
        },
    ]


def test_read_journal_reads_the_state_dir(emulator, emulator_api):
    requests.get(emulator_api.clusters_url("c9"))
    entries = journal.read_journal(emulator.state_dir)
    assert entries == emulator.journal()
    assert (entries[0]["status"], entries[0]["path"]) == (404, f"{CLUSTERS_PATH}/c9")
    control = requests.get(f"{emulator.base_url}/emulator/v1/journal").json()
    assert control == {"entries": entries}


def test_journal_of_an_empty_dir_and_a_torn_line(tmp_path):
    assert journal.read_journal(tmp_path) == []
    (tmp_path / journal.JOURNAL_FILENAME).write_text('{"method": "GET"}\n{"method": "PO')
    assert journal.read_journal(tmp_path) == [{"method": "GET"}]


def test_concurrent_requests_each_get_one_line(emulator, emulator_api):
    def get(index: int) -> int:
        return requests.get(emulator_api.clusters_url(f"c{index}")).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(get, range(40))) == {404}
    paths = sorted(e["path"] for e in emulator.journal())
    assert paths == sorted(f"{CLUSTERS_PATH}/c{i}" for i in range(40))
