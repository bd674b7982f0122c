"""The project's Slurm requests and the emulator's Slurm answers against Slurm's own OpenAPI.

Skipped (with how to enable) when the v0.0.42 document is unavailable; see ``slurm_openapi``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import slurm_openapi

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import rest
from vsp.components.runtime.slurm import api, job_fields, script
from vsp.vertex_emulator.slurm import api as slurm_api
from vsp.vertex_emulator.slurm.testing import API, DB, PARENT, SlurmReply, SlurmTestClient

pytestmark = pytest.mark.slurm_conformance

SUBMIT = f"{API}/job/submit"
PROJECT, LOCATION = PARENT.split("/")[1::2]
SLEEPER = "#!/bin/bash\nsleep 30\n"
ACCOUNT = {"name": "ml", "description": "ml team", "organization": "ml"}


@pytest.fixture(autouse=True)
def openapi() -> dict[str, Any]:
    """The document; skips every test here when it is unavailable."""
    return slurm_openapi.spec()


class CheckedClient(SlurmTestClient):
    """``SlurmTestClient`` whose every request body and Slurm answer is checked."""

    def call(self, method: str, path: str, body: Any = None, **extra: Any) -> SlurmReply:
        if body is not None:
            slurm_openapi.validate_request(method, path, body)
        reply = super().call(method, path, body, **extra)
        assert reply.status is not None, reply.http.text
        slurm_openapi.validate_response(method, path, reply.status, reply.payload)
        return reply


class CheckedRest:
    """Wraps the Vertex REST client: checks each proxied Slurm request and answer."""

    def __init__(self, inner: rest.VertexRestClient):
        self.inner = inner
        self.checked: list[tuple[str, str]] = []

    def post(self, path, body, params=None, *, idempotent=False):
        method = body["method"].removeprefix("HTTP_METHOD_")
        if "body" in body:
            slurm_openapi.validate_request(method, body["path"], body["body"])
        answer = self.inner.post(path, body, params, idempotent=idempotent)
        payload = (
            answer["structuredBody"] if "structuredBody" in answer else json.loads(answer["body"])
        )
        slurm_openapi.validate_response(method, body["path"], answer["status"], payload)
        self.checked.append((method, body["path"].split("?")[0]))
        return answer


@pytest.fixture
def cluster(slurm_emulator_factory, cluster_body):
    """(server, checked test client) of a RUNNING emulated cluster ``c1``."""
    server = slurm_emulator_factory()
    return server, CheckedClient.create_cluster(server.base_url, "c1", cluster_body)


def describe(**overrides: Any) -> script.JobDescription:
    fields: dict[str, Any] = dict(run_key="run-1", partition="a4", working_directory="/tmp")
    fields.update(overrides)
    return script.JobDescription(**fields)


# ----- requests the client builds ---------------------------------------------------------------

DESCRIPTIONS = {
    "argv": dict(command=["python", "-m", "vsp.examples.trainer", "--steps", "10"]),
    "script": dict(script="echo hello\nexit 0\n"),
    "gpus_time_warning": dict(
        command=["train"],
        nodes=2,
        tasks_per_node=8,
        gpus_per_node=8,
        cpus_per_task=4,
        time_limit_minutes=120,
        warning_signal="USR1@90",
    ),
    "account_qos_no_requeue_outputs": dict(
        command=["train"],
        account="ml",
        qos="normal",
        requeue=False,
        standard_output="/home/alice/%j.out",
        standard_error="/home/alice/%j.err",
        warning_signal="TERM",
        warning_seconds=300,
    ),
    "environment_and_labels": dict(
        command=["train"],
        environment={"WANDB_MODE": "offline", "MSG": "a b=c", "PATH": "/usr/bin:/bin"},
        spec_digest="abc123",
        pipeline_run="run-20250101",
    ),
    "extra_fields": dict(
        command=["train"],
        extra_fields={
            "memory_per_node": {"set": True, "infinite": False, "number": 4096},
            "kill_on_node_fail": False,
            "constraints": "a100",
            "mail_type": ["END", "FAIL"],
            "begin_time": {"set": True, "infinite": False, "number": 1_700_000_000},
            "nice": 10,
        },
    ),
}


@pytest.mark.parametrize("overrides", DESCRIPTIONS.values(), ids=DESCRIPTIONS.keys())
def test_submit_request_matches_job_submit_req(overrides):
    slurm_openapi.validate_request("POST", SUBMIT, describe(**overrides).to_request())


def test_validation_names_the_json_path_of_a_bad_value():
    body = describe(command=["x"]).to_request()
    body["job"]["time_limit"] = {"set": True, "number": "soon"}
    body["job"]["kill_on_node_fial"] = True
    with pytest.raises(slurm_openapi.ConformanceError) as caught:
        slurm_openapi.validate_request("POST", SUBMIT, body)
    text = str(caught.value)
    assert "$.job.time_limit.number: 'soon' is not of type 'integer'" in text
    assert "$.job.kill_on_node_fial: not a field of this schema" in text


def test_answer_checks_follow_what_slurm_writes():
    # Slurm writes a NULL pointer of an optional field as null (job_resources of a pending job).
    listing = {"jobs": [{"job_resources": None}], "last_backfill": {}, "last_update": {}}
    slurm_openapi.validate_response("GET", f"{API}/jobs/", 200, listing)
    # Nested required fields ("error/code") and undeclared fields are named by JSON path.
    entry = {"error": {"string": "x"}, "step_id": "7", "job_id": {}, "federation": {"sibling": ""}}
    with pytest.raises(slurm_openapi.ConformanceError) as caught:
        slurm_openapi.validate_response("DELETE", f"{API}/job/7", 200, {"status": [entry], "x": 1})
    text = str(caught.value)
    assert "$.status[0].error.code: required but missing" in text
    assert "$.status[0].error.message: required but missing" in text and "$.x: not a field" in text
    with pytest.raises(slurm_openapi.ConformanceError, match="no path of Slurm's"):
        slurm_openapi.validate_response("GET", f"{API}/nope", 404, {})


def test_job_fields_equal_the_spec_job_desc_msg():
    spec_fields = slurm_openapi.schema_properties("v0.0.42_job_desc_msg")
    assert set(job_fields.JOB_DESC_FIELDS) == spec_fields


def test_accounting_writes_and_client_calls_match(cluster):
    """The client's own calls (accounting reads and writes, submit, lookup, list, cancel)."""
    server, _ = cluster
    checked = CheckedRest(rest.VertexRestClient(LOCATION))
    ref = resource.ClusterRef(PROJECT, LOCATION, "c1")
    client = api.SlurmClient(checked, ref)
    user = client.whoami()
    report = client.ensure_association("ml", user, ["a4"], cluster="c1")
    assert report.accounts == ["ml"] and report.users == [user]
    home = str(server.state_dir / "slurm" / "c1" / "home")
    job = describe(script="sleep 30\n", account="ml", warning_signal="USR1", working_directory=home)
    job_id = client.submit(job)
    assert client.get_job(job_id).job_id == job_id
    assert [j.job_id for j in client.find_jobs("run-1", include_accounting=True)] == [job_id]
    client.cancel(job_id)
    writes = {p for m, p in checked.checked if m == "POST"}
    assert writes == {f"{DB}/accounts", f"{DB}/users", f"{DB}/associations", SUBMIT}


