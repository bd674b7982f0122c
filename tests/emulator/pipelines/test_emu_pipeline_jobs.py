"""The emulator's Vertex AI Pipelines routes: pipelineJobs and schedules (stored, never run)."""

from __future__ import annotations

import copy

import pytest
import requests

PARENT = "projects/test-project/locations/us-central1"
DIGEST = "sha256:" + "0123456789abcdef" * 4
URI = "https://us-central1-kfp.pkg.dev/test-project/repo/tiny"
SPEC = {
    "pipelineInfo": {"name": "tiny-pipeline"},
    "root": {
        "inputDefinitions": {
            "parameters": {
                "project": {"parameterType": "STRING"},
                "nodes": {"parameterType": "NUMBER_INTEGER", "defaultValue": 1.0},
            }
        }
    },
    "schemaVersion": "2.1.0",
}

OUTPUT = "runtime_config.gcs_output_directory"
VALUES = "runtime_config.parameter_values"
CREATE = "create_pipeline_job_request"
JOB = f"{CREATE}.pipeline_job"
DAY = "2030-01-0"


def _config(**values):
    return {"gcsOutputDirectory": "gs://bucket/r", "parameterValues": values}


def job_body(**changes):
    body = {
        "displayName": "tiny",
        "pipelineSpec": copy.deepcopy(SPEC),
        "runtimeConfig": {
            "gcsOutputDirectory": "gs://bucket/root",
            "parameterValues": {"project": "p1"},
        },
        "serviceAccount": "runner@test-project.iam.gserviceaccount.com",
        "labels": {"team": "ml"},
    }
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def schedule_body(**changes):
    body = {
        "displayName": "nightly",
        "cron": "TZ=Europe/Paris 0 3 * * *",
        "maxConcurrentRunCount": 1,
        "createPipelineJobRequest": {"parent": PARENT, "pipelineJob": job_body()},
    }
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


@pytest.fixture
def api(emulator_api):
    class Api:
        url = staticmethod(emulator_api.url)

        @staticmethod
        def create(body, job_id=None, version="v1"):
            params = {"pipelineJobId": job_id} if job_id else None
            url = emulator_api.url(f"{PARENT}/pipelineJobs", version)
            return requests.post(url, params=params, json=body)

        @staticmethod
        def get(path, params=None):
            return requests.get(emulator_api.url(path, "v1"), params=params)

        @staticmethod
        def post(path, body=None):
            return requests.post(emulator_api.url(path, "v1"), json=body or {})

    return Api


def _fields(response):
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    return [v.get("field") for v in error["details"][0]["fieldViolations"]]


def test_create_stores_a_pending_job(api, emulator):
    response = api.create(job_body(), "run-1")
    assert response.status_code == 200, response.text
    job = response.json()
    assert job["name"] == f"{PARENT}/pipelineJobs/run-1"
    assert job["state"] == "PIPELINE_STATE_PENDING"
    assert job["displayName"] == "tiny"
    assert job["pipelineSpec"] == SPEC
    assert job["runtimeConfig"]["parameterValues"] == {"project": "p1"}
    assert job["serviceAccount"].startswith("runner@")
    assert job["labels"] == {"team": "ml"}
    assert {"createTime", "updateTime"} <= set(job)
    assert api.get(job["name"]).json() == job
    assert requests.get(api.url(job["name"], "v1beta1")).json() == job
    entry = emulator.journal()[0]
    assert (entry["method"], entry["query"], entry["body"]) == (
        "POST",
        {"pipelineJobId": "run-1"},
        job_body(),
    )


def test_template_uri_version_and_tag(api):
    pinned = api.create(job_body(pipelineSpec=None, templateUri=f"{URI}/{DIGEST}"), "pinned")
    assert pinned.json()["templateMetadata"] == {"version": DIGEST}
    assert "pipelineSpec" not in pinned.json()
    tagged = api.create(job_body(pipelineSpec=None, templateUri=f"{URI}/latest"), "tagged")
    assert tagged.status_code == 200 and "templateMetadata" not in tagged.json()


def test_snake_case_body_keeps_parameter_names(api):
    body = {
        "display_name": "tiny",
        "pipeline_spec": copy.deepcopy(SPEC),
        "runtime_config": {
            "gcs_output_directory": "gs://bucket/root",
            "parameter_values": {"project": "p1", "nodes": 2},
        },
    }
    job = api.create(body, "snake").json()
    assert job["runtimeConfig"] == {
        "gcsOutputDirectory": "gs://bucket/root",
        "parameterValues": {"project": "p1", "nodes": 2},
    }


