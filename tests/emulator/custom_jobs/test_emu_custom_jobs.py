"""CustomJob emulation: create/get/list/cancel, local processes, env, errors, persistence."""

from __future__ import annotations

import os
import pathlib
import sys
import time

import requests

PARENT = "projects/p1/locations/us-central1"
FAST = {
    "custom_job_queue_delay_seconds": 0.05,
    "custom_job_pending_delay_seconds": 0.05,
    "custom_job_kill_wait_seconds": 0.3,
    "custom_job_preempt_notice_seconds": 0.3,
}
TERMINAL = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"}


def body(command, strategy="STANDARD", **extra):
    spec = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": 1,
                "containerSpec": {"imageUri": "gcr.io/x/y:1", "command": command},
            }
        ],
        "scheduling": {"strategy": strategy},
        **extra,
    }
    return {"displayName": "train", "jobSpec": spec, "labels": {"team": "ml"}}


def create(server, payload):
    resp = requests.post(f"{server.base_url}/v1/{PARENT}/customJobs", json=payload, timeout=5)
    assert resp.status_code == 200, resp.text
    return resp.json()


def get(server, name):
    return requests.get(f"{server.base_url}/v1/{name}", timeout=5).json()


def wait(server, name, states, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = get(server, name)
        if job["state"] in states:
            return job
        time.sleep(0.03)
    raise AssertionError(f"{name} still {job['state']}")


def info(server, name):
    job_id = name.rsplit("/", 1)[-1]
    return requests.get(f"{server.base_url}/emulator/v1/custom-jobs/{job_id}", timeout=5).json()


def group_alive(pgid, timeout=2.0):
    """Whether a non-zombie process of group ``pgid`` still runs after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        alive = False
        for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive = True
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def test_create_runs_to_succeeded_with_exact_shape(emulator_factory):
    server = emulator_factory(**FAST)
    job = create(server, body(["true"]))
    assert set(job) == {"name", "displayName", "jobSpec", "state", "createTime", "updateTime"} | {
        "labels"
    }
    assert job["name"].startswith(f"{PARENT}/customJobs/")
    assert job["name"].rsplit("/", 1)[-1].isdigit()
    assert job["state"] == "JOB_STATE_QUEUED" and job["labels"] == {"team": "ml"}
    pool = job["jobSpec"]["workerPoolSpecs"][0]
    assert pool["replicaCount"] == "1" and pool["diskSpec"]["bootDiskSizeGb"] == 100
    done = wait(server, job["name"], TERMINAL)
    assert done["state"] == "JOB_STATE_SUCCEEDED" and "error" not in done
    assert set(done) == set(job) | {"startTime", "endTime"}
    assert done["createTime"] <= done["startTime"] <= done["endTime"]
    listed = requests.get(f"{server.base_url}/v1beta1/{PARENT}/customJobs", timeout=5).json()
    assert [j["name"] for j in listed["customJobs"]] == [job["name"]]
    filtered = requests.get(
        f"{server.base_url}/v1/{PARENT}/customJobs",
        params={"filter": 'state="JOB_STATE_FAILED"'},
        timeout=5,
    ).json()
    assert filtered == {}


def test_env_reaches_the_process(emulator_factory, tmp_path):
    server = emulator_factory(**FAST)
    out = tmp_path / "env.txt"
    script = f"env > {out}"
    payload = body(["/bin/sh", "-c", script], baseOutputDirectory={"outputUriPrefix": "gs://b/r"})
    payload["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"] = [{"name": "K", "value": "V"}]
    job = create(server, payload)
    assert wait(server, job["name"], TERMINAL)["state"] == "JOB_STATE_SUCCEEDED"
    env = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert env["K"] == "V"
    assert env["AIP_MODEL_DIR"] == "gs://b/r/model/"
    assert env["AIP_CHECKPOINT_DIR"] == "gs://b/r/checkpoints/"
    assert env["AIP_TENSORBOARD_LOG_DIR"] == "gs://b/r/logs/"
    assert env["CLOUD_ML_PROJECT_ID"] == "p1"
    assert env["CLOUD_ML_JOB_ID"] == job["name"].rsplit("/", 1)[-1]
    assert env["VSP_GCS_FUSE_ROOT"] == str(server.state_dir / "gcs")
    assert "VIRTUAL_ENV" not in env and "HOME" in env
    assert os.path.exists(info(server, job["name"])["logPath"])


def test_python_package_spec_runs_module(emulator_factory, tmp_path):
    server = emulator_factory(**FAST)
    pkg = server.state_dir / "gcs" / "bucket" / "pkg"
    pkg.mkdir(parents=True)
    out = tmp_path / "argv.txt"
    (pkg / "trainer_mod.py").write_text(
        f"import sys\nopen({str(out)!r}, 'w').write(' '.join([sys.executable, *sys.argv[1:]]))\n"
    )
    payload = body([])
    payload["jobSpec"]["workerPoolSpecs"][0] = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "pythonPackageSpec": {
            "executorImageUri": "us-docker.pkg.dev/x/y",
            "packageUris": ["gs://bucket/pkg"],
            "pythonModule": "trainer_mod",
            "args": ["--epochs", "2"],
        },
    }
    job = create(server, payload)
    assert wait(server, job["name"], TERMINAL)["state"] == "JOB_STATE_SUCCEEDED"
    assert out.read_text() == f"{sys.executable} --epochs 2"


def test_non_zero_exit_fails_with_code(emulator_factory):
    server = emulator_factory(**FAST)
    job = create(server, body(["/bin/sh", "-c", "echo boom; exit 7"]))
    done = wait(server, job["name"], TERMINAL)
    assert done["state"] == "JOB_STATE_FAILED"
    assert done["error"]["code"] == 3
    assert "non-zero status of 7" in done["error"]["message"]
    assert "boom" in open(info(server, job["name"])["logPath"]).read()


def test_cancel_terminates_process_group(emulator_factory, tmp_path):
    server = emulator_factory(**FAST)
    job = create(server, body(["/bin/sh", "-c", "sleep 30 & sleep 30"]))
    wait(server, job["name"], {"JOB_STATE_RUNNING"})
    pgid = info(server, job["name"])["pgid"]
    url = f"{server.base_url}/v1/{job['name']}:cancel"
    assert requests.post(url, timeout=5).json() == {}
    assert get(server, job["name"])["state"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    done = wait(server, job["name"], TERMINAL)
    assert done["state"] == "JOB_STATE_CANCELLED" and done["error"]["code"] == 1
    assert not group_alive(pgid)
    again = requests.post(url, timeout=5)
    assert again.status_code == 400 and again.json()["error"]["status"] == "FAILED_PRECONDITION"


def test_validation_error_shape(emulator_factory):
    server = emulator_factory(**FAST)
    payload = body(["true"], scheduling={"strategy": "CHEAP", "timeout": "1h"})
    del payload["displayName"]
    del payload["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"]
    resp = requests.post(f"{server.base_url}/v1/{PARENT}/customJobs", json=payload, timeout=5)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
    fields = {v["field"] for v in error["details"][0]["fieldViolations"]}
    assert fields == {
        "display_name",
        "job_spec.worker_pool_specs[0].container_spec.image_uri",
        "job_spec.scheduling.strategy",
        "job_spec.scheduling.timeout",
    }
    missing = requests.get(f"{server.base_url}/v1/{PARENT}/customJobs/123", timeout=5)
    assert missing.status_code == 404


def test_a_long_display_name_and_an_image_uri_with_a_line_break_are_refused(emulator_factory):
    server = emulator_factory(**FAST)
    payload = body(["true"])
    payload["displayName"] = "j" * 129
    payload["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] = "gcr.io/x/y:1\nz"
    resp = requests.post(f"{server.base_url}/v1/{PARENT}/customJobs", json=payload, timeout=5)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    found = {v["field"]: v["description"] for v in error["details"][0]["fieldViolations"]}
    assert found == {
        "display_name": "display_name has 129 characters; at most 128 are allowed.",
        "job_spec.worker_pool_specs[0].container_spec.image_uri": (
            "Invalid image URI 'gcr.io/x/y:1\\nz': use a container image reference without "
            "whitespace or control characters, at most 1024 characters."
        ),
    }
    listed = requests.get(f"{server.base_url}/v1/{PARENT}/customJobs", timeout=5).json()
    assert listed.get("customJobs", []) == []


def test_restart_fails_running_job_and_keeps_finished(emulator_factory, tmp_path):
    state = tmp_path / "state"
    server = emulator_factory(state, **FAST)
    finished = create(server, body(["true"]))
    wait(server, finished["name"], TERMINAL)
    running = create(server, body(["sleep", "30"]))
    wait(server, running["name"], {"JOB_STATE_RUNNING"})
    pgid = info(server, running["name"])["pgid"]
    server.stop()
    server.app.custom_jobs.shutdown()
    again = emulator_factory(state, **FAST)
    assert get(again, finished["name"])["state"] == "JOB_STATE_SUCCEEDED"
    lost = wait(again, running["name"], TERMINAL)
    assert lost["state"] == "JOB_STATE_FAILED" and lost["error"]["code"] == 13
    assert not group_alive(pgid)


def test_timeout_fails_with_deadline_exceeded_and_list_pages(emulator_factory):
    server = emulator_factory(**FAST)
    job = create(server, body(["sleep", "30"], scheduling={"timeout": "0.2s"}))
    done = wait(server, job["name"], TERMINAL)
    assert done["state"] == "JOB_STATE_FAILED" and done["error"]["code"] == 4
    create(server, body(["true"]))
    url = f"{server.base_url}/v1/{PARENT}/customJobs"
    first = requests.get(url, params={"pageSize": 1}, timeout=5).json()
    assert len(first["customJobs"]) == 1 and first["nextPageToken"]
    token = first["nextPageToken"]
    second = requests.get(url, params={"pageSize": 1, "pageToken": token}, timeout=5).json()
    assert len(second["customJobs"]) == 1 and "nextPageToken" not in second
