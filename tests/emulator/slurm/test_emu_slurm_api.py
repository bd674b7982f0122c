"""The Slurm Job API (``:callSlurmRestApi``): envelope, errors, JobInfo, real job processes."""

from __future__ import annotations

import json
import pathlib
import time

import pytest
import requests

from vsp.vertex_emulator.slurm import api as slurm_api
from vsp.vertex_emulator.slurm.testing import API, DB, SlurmTestClient

NUM = {"set": True, "infinite": False, "number": 0}
UNSET = {"set": False, "infinite": False, "number": 0}


def start(factory, body, cluster_id="c1", **settings):
    server = factory(**settings)
    return server, SlurmTestClient.create_cluster(server.base_url, cluster_id, body)


def num(value: int) -> dict:
    return {**NUM, "number": value}


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
    _, client = start(slurm_emulator_factory, cluster_body)
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


def test_environment_is_only_the_jobs_plus_slurm(
    slurm_emulator_factory, cluster_body, tmp_path, monkeypatch
):
    monkeypatch.setenv("VSP_LEAK_PROBE", "secret")
    server, client = start(slurm_emulator_factory, cluster_body)
    work = tmp_path / "work" / "deep"
    job_id = client.submit(
        "#!/bin/bash\nenv > env.txt\n",
        name="envy",
        current_working_directory=str(work),
        environment=["A=1", "B=two words=3"],
    )
    client.wait_state(job_id, "COMPLETED")
    env = dict(line.split("=", 1) for line in (work / "env.txt").read_text().splitlines())
    slurm = {k: v for k, v in env.items() if k.startswith(("SLURM_", "SLURMD_"))}
    others = set(env) - set(slurm)
    # What Slurm 24.11 gives the same request (slurmrestd v0.0.42): no PATH, HOME or USER.
    assert others == {"A", "B", "ENVIRONMENT", "HOSTNAME", "PWD", "SHLVL", "TMPDIR", "_"}
    assert "VSP_LEAK_PROBE" not in env and "VERTEX_EMULATOR_HOST" not in env
    assert env["A"] == "1" and env["B"] == "two words=3" and env["ENVIRONMENT"] == "BATCH"
    began = int(slurm["SLURM_JOB_START_TIME"])
    limit = client.job(job_id)["time_limit"]["number"]  # the partition's DefaultTime
    # The names Slurm 24.11 sets for this request, less SLURM_CONF, SLURM_MEM_PER_CPU and
    # SLURM_TASK_PID (not modelled); no SLURM_RESTART_COUNT on a first run.
    assert {k: slurm[k] for k in sorted(slurm) if k not in ("SLURM_JOB_UID", "SLURM_JOB_GID")} == {
        "SLURMD_NODENAME": "c1-a4-0",
        "SLURM_CLUSTER_NAME": "c1",
        "SLURM_CPUS_ON_NODE": "1",
        "SLURM_GTIDS": "0",
        "SLURM_JOBID": str(job_id),
        "SLURM_JOB_CPUS_PER_NODE": "1",
        "SLURM_JOB_END_TIME": str(began + limit * 60),
        "SLURM_JOB_ID": str(job_id),
        "SLURM_JOB_NAME": "envy",
        "SLURM_JOB_NODELIST": "c1-a4-0",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_JOB_PARTITION": "a4",
        "SLURM_JOB_START_TIME": str(began),
        "SLURM_JOB_USER": "vsp",
        "SLURM_LOCALID": "0",
        "SLURM_NNODES": "1",
        "SLURM_NODEID": "0",
        "SLURM_NODELIST": "c1-a4-0",
        "SLURM_OOM_KILL_STEP": "0",
        "SLURM_PROCID": "0",
        "SLURM_TASKS_PER_NODE": "1",
        "SLURM_TOPOLOGY_ADDR": "c1-a4-0",
        "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
    }
    assert (work / f"slurm-{job_id}.out").exists()