def test_create_without_id_gets_one(api):
    job = api.create(job_body()).json()
    assert job["name"].rsplit("/", 1)[1].isdigit()


@pytest.mark.parametrize(
    ("body", "job_id", "field"),
    [
        (job_body(runtimeConfig=None), "a", "runtime_config"),
        (job_body(runtimeConfig={"parameterValues": {}}), "a", OUTPUT),
        (job_body(runtimeConfig={"gcsOutputDirectory": "/tmp/x"}), "a", OUTPUT),
        (job_body(templateUri=f"{URI}/latest"), "a", "pipeline_spec"),
        (job_body(pipelineSpec=None), "a", "pipeline_spec"),
        (job_body(pipelineSpec=None, templateUri="gs://b/t.yaml"), "a", "template_uri"),
        (job_body(pipelineSpec={"pipelineInfo": {}}), "a", "pipeline_spec"),
        (job_body(), "Bad_Id", "pipeline_job_id"),
        (job_body(), "x" * 128, "pipeline_job_id"),
        (job_body(runtimeConfig=_config(nope=1, project="p")), "a", f"{VALUES}[nope]"),
        (job_body(runtimeConfig=_config()), "a", f"{VALUES}[project]"),
        (job_body(labels={"Team": "ml"}), "a", "labels[Team]"),
        (job_body(serviceAccount="nobody"), "a", "service_account"),
    ],
)
def test_create_validation(api, body, job_id, field):
    response = api.create(body, job_id)
    assert field in _fields(response)
    assert field.split("[")[0] in response.json()["error"]["message"]
    assert api.get(f"{PARENT}/pipelineJobs").json() == {}


def test_duplicate_id_is_already_exists(api):
    assert api.create(job_body(), "dup").status_code == 200
    again = api.create(job_body(), "dup")
    assert again.status_code == 409
    assert again.json()["error"]["status"] == "ALREADY_EXISTS"


def test_list_newest_first_with_filters_and_pages(api):
    other = copy.deepcopy(SPEC)
    other["pipelineInfo"]["name"] = "other"
    for job_id, spec, name in [("j1", SPEC, "a"), ("j2", other, "b"), ("j3", SPEC, "a")]:
        assert api.create(job_body(pipelineSpec=spec, displayName=name), job_id).status_code == 200
    jobs = f"{PARENT}/pipelineJobs"

    def ids(params):
        return [j["name"].rsplit("/", 1)[1] for j in api.get(jobs, params).json()["pipelineJobs"]]

    assert ids({}) == ["j3", "j2", "j1"]
    assert ids({"filter": 'display_name="a"'}) == ["j3", "j1"]
    assert ids({"filter": 'pipeline_name="other"'}) == ["j2"]
    assert ids({"filter": 'pipeline_name="tiny-pipeline" AND labels.team="ml"'}) == ["j3", "j1"]
    assert api.get(jobs, {"filter": 'display_name="none"'}).json() == {}
    first = api.get(jobs, {"pageSize": 2}).json()
    assert [j["name"][-2:] for j in first["pipelineJobs"]] == ["j3", "j2"]
    rest = api.get(jobs, {"pageSize": 2, "pageToken": first["nextPageToken"]}).json()
    assert [j["name"][-2:] for j in rest["pipelineJobs"]] == ["j1"] and "nextPageToken" not in rest
    assert _fields(api.get(jobs, {"filter": "create_time>1"})) == ["filter"]
    assert _fields(api.get(jobs, {"pageToken": "%%%"})) == ["page_token"]


def test_cancel(api):
    name = api.create(job_body(), "c1").json()["name"]
    assert api.post(f"{name}:cancel").json() == {}
    job = api.get(name).json()
    assert job["state"] == "PIPELINE_STATE_CANCELLED" and "endTime" in job
    again = api.post(f"{name}:cancel")
    assert again.status_code == 400 and again.json()["error"]["status"] == "FAILED_PRECONDITION"
    assert api.post(f"{PARENT}/pipelineJobs/nope:cancel").status_code == 404
    assert api.get(f"{PARENT}/pipelineJobs/nope").status_code == 404


