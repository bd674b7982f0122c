"""`vsp submit` and `vsp publish` against the emulator (exact request bodies); `vsp schedule` is
in ``test_cli_schedule``."""

from __future__ import annotations

import json
import re

import google.auth.exceptions
import kfp.registry
import pytest
import requests
import yaml
from click.testing import CliRunner

from vsp.components.runtime.core import polling
from vsp.pipelines.cli import main
from vsp.pipelines.vertex import jobs

LOC = ["--project", "test-project", "--location", "us-central1"]
PARENT = "projects/test-project/locations/us-central1"
HOST = "https://us-central1-kfp.pkg.dev/test-project/pipelines"
DIGEST = "sha256:" + "cd" * 32
AR_PARENT = "projects/test-project/locations/us-central1/repositories/pipelines"
CONSOLE = "https://console.cloud.google.com/vertex-ai/locations/us-central1/pipelines/runs"


@pytest.fixture(autouse=True)
def fast_lookup(monkeypatch):
    """No real one-second pause before a lost create is looked up."""
    monkeypatch.setattr(jobs, "CREATE_BACKOFF", polling.Backoff(0.01, 0.02, 1.0, 0))


class FakeRegistryClient:
    """Stands in for ``kfp.registry.RegistryClient``; records every call."""

    calls: list = []
    error: Exception | None = None

    def __init__(self, host):
        self.calls.append(("init", host))

    def get_tag(self, package, tag):
        self.calls.append(("get_tag", package, tag))
        if self.error is not None:
            raise self.error
        found = f"{AR_PARENT}/packages/{package}"
        return {"name": f"{found}/tags/{tag}", "version": f"{found}/versions/{DIGEST}"}

    def upload_pipeline(self, file_name, tags=None, extra_headers=None):
        self.calls.append(("upload_pipeline", file_name, tags, extra_headers))
        return "cluster-lifecycle", DIGEST


@pytest.fixture
def registry(monkeypatch):
    FakeRegistryClient.calls = []
    FakeRegistryClient.error = None
    monkeypatch.setattr(kfp.registry, "RegistryClient", FakeRegistryClient)
    return FakeRegistryClient


def _run(args):
    return CliRunner().invoke(main.main, args)


def _api_entries(emulator):
    return [(e["method"], e["path"], e["status"]) for e in emulator.journal()]


