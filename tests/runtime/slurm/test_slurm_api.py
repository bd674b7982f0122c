"""Tests of the Slurm Job API client against a fake REST client with canned proxy answers.

Every canned answer is served in both wrapper forms the docs disagree on: ``{"status", "body":
"<JSON string>"}`` and ``{"status", "structuredBody": {...}}``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from slurm_fakes import PROXY, REF, err, make_job, record

from vsp.components.runtime.core import errors
from vsp.components.runtime.slurm import api, error_codes, script

# ----- submit ---------------------------------------------------------------------------------


def test_submit_sends_the_exact_proxy_body_once(fake, client):
    job = make_job()
    fake.on("POST", "/slurm/v0.0.42/job/submit", {"job_id": 42, "step_id": "batch", "errors": []})
    assert client.submit(job) == 42
    assert fake.calls == [
        {
            "path": PROXY,
            "body": {
                "method": "HTTP_METHOD_POST",
                "path": "/slurm/v0.0.42/job/submit",
                "body": {
                    "job": {
                        "name": "run-1",
                        "comment": "vsp-run-key=run-1",
                        "partition": "spot",
                        "current_working_directory": "/home/alice/runs",
                        "environment": [f"PATH={script.DEFAULT_PATH}", "VSP_RUN_KEY=run-1"],
                        "minimum_nodes": 1,
                        "maximum_nodes": 1,
                        "tasks_per_node": 1,
                        "tasks": 1,
                        "time_limit": {"set": True, "infinite": False, "number": 60},
                        "requeue": True,
                        "open_mode": ["APPEND"],
                        "kill_warning_signal": "USR1",
                        "kill_warning_delay": {"set": True, "infinite": False, "number": 30},
                        "kill_warning_flags": ["BATCH_JOB"],
                        "script": job.batch_script(),
                    }
                },
            },
            "idempotent": False,
        }
    ]


def test_submit_reads_job_id_from_result_object(fake, client):
    fake.on("POST", "/slurm/v0.0.42/job/submit", {"result": {"job_id": 7}, "errors": []})
    assert client.submit(make_job()) == 7


def test_held_job_is_accepted_despite_errors(fake, client, caplog):
    held = {"job_id": 43, "errors": [err(2042, "Job is in held state, pending scheduler release")]}
    fake.on("POST", "/slurm/v0.0.42/job/submit", (held, 200))
    with caplog.at_level(logging.WARNING):
        assert client.submit(make_job()) == 43
    assert "held state" in caplog.text


@pytest.mark.parametrize(
    "number, text, fix",
    [
        (2045, "Invalid account or account/partition combination specified", "sacctmgr add User"),
        (2000, "Invalid partition name specified", "slurm_spec.partitions"),
        (2051, "Requested time limit is invalid (missing or exceeds some limit)", "MaxTime"),
        (2029, "Invalid feature specification", "Slurm's message"),
    ],
)
def test_rejected_submission_is_a_user_error_with_the_fix(fake, client, number, text, fix):
    answer = {"errors": [err(number, text)], "job_id": None}
    fake.on("POST", "/slurm/v0.0.42/job/submit", (answer, 500))
    with pytest.raises(error_codes.SlurmRejectedError) as caught:
        client.submit(make_job())
    assert isinstance(caught.value, errors.UserError)
    assert text in str(caught.value) and fix in str(caught.value)
    assert caught.value.number == number
    assert len(fake.calls) == 1


def test_unavailable_controller_makes_submission_outcome_unknown(fake, client):
    answer = {"errors": [err(1800, "Unable to contact slurm controller (connect failure)")]}
    fake.on("POST", "/slurm/v0.0.42/job/submit", (answer, 500))
    with pytest.raises(error_codes.SlurmSubmitUnknownError, match="find_jobs") as caught:
        client.submit(make_job())
    assert isinstance(caught.value, errors.TransientError)


def test_transport_failure_on_submit_is_not_retried(fake, client):
    blip = errors.UnavailableError("reset", http_status=503)
    fake.on("POST", "/slurm/v0.0.42/job/submit", blip)
    with pytest.raises(error_codes.SlurmSubmitUnknownError, match="before submitting again"):
        client.submit(make_job())
    assert [c["idempotent"] for c in fake.calls] == [False]


def test_unreadable_success_answer_to_submit_is_ambiguous(fake, client):
    fake.on("POST", "/slurm/v0.0.42/job/submit", ("Submitted batch job ???", 200))
    with pytest.raises(error_codes.SlurmSubmitUnknownError, match="find_jobs"):
        client.submit(make_job())


def test_google_level_rejection_propagates(fake, client):
    fake.on(
        "POST", "/slurm/v0.0.42/job/submit", errors.InvalidArgumentError("too big", http_status=400)
    )
    with pytest.raises(errors.InvalidArgumentError):
        client.submit(make_job())


# ----- job lookups ----------------------------------------------------------------------------


def test_get_job_reads_the_live_queue(fake, client):
    fake.on("GET", "/slurm/v0.0.42/job/42", {"jobs": [record(42, ["RUNNING"])], "errors": []})
    job = client.get_job(42)
    assert job.job_id == 42 and job.base_state == "RUNNING" and job.source == "live"
    assert fake.calls == [
        {
            "path": PROXY,
            "body": {"method": "HTTP_METHOD_GET", "path": "/slurm/v0.0.42/job/42"},
            "idempotent": True,
        }
    ]


DB_RECORD = {
    "jobs": [
        {
            "job_id": 42,
            "name": "run-1",
            "state": {"current": ["COMPLETED"], "reason": "None"},
            "exit_code": {"status": ["SUCCESS"], "return_code": {"set": True, "number": 0}},
            "time": {"submission": 100, "start": 110, "end": 200},
        }
    ]
}


@pytest.mark.parametrize(
    "live",
    [
        ({"errors": [err(2017, "Invalid job id specified")]}, 404),
        ({"errors": [err(2017, "Invalid job id specified")]}, 500),
        ({"errors": [{"description": "Job 42 not found"}]}, 200),
        ({"jobs": [], "errors": []}, 200),
        (errors.NotFoundError("no such job", http_status=404),),
    ],
)
def test_get_job_falls_back_to_slurmdb(fake, client, live):
    fake.on("GET", "/slurm/v0.0.42/job/42", live[0] if len(live) == 1 else live)
    fake.on("GET", "/slurmdb/v0.0.42/job/42", DB_RECORD)
    job = client.get_job(42)
    assert job.source == "slurmdb" and job.outcome() == "SUCCEEDED"
    assert fake.slurm_calls == [
        ("GET", "/slurm/v0.0.42/job/42"),
        ("GET", "/slurmdb/v0.0.42/job/42"),
    ]
    assert all(c["idempotent"] for c in fake.calls)


def test_get_job_unknown_everywhere(fake, client):
    fake.on("GET", "/slurm/v0.0.42/job/42", ({"errors": [err(2017, "Invalid job id")]}, 404))
    fake.on("GET", "/slurmdb/v0.0.42/job/42", ({"jobs": [], "errors": []}, 200))
    with pytest.raises(error_codes.SlurmJobNotFoundError, match="neither"):
        client.get_job(42)


def test_get_job_transient_live_error_does_not_fall_back(fake, client):
    answer = {"errors": [err(1800, "Unable to contact slurm controller (connect failure)")]}
    fake.on("GET", "/slurm/v0.0.42/job/42", (answer, 500))
    with pytest.raises(error_codes.SlurmUnavailableError) as caught:
        client.get_job(42)
    assert isinstance(caught.value, errors.TransientError)
    assert len(fake.calls) == 1


def test_unreadable_body_with_5xx_is_transient(fake, client):
    fake.on("GET", "/slurm/v0.0.42/job/42", ("<html>Bad gateway</html>", 502))
    with pytest.raises(error_codes.SlurmUnavailableError, match="Bad gateway"):
        client.get_job(42)


def test_warnings_are_logged_but_do_not_fail(fake, client, caplog):
    answer = {
        "jobs": [record(42, ["RUNNING"])],
        "warnings": [
            {"description": "Expected OpenAPI type=array", "source": "#/job/environment/"}
        ],
    }
    fake.on("GET", "/slurm/v0.0.42/job/42", answer)
    with caplog.at_level(logging.WARNING):
        assert client.get_job(42).base_state == "RUNNING"
    assert "Expected OpenAPI type=array" in caplog.text


def test_the_empty_queues_note_is_not_logged_as_a_warning(fake, client, caplog):
    # Slurm 24.11 answers GET /jobs on an empty queue with this warning: nothing is wrong.
    answer = {"jobs": [], "warnings": [{"description": "Zero jobs to dump", "source": ""}]}
    fake.on("GET", "/slurm/v0.0.42/jobs", answer)
    with caplog.at_level(logging.WARNING):
        assert client.list_jobs() == []
    assert caplog.text == ""


def test_a_cluster_deleted_under_the_step_is_a_user_error_that_says_so(fake, client):
    # Vertex answers NOT_FOUND for the cluster itself (Slurm's own 404s come in the body).
    # Before, it failed the training step as an internal error (exit 70) with the raw 404.
    gone = errors.NotFoundError("cluster not found", http_status=404, status="NOT_FOUND")
    fake.on("GET", "/slurm/v0.0.42/jobs", gone)
    with pytest.raises(api.ClusterGoneError) as caught:
        client.list_jobs()
    assert caught.value.exit_code == errors.EXIT_USER_ERROR
    assert isinstance(caught.value, errors.NotFoundError)  # a cancel still finds nothing to do
    assert str(caught.value).startswith("-> 404 NOT_FOUND: cluster ")
    assert caught.value.message.endswith(
        "no longer exists (the Slurm Job API answered 'cluster not found'): it was deleted "
        "while this step used it (another run's teardown, the reaper, or by hand). Fix: retry "
        "the run: create_cluster creates the cluster again and training resumes from its last "
        "checkpoint."
    )


def test_list_and_find_jobs_newest_first(fake, client):
    jobs = [
        record(1, ["COMPLETED"], submit=100),
        record(2, ["RUNNING"], name="other", submit=300, comment="vsp-run-key=run-1"),
        record(3, ["PENDING", "REQUEUED"], submit=200),
        record(4, ["RUNNING"], name="run-10", submit=400, comment="vsp-run-key=run-10"),
    ]
    fake.on("GET", "/slurm/v0.0.42/jobs", {"jobs": jobs})
    assert [j.job_id for j in client.list_jobs()] == [1, 2, 3, 4]
    assert [j.job_id for j in client.find_jobs("run-1")] == [2, 3, 1]
    assert fake.calls[0]["body"] == {"method": "HTTP_METHOD_GET", "path": "/slurm/v0.0.42/jobs"}


def test_find_jobs_can_include_accounting(fake, client):
    fake.on("GET", "/slurm/v0.0.42/jobs", {"jobs": [record(5, ["RUNNING"], submit=500)]})
    db = {
        "jobs": [
            {"job_id": 5, "name": "run-1", "state": {"current": ["RUNNING"]}, "time": {}},
            {
                "job_id": 3,
                "name": "run-1",
                "state": {"current": "FAILED"},
                "time": {"submission": 50},
            },
            {"job_id": 9, "name": "run-1x", "state": {"current": "FAILED"}, "time": {}},
        ]
    }
    fake.on("GET", "/slurmdb/v0.0.42/jobs", db)  # no query string in the proxied path
    found = client.find_jobs("run-1", include_accounting=True)
    assert [(j.job_id, j.source) for j in found] == [(5, "live"), (3, "slurmdb")]
    assert [c["body"]["path"] for c in fake.calls] == [
        "/slurm/v0.0.42/jobs",
        "/slurmdb/v0.0.42/jobs",
    ]


@pytest.mark.parametrize(
    "accounting",
    [
        # A Slurm without slurmdbd: slurmrestd's plain-text 404 (measured on Slurm 24.11).
        ("Unable find requested URL. Please view /openapi/v3 for API reference.", 404),
        ({"errors": [err(1007, "Unable to connect to database")]}, 500),
        (errors.InvalidArgumentError("path not allowed", http_status=400),),
    ],
)
def test_find_jobs_falls_back_to_the_live_queue_when_accounting_fails(
    fake, client, accounting, caplog
):
    fake.on("GET", "/slurm/v0.0.42/jobs", {"jobs": [record(5, ["PENDING"], submit=500)]})
    fake.on("GET", "/slurmdb/v0.0.42/jobs", accounting[0] if len(accounting) == 1 else accounting)
    found = client.find_jobs("run-1", include_accounting=True)
    assert [(j.job_id, j.source) for j in found] == [(5, "live")]
    assert "using the live queue only" in caplog.text


# ----- cancel ---------------------------------------------------------------------------------


def kill_status(job_id: int, code: int, text: str) -> dict[str, Any]:
    """A v0.0.42 DELETE /job/{id} answer with one failing ``status`` entry."""
    return {
        "status": [
            {
                "error": {"string": text, "code": code, "message": text},
                "step_id": str(job_id or 999),
                "job_id": {"set": bool(job_id), "infinite": False, "number": job_id},
                "federation": {"sibling": ""},
            }
        ],
        "errors": [],
        "warnings": [],
    }


def test_cancel_sends_delete_without_body(fake, client):
    fake.on("DELETE", "/slurm/v0.0.42/job/42", {"errors": []})
    assert client.cancel(42) is True
    assert fake.calls == [
        {
            "path": PROXY,
            "body": {"method": "HTTP_METHOD_DELETE", "path": "/slurm/v0.0.42/job/42"},
            "idempotent": True,
        }
    ]


@pytest.mark.parametrize(
    "answer",
    [
        ({"errors": [err(2021, "Job/step already completing or completed")]}, 500),
        ({"errors": [err(2017, "Invalid job id specified")]}, 404),
        (errors.NotFoundError("gone", http_status=404),),
        # Slurm 24.11 answers 200 with the failure per job in `status`, `errors` empty.
        (kill_status(5, 2021, "Job/step already completing or completed"), 200),
        (kill_status(0, 2017, "Invalid job id specified"), 200),
    ],
)
def test_cancel_of_finished_or_unknown_job_is_fine(fake, client, answer):
    fake.on("DELETE", "/slurm/v0.0.42/job/42", answer[0] if len(answer) == 1 else answer)
    assert client.cancel(42) is False


def test_cancel_of_someone_elses_job_is_an_error(fake, client):
    answer = {"errors": [err(2002, "Access/permission denied")]}
    fake.on("DELETE", "/slurm/v0.0.42/job/42", (answer, 403))
    with pytest.raises(error_codes.SlurmRejectedError, match="permission denied"):
        client.cancel(42)


def test_whoami_reads_meta_client_user(fake, client):
    fake.on("GET", "/slurm/v0.0.42/ping", {"meta": {"client": {"user": "alice"}}, "pings": []})
    assert client.whoami() == "alice"


def test_version_must_look_like_v0_0_n(fake):
    with pytest.raises(errors.UserError, match="v0.0.N"):
        api.SlurmClient(fake, REF, version="0.0.42")
    client = api.SlurmClient(fake, REF, version="v0.0.41")
    assert client.slurm_path("jobs") == "/slurm/v0.0.41/jobs"
