"""The Slurm Job API (``:callSlurmRestApi``): envelope, errors, the JobInfo of a job's life."""

from __future__ import annotations

import json
import pathlib

import requests

from tests.emulator.slurm.emu_slurm_calls import UNSET, num, start
from vsp.vertex_emulator import cluster_home
from vsp.vertex_emulator.slurm import api as slurm_api
from vsp.vertex_emulator.slurm.testing import API


def test_submit_running_completed_with_exact_shapes(slurm_emulator_factory, cluster_body):
    server, client = start(slurm_emulator_factory, cluster_body)
    reply = client.call(
        "POST",
        f"{API}/job/submit",
        {
            "job": {
                "name": "train",
                "comment": "run-1",
                "partition": "a4",
                "environment": ["PATH=/usr/bin:/bin"],
                "minimum_nodes": 1,
                "tasks_per_node": 1,
                "tres_per_node": "gres/gpu:8",
                "time_limit": {"set": True, "infinite": False, "number": 5},
                "standard_output": "out-%j.log",
            },
            "script": "#!/bin/bash\necho hello from $SLURM_JOB_ID\nsleep 0.4\n",
        },
    )
    assert reply.form == "body" and reply.status == 200
    submitted = reply.payload
    meta = submitted.pop("meta")
    assert meta["plugin"]["data_parser"] == "data_parser/v0.0.42"
    assert meta["client"]["user"] == "vsp" and meta["slurm"]["cluster"] == "c1"
    assert submitted == {
        "job_id": 1,
        "step_id": "batch",
        "job_submit_user_msg": "",
        "errors": [],
        "warnings": [],
    }
    running = client.wait_state(1, "RUNNING")
    assert running["exit_code"]["status"] == ["SUCCESS"]
    assert running["nodes"] == "c1-a4-0" and running["end_time"] == num(0)
    done = client.wait_state(1, "COMPLETED")
    home = str(server.state_dir / "slurm" / "c1" / "home")
    stamps = {k: done[k] for k in ("submit_time", "start_time", "end_time", "eligible_time")}
    assert all(v["set"] and v["number"] > 0 for v in stamps.values())
    assert done["end_time"]["number"] >= done["start_time"]["number"]
    assert done == {
        **stamps,
        "account": "",
        "batch_flag": True,
        "batch_host": "c1-a4-0",
        "cluster": "c1",
        "comment": "run-1",
        "current_working_directory": home,
        "exit_code": {
            "status": ["SUCCESS"],
            "return_code": num(0),
            "signal": {"id": UNSET, "name": ""},
        },
        "flags": [],
        "hold": False,
        "job_id": 1,
        "job_state": ["COMPLETED"],
        "name": "train",
        "node_count": num(1),
        "nodes": "c1-a4-0",
        "partition": "a4",
        "priority": num(1_999_999),
        "requeue": True,
        "restart_cnt": 0,
        "standard_error": f"{home}/out-1.log",
        "standard_input": "/dev/null",
        "standard_output": f"{home}/out-1.log",
        "state_description": "",
        "state_reason": "None",
        "tasks": num(1),
        "time_limit": num(5),
        "tres_per_node": "gres/gpu:8",
        "user_name": "vsp",
    }
    # The cluster's home is its own: the host path is an empty mount point, the log is on the
    # cluster's disk.
    assert not pathlib.Path(home, "out-1.log").exists()
    on_cluster = server.app.slurm.host_path("c1", f"{home}/out-1.log")
    assert pathlib.Path(on_cluster).read_text() == "hello from 1\n"
    listed = client.call("GET", f"{API}/jobs/").payload
    assert [j["job_id"] for j in listed["jobs"]] == [1]
    assert set(listed) == {"jobs", "last_backfill", "last_update", "meta", "errors", "warnings"}


def test_both_envelope_forms(slurm_emulator_factory, cluster_body):
    server, client = start(slurm_emulator_factory, cluster_body)
    url = f"{server.base_url}/v1beta1/{client.cluster_name}:callSlurmRestApi"
    request = {"method": "HTTP_METHOD_GET", "path": f"{API}/jobs"}
    plain = requests.post(url, json=request).json()
    assert set(plain) == {"status", "body"} and isinstance(plain["body"], str)
    assert json.loads(plain["body"])["jobs"] == []
    patched = requests.patch(
        f"{server.base_url}/emulator/v1/settings", json={"slurm_structured_body": True}
    )
    assert patched.status_code == 200
    structured = requests.post(url, json=request).json()
    assert set(structured) == {"status", "structuredBody"} and structured["status"] == 200
    assert structured["structuredBody"] == json.loads(plain["body"]) | {
        "last_backfill": structured["structuredBody"]["last_backfill"],
        "last_update": structured["structuredBody"]["last_update"],
    }
    assert client.call("GET", f"{API}/jobs").form == "structuredBody"