def test_submit_sends_the_exact_body(emulator, template):
    result = _run(
        ["submit", *LOC, "--template", template, "--pipeline-root", "gs://bucket/root"]
        + ["--param", "project=test-project", "--param", "cluster_id=001"]
        + ["--param", "spot_max_nodes=4", "--param", 'cluster_spec={"labels": {"a": "b"}}']
        + ["--service-account", "runner@test-project.iam.gserviceaccount.com"]
        + ["--label", "team=ml", "--job-id", "run-1", "--display-name", "lifecycle run"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"created: {PARENT}/pipelineJobs/run-1",
        "state: PIPELINE_STATE_PENDING",
        f"console: {CONSOLE}/run-1?project=test-project",
    ]
    (entry,) = emulator.journal()
    with open(template) as handle:
        spec = yaml.safe_load(handle)
    assert (entry["method"], entry["path"], entry["query"], entry["status"]) == (
        "POST",
        f"/v1/{PARENT}/pipelineJobs",
        {"pipelineJobId": "run-1"},
        200,
    )
    assert entry["body"] == {
        "displayName": "lifecycle run",
        "pipelineSpec": spec,
        "runtimeConfig": {
            "gcsOutputDirectory": "gs://bucket/root",
            "parameterValues": {
                "project": "test-project",
                "cluster_id": "001",
                "spot_max_nodes": 4,
                "cluster_spec": {"labels": {"a": "b"}},
                "location": "us-central1",
            },
        },
        "serviceAccount": "runner@test-project.iam.gserviceaccount.com",
        "labels": {"team": "ml"},
    }


def test_submit_generates_the_job_id(emulator, template):
    result = _run(
        ["submit", *LOC, "--template", template, "--pipeline-root", "gs://bucket/root"]
        + ["--param", "project=test-project"]
    )
    assert result.exit_code == 0, result.output
    job_id = re.search(
        r"pipelineJobs/(cluster-lifecycle-\d{14}-[0-9a-f]{4})$", result.output.splitlines()[0]
    )
    assert job_id, result.output
    assert f"{CONSOLE}/{job_id.group(1)}?project=test-project" in result.output
    assert emulator.journal()[0]["query"] == {"pipelineJobId": job_id.group(1)}


def test_submit_dry_run_sends_nothing(emulator, template):
    result = _run(
        ["submit", *LOC, "--template", template, "--pipeline-root", "gs://bucket/root"]
        + ["--param", "project=test-project", "--job-id", "dry", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    # --project and --location fill the pipeline's parameters of those names.
    assert body["runtimeConfig"]["parameterValues"] == {
        "project": "test-project",
        "location": "us-central1",
    }
    assert body["displayName"] == "cluster-lifecycle" and "pipelineSpec" in body
    assert f"POST v1/{PARENT}/pipelineJobs?pipelineJobId=dry (not sent)" in result.stderr
    assert emulator.journal() == []


def test_submit_invalid_request_fails_before_sending(emulator, template):
    result = _run(
        ["submit", "--project", "test-project", "--location", "global", "--template", template]
        + ["--pipeline-root", "/tmp/out", "--param", "projekt=x", "--label", "Team=ml"]
    )
    assert result.exit_code == 2
    for text in (
        "location = 'global'",
        "pipeline_root = '/tmp/out'",
        "parameter_values.projekt = 'x': The pipeline has no such parameter",
        "labels.Team",
    ):
        assert text in result.output
    assert "parameter_values.project" not in result.output  # filled from --project
    assert emulator.journal() == []


def test_a_refused_request_lists_the_first_steps_problems_in_the_same_pass(emulator):
    # Required parameters missing and a bad pipeline root, with a bad cluster id and a misspelt
    # key the first step refuses: every problem in one message, each parameter once.
    result = _run(
        ["submit", *LOC, "--template", "slurm-spot-training", "--pipeline-root", "/tmp/out"]
        + ["--param", "cluster_id=001", "--param", 'training_options={"poll_secnds": 2}']
    )
    assert result.exit_code == 2
    for text in (
        "pipeline_root = '/tmp/out'",
        "parameter_values.command = <missing>",
        "cluster_id = '001': Cluster id must be",
        "training_options.poll_secnds = 2: is not known. Fix: did you mean 'poll_seconds'?",
    ):
        assert text in result.output
    problems = [line for line in result.output.splitlines() if line.startswith("  - ")]
    assert sum(line.startswith("  - command = ") for line in problems) == 0  # said once above
    assert emulator.journal() == []


def test_a_schedule_lists_its_own_problems_with_the_runs_and_the_first_steps(emulator):
    # Found by a new user's run: the cron, the end time and the run count came one try after
    # the run's problems, and a missing model_id hid the first step's check of the cron.
    result = _run(
        ["schedule", *LOC, "--template", "slurm-spot-training", "--pipeline-root", "gs://b/r"]
        + ["--cron", "0 0 3 * * *", "--end-time", "2020-01-01T00:00:00Z", "--max-runs", "0"]
        + ["--param", "cluster_id=projects/p/locations/l/modelDevelopmentClusters/llmtrain"]
    )
    assert result.exit_code == 2
    problems = [line for line in result.output.splitlines() if line.startswith("  - ")]
    fields = [line[4:].split(" = ")[0] for line in problems]
    assert fields == [
        "pipeline_root",
        *(f"parameter_values.{name}" for name in ("command", "model_dir", "model_id")),
        *(f"parameter_values.{name}" for name in ("serving_image", "working_directory")),
        "cron",
        "max_run_count",
        "end_time",
        *(f"cluster_options.{n}" for n in ("network", "zone", "home_directory_storage")),
        "cluster_id",
    ]  # the cron once: the first step's schedule_cron is the same value
    assert problems[-1].endswith("Fix: Pass the id alone, 'llmtrain' (the last part of the "
                                 "cluster's name).")  # fmt: skip
    assert "Has passed" in problems[fields.index("end_time")]
    assert emulator.journal() == []


def test_a_missing_required_parameter_does_not_hide_the_first_steps_later_checks(emulator):
    # Without model_id the first step's registration check (which reads schedule_cron) broke,
    # and its problems came only once model_id was given.
    place = '{"network": "default", "zone": "us-central1-a", "home_directory_storage": "h"}'
    result = _run(
        ["submit", *LOC, "--template", "slurm-spot-training", "--pipeline-root", "gs://bkt/r"]
        + ["--param", 'command=["python", "t.py"]', "--param", "model_dir=gs://bkt/m"]
        + ["--param", "serving_image=img", "--param", "working_directory=/home/run"]
        + ["--param", f"cluster_options={place}", "--param", "schedule_cron=0 0 3 * * *"]
    )
    assert result.exit_code == 2
    problems = [line for line in result.output.splitlines() if line.startswith("  - ")]
    assert [line[4:].split(" = ")[0] for line in problems] == [
        "parameter_values.model_id",
        "schedule_cron",
    ]
    assert emulator.journal() == []


def test_submit_registry_tag_is_resolved_to_sha256(emulator, registry):
    result = _run(
        ["submit", *LOC, "--template", f"{HOST}/cluster-lifecycle/latest"]
        + ["--pipeline-root", "gs://bucket/root", "--param", "nodes=2", "--job-id", "pinned"]
    )
    assert result.exit_code == 0, result.output
    assert registry.calls == [("init", HOST), ("get_tag", "cluster-lifecycle", "latest")]
    assert f"-> {HOST}/cluster-lifecycle/{DIGEST}" in result.stderr
    (entry,) = emulator.journal()
    assert entry["body"] == {
        "displayName": "cluster-lifecycle",
        "templateUri": f"{HOST}/cluster-lifecycle/{DIGEST}",
        "runtimeConfig": {
            "gcsOutputDirectory": "gs://bucket/root",
            "parameterValues": {"nodes": 2},
        },
        "labels": {},
    }
    job = requests.get(f"{emulator.base_url}/v1/{PARENT}/pipelineJobs/pinned").json()
    assert job["templateMetadata"] == {"version": DIGEST}


def _http_error(status):
    response = requests.Response()
    response.status_code = status
    return requests.HTTPError(f"{status} Error", response=response)


@pytest.mark.parametrize(
    ("error", "code", "text"),
    [
        (_http_error(404), 2, "not found. Fix:"),
        (_http_error(403), 2, "permission denied (403)"),
        (_http_error(503), 75, "HTTPError (503)"),
        (requests.ConnectionError("reset"), 75, "ConnectionError (no answer)"),
        (google.auth.exceptions.DefaultCredentialsError("none"), 2, "application-default login"),
    ],
)
def test_registry_failures_follow_the_taxonomy(emulator, registry, error, code, text):
    registry.error = error
    result = _run(
        ["submit", *LOC, "--template", f"{HOST}/cluster-lifecycle/nope"]
        + ["--pipeline-root", "gs://bucket/root"]
    )
    assert result.exit_code == code, result.output
    assert f"error: tag 'nope' of {HOST}/cluster-lifecycle: " in result.output
    assert text in result.output
    assert emulator.journal() == []


def test_lost_create_answer_is_looked_up_and_one_job_exists(emulator, template):
    rule = emulator.add_fault(action="reset_after", method="POST", path=r"/pipelineJobs$")
    result = _run(
        ["submit", *LOC, "--template", template, "--pipeline-root", "gs://bucket/root"]
        + ["--param", "project=test-project", "--job-id", "lost-1"]
    )
    assert result.exit_code == 0, result.output
    assert f"created: {PARENT}/pipelineJobs/lost-1" in result.output
    entries = emulator.journal()
    assert [(e["method"], e["status"], e["fault"]) for e in entries] == [
        ("POST", "reset", rule.id),
        ("GET", 200, None),
    ]
    assert entries[1]["path"] == f"/v1/{PARENT}/pipelineJobs/lost-1"
    listed = requests.get(f"{emulator.base_url}/v1/{PARENT}/pipelineJobs").json()
    assert [j["name"] for j in listed["pipelineJobs"]] == [f"{PARENT}/pipelineJobs/lost-1"]


def test_publish_uploads_through_the_registry_client(registry, template):
    result = _run(["publish", template, "--host", HOST, "--tag", "latest", "--tag", "v1"])
    assert result.exit_code == 0, result.output
    assert registry.calls == [
        ("init", HOST),
        ("upload_pipeline", template, ["latest", "v1"], None),
    ]
    assert result.output.splitlines() == [
        "package: cluster-lifecycle",
        f"version: {DIGEST}",
        f"templateUri: {HOST}/cluster-lifecycle/{DIGEST}",
        f"tag: {HOST}/cluster-lifecycle/latest",
        f"tag: {HOST}/cluster-lifecycle/v1",
    ]


def test_publish_validates_before_uploading(registry, template):
    result = _run(["publish", template, "--host", HOST, "--tag", "sha256:abc"])
    assert result.exit_code == 2 and "tags[0] = 'sha256:abc'" in result.output
    host = _run(["publish", template, "--host", "https://us-central1-docker.pkg.dev/p/r"])
    assert host.exit_code == 2 and "host = " in host.output
    assert registry.calls == []