# ----- answers the emulator gives -----------------------------------------------------------------


def test_ping_nodes_partitions(cluster):
    _, client = cluster
    assert client.call("GET", f"{API}/ping").status == 200
    assert client.call("GET", f"{API}/nodes").payload["nodes"]
    assert client.call("GET", f"{API}/partitions").payload["partitions"]


def test_submit_answer_is_exactly_real_slurms(cluster):
    _, client = cluster
    reply = client.call("POST", SUBMIT, {"job": {"environment": []}, "script": SLEEPER})
    assert set(reply.payload) == {
        "job_id",
        "step_id",
        "job_submit_user_msg",
        "meta",
        "errors",
        "warnings",
    }
    client.cancel(reply.payload["job_id"])


def test_job_answers_pending_running_requeued_completed(cluster):
    server, client = cluster
    held = client.submit(SLEEPER, hold=True)
    assert client.job(held)["job_state"] == ["PENDING"]
    updated = client.call("POST", f"{API}/job/{held}", {"comment": "note", "hold": True})
    assert (updated.status, updated.payload["results"]) == (200, None)
    running = client.submit(SLEEPER)
    client.wait_state(running, "RUNNING")
    server.app.slurm.preempt_now("c1", running)
    requeued = client.wait_job(running, lambda j: j["restart_cnt"] == 1)
    assert requeued["job_state"][0] == "PENDING"
    done = client.submit("#!/bin/bash\ntrue\n")
    client.wait_state(done, "COMPLETED")
    assert len(client.call("GET", f"{API}/jobs").payload["jobs"]) == 3
    assert client.db_job(done)["job_id"] == done
    too_late = client.call("POST", f"{API}/job/{done}", {"comment": "note"})
    assert too_late.status == 500 and too_late.payload["errors"][0]["error_number"] == 2084
    assert client.call("POST", f"{API}/job/999", {"comment": "note"}).status == 404
    assert client.db_job(999) is None
    assert client.call("GET", f"{DB}/jobs?job_name=&state=COMPLETED").payload["jobs"]
    for job_id in (held, running):
        client.cancel(job_id)