def test_schedule_create_get_list_pause_resume_delete(api, emulator_api):
    response = api.post(f"{PARENT}/schedules", schedule_body(maxRunCount=5))
    assert response.status_code == 200, response.text
    schedule = response.json()
    assert schedule["name"].startswith(f"{PARENT}/schedules/")
    assert schedule["state"] == "ACTIVE"
    assert schedule["cron"] == "TZ=Europe/Paris 0 3 * * *"
    assert (schedule["maxConcurrentRunCount"], schedule["maxRunCount"]) == ("1", "5")
    assert schedule["startedRunCount"] == "0"
    assert schedule["createPipelineJobRequest"]["pipelineJob"] == job_body()
    assert schedule["nextRunTime"][11:19] in ("01:00:00", "02:00:00")  # 03:00 Paris in UTC
    assert api.get(schedule["name"]).json() == schedule
    second = api.post(f"{PARENT}/schedules", schedule_body(displayName="other")).json()
    listed = api.get(f"{PARENT}/schedules").json()["schedules"]
    assert [s["name"] for s in listed] == [second["name"], schedule["name"]]
    named = api.get(f"{PARENT}/schedules", {"filter": 'display_name="nightly"'}).json()
    assert [s["name"] for s in named["schedules"]] == [schedule["name"]]
    assert api.post(f"{schedule['name']}:pause").json() == {}
    assert api.get(schedule["name"]).json()["state"] == "PAUSED"
    assert api.post(f"{schedule['name']}:pause").status_code == 400
    paused = api.get(f"{PARENT}/schedules", {"filter": 'state="PAUSED"'}).json()["schedules"]
    assert [s["name"] for s in paused] == [schedule["name"]]
    assert api.post(f"{schedule['name']}:resume").json() == {}
    deleted = requests.delete(api.url(schedule["name"], "v1"))
    assert deleted.status_code == 200
    operation = deleted.json()
    assert operation["done"] is True and operation["name"].startswith(f"{PARENT}/operations/")
    assert emulator_api.wait_operation(operation["name"])["done"] is True
    assert api.get(schedule["name"]).status_code == 404
    assert requests.delete(api.url(schedule["name"], "v1")).status_code == 404


def test_schedule_creates_no_runs(api):
    api.post(f"{PARENT}/schedules", schedule_body(cron="* * * * *"))
    assert api.get(f"{PARENT}/pipelineJobs").json() == {}


def _with_request(**changes):
    create = {"parent": PARENT, "pipelineJob": job_body()}
    create.update(changes)
    return schedule_body(createPipelineJobRequest=create)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (schedule_body(maxConcurrentRunCount=None), "max_concurrent_run_count"),
        (schedule_body(maxConcurrentRunCount=0), "max_concurrent_run_count"),
        (schedule_body(maxRunCount=-1), "max_run_count"),
        (schedule_body(cron="0 3 * *"), "cron"),
        (schedule_body(cron="0 61 * * *"), "cron"),
        (schedule_body(cron="TZ=Mars/Base 0 3 * * *"), "cron"),
        (schedule_body(cron=None), "cron"),
        (schedule_body(displayName=None), "display_name"),
        (schedule_body(startTime=f"{DAY}2T00:00:00Z", endTime=f"{DAY}1T00:00:00Z"), "end_time"),
        (schedule_body(startTime="tomorrow"), "start_time"),
        (schedule_body(createPipelineJobRequest=None), "create_pipeline_job_request"),
        (_with_request(pipelineJobId="run-1"), f"{CREATE}.pipeline_job_id"),
        (_with_request(pipelineJob={**job_body(), "pipelineJobId": "r"}), f"{JOB}.pipeline_job_id"),
        (_with_request(parent="projects/x/locations/us-central1"), f"{CREATE}.parent"),
        (_with_request(pipelineJob=job_body(runtimeConfig={})), f"{JOB}.{OUTPUT}"),
    ],
)
def test_schedule_validation(api, body, field):
    response = api.post(f"{PARENT}/schedules", body)
    assert field in _fields(response)
    assert api.get(f"{PARENT}/schedules").json() == {}


def test_jobs_and_schedules_persist_across_restart(emulator_factory, emulator_api_for, tmp_path):
    first = emulator_factory(tmp_path / "state")
    url = emulator_api_for(first).url(f"{PARENT}/pipelineJobs", "v1")
    assert requests.post(url, params={"pipelineJobId": "p1"}, json=job_body()).status_code == 200
    first.stop()
    second = emulator_factory(tmp_path / "state")
    job = requests.get(emulator_api_for(second).url(f"{PARENT}/pipelineJobs/p1", "v1")).json()
    assert job["state"] == "PIPELINE_STATE_PENDING"