def test_failed_exit_codes(slurm_emulator_factory, cluster_body):
    server, client = start(slurm_emulator_factory, cluster_body)
    code = client.submit("#!/bin/bash\nexit 3\n")
    signalled = client.submit("#!/bin/bash\nkill -USR1 $$\n")
    failed = client.wait_state(code, "FAILED")
    assert failed["exit_code"] == {
        "status": ["ERROR"],
        "return_code": num(3),
        "signal": {"id": UNSET, "name": ""},
    }
    assert failed["state_reason"] == "NonZeroExitCode"
    killed = client.wait_state(signalled, "FAILED")
    assert killed["exit_code"]["status"] == ["SIGNALED"]
    assert killed["exit_code"]["signal"] == {"id": num(10), "name": "USR1"}
    assert killed["state_reason"] == "RaisedSignal:10(USR1)"
    no_shell = client.wait_state(client.submit("#!/nonexistent/shell\ntrue\n"), "FAILED")
    assert no_shell["exit_code"]["return_code"] == num(1)
    assert "could not start" in no_shell["state_description"]
    stderr = server.app.slurm.host_path("c1", no_shell["standard_error"])
    assert "execve()" in pathlib.Path(stderr).read_text()
    db = client.db_job(code)
    assert db["state"] == {"current": ["FAILED"], "reason": "NonZeroExitCode"}
    assert db["exit_code"]["return_code"] == num(3)


def test_cancel_sigterm_killwait_sigkill(slurm_emulator_factory, cluster_body, tmp_path):
    _, client = start(slurm_emulator_factory, cluster_body)
    marker = tmp_path / "marker"
    script = (
        f"#!/bin/bash\ntrap 'echo term >> {marker}; sleep 5' TERM\n"
        f"echo up >> {marker}\nwhile true; do sleep 0.05; done\n"
    )
    job_id = client.submit(script)
    client.wait_job(job_id, lambda j: marker.exists())
    assert client.cancel(job_id).payload["errors"] == []
    completing = client.job(job_id)
    assert completing["job_state"] == ["CANCELLED", "COMPLETING"]
    done = client.wait_state(job_id, "CANCELLED")
    assert done["exit_code"]["signal"]["name"] == "KILL"
    assert marker.read_text() == "up\nterm\n"
    again = client.cancel(job_id)
    assert again.status == 200 and again.payload["errors"] == []
    (entry,) = again.payload["status"]  # as Slurm 24.11: per job, not in errors
    assert entry["error"]["code"] == 2021 and entry["job_id"]["number"] == job_id
    assert entry["error"]["message"] == "Job/step already completing or completed"
    pending = client.submit("#!/bin/bash\ntrue\n", hold=True)
    assert client.cancel(pending).status == 200
    assert client.job(pending)["job_state"] == ["CANCELLED"]
    unknown = client.cancel(12345)
    assert unknown.status == 200 and unknown.payload["status"][0]["error"]["code"] == 2017


def test_timeout_with_warning_signal(slurm_emulator_factory, cluster_body, clock_of, tmp_path):
    # time_scale 0.01: a 1-minute limit lasts 0.6 s of emulated time, USR1@30 comes 0.3 s before
    # it. The emulator's clock is held and moved by the test, so the signals come at those
    # emulated times whatever the machine's load, after the script has set its traps.
    server, client = start(slurm_emulator_factory, cluster_body, time_scale=0.01)
    clock = clock_of(server)
    log, ready = tmp_path / "log", tmp_path / "ready"
    script = (
        f"#!/bin/bash\ntrap 'echo usr1 >> {log}' USR1\ntrap 'echo term >> {log}; exit 0' TERM\n"
        f"touch {ready}\nwhile true; do sleep 0.05; done\n"
    )
    job_id = client.submit(script, time_limit=1, signal="USR1@30")
    client.wait_state(job_id, "RUNNING")
    wait_until(ready.exists)
    clock.advance(0.29)  # 10 ms before the warning: nothing yet
    time.sleep(0.3)  # six of the emulator's ticks
    assert not log.exists() and client.job(job_id)["job_state"] == ["RUNNING"]
    clock.advance(0.02)  # past the warning, before the limit
    wait_until(lambda: log.exists() and log.read_text() == "usr1\n")
    assert client.job(job_id)["job_state"] == ["RUNNING"]
    clock.advance(0.6)  # past the limit and slurmctld's next check (every 30 s, 0.3 s here)
    done = client.wait_state(job_id, "TIMEOUT")
    assert done["state_reason"] == "TimeLimit" and done["time_limit"] == num(1)
    assert log.read_text() == "usr1\nterm\n"