def test_cancel_answers_carry_a_status_list_like_real_slurm(cluster):
    _, client = cluster
    running = client.submit(SLEEPER)
    client.wait_state(running, "RUNNING")
    cancelled = client.cancel(running)
    assert (cancelled.status, cancelled.payload["status"]) == (200, [])
    assert cancelled.payload["errors"] == [] and cancelled.payload["warnings"] == []
    finished = client.submit("#!/bin/bash\ntrue\n")
    client.wait_state(finished, "COMPLETED")
    again = client.cancel(finished)
    assert again.status == 200 and again.payload["errors"] == []
    assert again.payload["status"] == [
        {
            "error": {
                "string": "Job/step already completing or completed",
                "code": 2021,
                "message": "Job/step already completing or completed",
            },
            "step_id": str(finished),
            "job_id": {"set": True, "infinite": False, "number": finished},
            "federation": {"sibling": ""},
        }
    ]
    unknown = client.cancel(12345)
    assert unknown.status == 200 and unknown.payload["errors"] == []
    (entry,) = unknown.payload["status"]
    assert entry["error"]["code"] == 2017 and entry["job_id"]["set"] is False


def test_accounting_answers(cluster):
    _, client = cluster
    assert client.call("POST", f"{DB}/accounts", {"accounts": [ACCOUNT]}).status == 200
    users = {"users": [{"name": "alice", "default": {"account": "ml"}}]}
    assert client.call("POST", f"{DB}/users", users).status == 200
    link = {"associations": [{"account": "ml", "user": "alice", "partition": "a4"}]}
    assert client.call("POST", f"{DB}/associations", link).status == 200
    for kind in ("accounts", "users", "associations"):
        assert client.call("GET", f"{DB}/{kind}").payload[kind]


def test_error_answers(cluster):
    _, client = cluster
    unknown_job = client.call("GET", f"{API}/job/99")
    assert unknown_job.status == 404 and unknown_job.payload["errors"]
    # A path slurmrestd does not serve is a plain-text 404, outside the OpenAPI document.
    for method, path in (
        ("GET", f"{API}/nope"),
        ("GET", "/slurm/v0.0.40/jobs"),
        ("POST", f"{API}/ping"),
    ):
        reply = SlurmTestClient.call(client, method, path, {} if method == "POST" else None)
        assert (reply.status, reply.payload, reply.text) == (404, None, slurm_api.NO_PATH_TEXT)
