"""The emulated Slurm API, accounting: a finished job ages out of the live queue into slurmdb, and
without accounting slurmdb answers as a real slurmrestd does."""

from __future__ import annotations

import time

from tests.emulator.slurm.emu_slurm_calls import start
from vsp.vertex_emulator.slurm import api as slurm_api
from vsp.vertex_emulator.slurm.testing import API, DB


def test_finished_job_ages_out_to_slurmdb(slurm_emulator_factory, cluster_body):
    _, client = start(slurm_emulator_factory, cluster_body, slurm_min_job_age_seconds=0.5)
    job_id = client.submit("#!/bin/bash\ntrue\n", name="short", comment="c")
    client.wait_state(job_id, "COMPLETED")
    client.wait_job(job_id, lambda j: True)
    deadline = time.monotonic() + 5
    while client.job(job_id) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    gone = client.call("GET", f"{API}/job/{job_id}")
    assert gone.status == 404 and gone.payload["errors"][0]["error_number"] == 2017
    assert client.call("GET", f"{API}/jobs").payload["jobs"] == []
    db = client.db_job(job_id)
    assert db["job_id"] == job_id and db["name"] == "short"
    assert db["comment"] == {"administrator": "", "job": "c", "system": ""}
    assert db["state"] == {"current": ["COMPLETED"], "reason": "None"}
    assert db["exit_code"]["status"] == ["SUCCESS"] and db["restart_cnt"] == 0
    assert db["time"]["end"] >= db["time"]["start"] >= db["time"]["submission"] > 0
    assert (db["partition"], db["user"], db["account"]) == ("a4", "vsp", "")
    assert client.db_job(999) is None
    assert [j["job_id"] for j in client.call("GET", f"{DB}/jobs").payload["jobs"]] == [job_id]
    by_name = client.call("GET", f"{DB}/jobs?job_name=other,short&state=COMPLETED").payload
    assert [j["job_id"] for j in by_name["jobs"]] == [job_id]
    assert client.call("GET", f"{DB}/jobs?job_name=other").payload["jobs"] == []


def test_without_accounting_slurmdb_is_a_plain_text_404(slurm_emulator_factory, cluster_body):
    _, client = start(slurm_emulator_factory, cluster_body, slurm_accounting=False)
    for path in (f"{DB}/jobs", f"{DB}/job/1", f"{DB}/accounts"):
        answer = client.call("GET", path)
        assert (answer.status, answer.payload, answer.text) == (404, None, slurm_api.NO_PATH_TEXT)
    assert client.call("GET", f"{API}/jobs").payload["jobs"] == []