def wait_until(condition, timeout: float = 10.0) -> None:
    """Waits (wall clock) until ``condition()`` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


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


@pytest.mark.parametrize("release_field", ["job", "flat"])
def test_pending_reasons_priorities_hold_and_release(
    slurm_emulator_factory, cluster_body, release_field
):
    cluster_body["node_pools"][1]["scaling_spec"]["max_node_count"] = 1
    _, client = start(slurm_emulator_factory, cluster_body)
    sleeper = "#!/bin/bash\nsleep 30\n"
    running = client.submit(sleeper)
    client.wait_state(running, "RUNNING")
    first = client.submit(sleeper)
    second = client.submit(sleeper)
    held = client.call(
        "POST", f"{API}/job/submit", {"job": {"hold": True, "environment": []}, "script": sleeper}
    )
    assert held.status == 200 and held.payload["errors"] == []
    assert held.payload["warnings"][-1]["description"] == (
        "Job is in held state, pending scheduler release"
    )
    held_id = held.payload["job_id"]
    infos = {j: client.job(j) for j in (first, second, held_id)}
    assert infos[first]["state_reason"] == "Resources"
    assert infos[second]["state_reason"] == "Priority"
    assert infos[first]["priority"]["number"] > infos[second]["priority"]["number"] > 0
    assert infos[held_id]["state_reason"] == "JobHeldUser"
    assert infos[held_id]["priority"] == num(0) and infos[held_id]["hold"] is True
    if release_field == "job":  # Slurm 24.11.7 reads a job update's fields at the top only
        ignored = client.call("POST", f"{API}/job/{held_id}", {"job": {"hold": False}})
        assert ignored.status == 200 and ignored.payload["errors"] == []
        assert ignored.payload["warnings"] == [
            {
                "description": 'Ignoring unknown field "hold" of type boolean in '
                "DATA_PARSER_JOB_DESC_MSG",
                "source": "#/job/hold/",
            }
        ]
        assert client.job(held_id)["state_reason"] == "JobHeldUser"
    assert client.call("POST", f"{API}/job/{held_id}", {"hold": False}).status == 200
    assert client.job(held_id)["state_reason"] == "Priority"
    # A hold set by a job update is the administrator's (the API calls as root).
    assert client.call("POST", f"{API}/job/{second}", {"hold": True}).status == 200
    assert client.job(second)["state_reason"] == "JobHeldAdmin"
    client.cancel(running)
    client.wait_state(first, "RUNNING")
    for job_id in (first, second, held_id):
        client.cancel(job_id)


def test_signal_without_cancelling(slurm_emulator_factory, cluster_body, tmp_path):
    _, client = start(slurm_emulator_factory, cluster_body)
    marker = tmp_path / "usr1"
    script = f"#!/bin/bash\ntrap 'echo usr1 >> {marker}' USR1\nwhile true; do sleep 0.05; done\n"
    job_id = client.submit(script)
    client.wait_state(job_id, "RUNNING")
    time.sleep(0.2)
    assert client.call("DELETE", f"{API}/job/{job_id}?signal=USR1").status == 200
    client.wait_job(job_id, lambda j: marker.exists())
    assert client.job(job_id)["job_state"] == ["RUNNING"]
    held = client.submit("#!/bin/bash\ntrue\n", hold=True)
    pending = client.call("DELETE", f"{API}/job/{held}?signal=USR1")
    assert pending.status == 200 and pending.payload["errors"] == []
    assert pending.payload["status"][0]["error"]["code"] == 2020
    client.cancel(job_id)
    client.cancel(held)


def test_without_accounting_slurmdb_is_a_plain_text_404(slurm_emulator_factory, cluster_body):
    _, client = start(slurm_emulator_factory, cluster_body, slurm_accounting=False)
    for path in (f"{DB}/jobs", f"{DB}/job/1", f"{DB}/accounts"):
        answer = client.call("GET", path)
        assert (answer.status, answer.payload, answer.text) == (404, None, slurm_api.NO_PATH_TEXT)
    assert client.call("GET", f"{API}/jobs").payload["jobs"] == []