def test_google_level_errors(slurm_emulator_factory, cluster_body):
    server, client = start(slurm_emulator_factory, cluster_body)
    base = f"{server.base_url}/v1beta1/projects/test-project/locations/us-central1"
    url = f"{base}/modelDevelopmentClusters/c1:callSlurmRestApi"
    ok = {"method": "HTTP_METHOD_GET", "path": f"{API}/jobs"}
    missing = requests.post(f"{base}/modelDevelopmentClusters/zz:callSlurmRestApi", json=ok)
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"
    for bad in (
        {**ok, "method": "GET"},
        {**ok, "path": "/etc/passwd"},
        {**ok, "path": 42},
        {**ok, "body": [1]},
        {**ok, "extra": 1},
        {**ok, "method": "HTTP_METHOD_POST", "body": {"script": "x" * 1_000_001}},
    ):
        response = requests.post(url, json=bad)
        assert response.status_code == 400, bad
        assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    server.add_fault(action="provisioning_delay", seconds=600)
    created = requests.post(
        f"{base}/modelDevelopmentClusters",
        params={"model_development_cluster_id": "c2"},
        json=cluster_body,
    )
    assert created.status_code == 200
    busy = requests.post(f"{base}/modelDevelopmentClusters/c2:callSlurmRestApi", json=ok)
    assert busy.status_code == 400 and busy.json()["error"]["status"] == "FAILED_PRECONDITION"


def test_slurm_level_errors_and_warnings(slurm_emulator_factory, cluster_body):
    server, client = start(slurm_emulator_factory, cluster_body)
    script = "#!/bin/bash\ntrue\n"
    bad_partition = client.call(
        "POST",
        f"{API}/job/submit",
        {"job": {"partition": "nope", "environment": []}, "script": script},
    )
    assert bad_partition.status == 500
    (error,) = bad_partition.payload["errors"]
    assert error["error_number"] == 2000 and error["error"] == "Invalid partition name specified"
    assert set(error) == {"error_number", "error", "description", "source"}
    no_env = client.call("POST", f"{API}/job/submit", {"job": {}, "script": script})
    assert no_env.status == 500 and no_env.payload["errors"][0]["error_number"] == 2127
    too_big = client.call(
        "POST", f"{API}/job/submit", {"job": {"nodes": "3", "environment": []}, "script": script}
    )
    assert too_big.payload["errors"][0]["error_number"] == 2014
    no_job = client.call("POST", f"{API}/job/submit", {"script": script})
    assert no_job.status == 400 and no_job.payload["errors"]
    as_object = client.call(
        "POST", f"{API}/job/submit", {"job": {"environment": {"A": "1"}}, "script": script}
    )
    assert as_object.status == 200 and as_object.payload["errors"] == []
    (warning,) = as_object.payload["warnings"]
    assert warning["source"] == "#/job/environment/"
    # On Vertex /home is the cluster's Filestore; here it is this machine's: said, with the
    # emulated home to use instead (a user's /home/run got the job's files on the host).
    server_home = cluster_home(server.state_dir, "c1")
    host_home = client.call(
        "POST",
        f"{API}/job/submit",
        {
            "job": {"environment": [], "current_working_directory": "/home/run",
                    "standard_output": f"{server_home}/out.txt", "hold": True},
            "script": script,
        },
    )  # fmt: skip
    assert host_home.status == 200 and host_home.payload["errors"] == []
    said = [w["description"] for w in host_home.payload["warnings"]]
    assert [text for text in said if "/home/" in text] == [
        f"/home/run is this machine's /home, not the emulated cluster's home ({server_home}): "
        f"the job's files there land outside the emulator's folder. Locally, use "
        f"{server_home}/run (vsp.vertex_emulator.cluster_home(state_dir, cluster_id)); on "
        "Vertex /home is the cluster's Filestore"
    ]
    # slurmrestd 24.11.7 answers a path (or method) it does not serve with a plain-text 404.
    for method, path in (
        ("GET", "/slurm/v0.0.40/jobs"),
        ("GET", f"{API}/nope"),
        ("DELETE", f"{API}/jobs"),
    ):
        missing = client.call(method, path)
        assert (missing.status, missing.payload, missing.text) == (
            404,
            None,
            slurm_api.NO_PATH_TEXT,
        )
    unknown = client.call("GET", f"{API}/job/99")
    assert unknown.status == 404 and unknown.payload["jobs"] == []
    assert unknown.payload["errors"][0]["error_number"] == 2017
