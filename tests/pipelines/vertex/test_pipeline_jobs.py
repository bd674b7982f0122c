"""Pipeline run and schedule requests: validation, exact bodies, tag resolution, schedule_cron."""

from __future__ import annotations

import re

import pytest
import yaml
from pipeline_fakes import AR_PARENT, DIGEST, HOST, PARENT, copy_template, write_cron_template
from pipeline_fakes import job as _job

from vsp.components.runtime.core import errors
from vsp.pipelines.vertex import jobs, schedules, template_parameters, templates


@pytest.fixture
def template(tmp_path):
    return copy_template(tmp_path)


@pytest.fixture
def cron_template(tmp_path):
    return write_cron_template(tmp_path)


def test_file_template_body_is_exact(template):
    request = _job(
        template,
        parameter_values={"project": "test-project", "spot_max_nodes": 4},
        service_account="runner@test-project.iam.gserviceaccount.com",
        labels={"team": "ml"},
    )
    with open(template) as handle:
        spec = yaml.safe_load(handle)
    assert request.body() == {
        "displayName": "cluster-lifecycle",
        "pipelineSpec": spec,
        "runtimeConfig": {
            "gcsOutputDirectory": "gs://bucket/root",
            "parameterValues": {"project": "test-project", "spot_max_nodes": 4},
        },
        "serviceAccount": "runner@test-project.iam.gserviceaccount.com",
        "labels": {"team": "ml"},
    }
    assert list(request.body()) == [
        "displayName",
        "pipelineSpec",
        "runtimeConfig",
        "serviceAccount",
        "labels",
    ]
    assert request.name == f"{PARENT}/pipelineJobs/run-1"
    assert "serviceAccount" not in _job(template).body()


def test_generated_job_id_and_display_name(template, cron_template):
    request = _job(template, job_id=None)
    assert re.fullmatch(r"cluster-lifecycle-\d{14}-[0-9a-f]{4}", request.job_id)
    assert request.display_name == "cluster-lifecycle"
    nightly = _job(cron_template, job_id=None)
    assert re.fullmatch(r"nightly-train-\d{14}-[0-9a-f]{4}", nightly.job_id)
    assert len(jobs.generate_job_id("x" * 300)) == 127
    assert _job(template, display_name="mine").body()["displayName"] == "mine"


@pytest.mark.parametrize(
    ("changes", "field", "shown"),
    [
        ({"project": "P"}, "project", "'P'"),
        ({"location": "global"}, "location", "'global'"),
        ({"pipeline_root": "/tmp/out"}, "pipeline_root", "'/tmp/out'"),
        ({"pipeline_root": ""}, "pipeline_root", "<missing>"),
        ({"service_account": "runner"}, "service_account", "'runner'"),
        ({"labels": {"Team": "ml"}}, "labels.Team", "'Team'"),
        ({"job_id": "Run_1"}, "job_id", "'Run_1'"),
        ({"job_id": "r" * 128}, "job_id", "'rrr"),
        ({"display_name": "d" * 129}, "display_name", "'ddd"),
        ({"template": "missing.yaml"}, "template", "'missing.yaml'"),
        ({"template": "gs://bucket/t.yaml"}, "template", "'gs://bucket/t.yaml'"),
        ({"template": f"{HOST}/pkg/sha256:abc"}, "template", "sha256:abc"),
        ({"template": "https://us-central1-docker.pkg.dev/p/r/pkg/v1"}, "template", "docker"),
    ],
)
def test_validation_names_field_value_and_fix(template, changes, field, shown):
    changes = dict(changes)
    with pytest.raises(errors.SpecValidationError) as raised:
        _job(changes.pop("template", template), **changes)
    assert field in raised.value.fields
    line = next(line for line in str(raised.value).splitlines() if f"- {field} = " in line)
    assert shown in line and "Fix:" in line


def test_all_problems_are_reported_at_once(template):
    with pytest.raises(errors.SpecValidationError) as raised:
        _job(template, project="P", location="", pipeline_root="x", job_id="A")
    assert raised.value.fields == ["project", "location", "pipeline_root", "job_id"]


def test_parameters_are_checked_against_the_template(template):
    with pytest.raises(errors.UserError) as raised:
        _job(template, parameter_values={"projekt": "p", "spot_max_nodes": "four"})
    message = str(raised.value)
    assert "parameter_values.projekt = 'p': The pipeline has no such parameter." in message
    assert "cluster_id, cluster_spec" in message  # the known ones are listed
    assert "parameter_values.spot_max_nodes = 'four': The pipeline declares it NUMBER_INTEGER" in (
        message
    )
    assert "parameter_values.project = <missing>: Required field" in message
    assert "--param project=VALUE" in message


def test_non_json_values_are_refused(template):
    with pytest.raises(errors.UserError, match="Is not a JSON value"):
        _job(template, parameter_values={"project": "p", "cluster_spec": {"x": {1, 2}}})


def test_typed_parameters_follow_declared_types(template):
    definitions = template_parameters.root_parameters(templates.load_pipeline_spec(template))
    raw = {"cluster_id": "001", "spot_max_nodes": "4", "cluster_spec": '{"a": 1}', "zone": ""}
    assert template_parameters.typed_parameters(raw, definitions) == {
        "cluster_id": "001",
        "spot_max_nodes": 4,
        "cluster_spec": {"a": 1},
        "zone": "",
    }
    assert template_parameters.typed_parameters({"cluster_id": "001"}, None) == {"cluster_id": 1}
    # A STRING given as a quoted JSON string is its content; other quotes stay as written.
    quoted = {"model_dir": '"/gcs/b/m/{run}"', "cluster_id": '"a"b"', "zone": '"'}
    assert template_parameters.typed_parameters(quoted, definitions) == {
        "model_dir": "/gcs/b/m/{run}",
        "cluster_id": '"a"b"',
        "zone": '"',
    }


def test_registry_tag_is_resolved_to_its_version(template):
    calls = []

    def resolver(host, package, tag):
        calls.append((host, package, tag))
        return f"{AR_PARENT}/packages/{package}/versions/{DIGEST}"

    request = _job(f"{HOST}/cluster-lifecycle/latest", parameter_values={"anything": 1})
    assert request.pipeline_parameters is None
    assert request.display_name == "cluster-lifecycle"
    resolved = request.resolved(resolver)
    assert calls == [(HOST, "cluster-lifecycle", "latest")]
    assert resolved.body() == {
        "displayName": "cluster-lifecycle",
        "templateUri": f"{HOST}/cluster-lifecycle/{DIGEST}",
        "runtimeConfig": {
            "gcsOutputDirectory": "gs://bucket/root",
            "parameterValues": {"anything": 1},
        },
        "labels": {},
    }
    assert resolved.job_id == request.job_id
    pinned = _job(f"{HOST}/cluster-lifecycle/{DIGEST}")
    assert pinned.resolved(resolver) is pinned and len(calls) == 1
    assert _job(template).resolved(resolver).template == template and len(calls) == 1
    with pytest.raises(errors.InternalError):
        request.resolved(lambda *_: "projects/x/versions/v1")


def test_schedule_body_injects_schedule_cron(cron_template):
    job = _job(cron_template, job_id=None)
    request = schedules.ScheduleRequest(
        job=job,
        display_name="nightly",
        cron="TZ=Europe/Paris 0 3 * * *",
        max_concurrent_run_count=1,
        max_run_count=30,
        start_time="2030-01-01T00:00:00Z",
        allow_queueing=False,
    )
    with open(cron_template) as handle:
        spec = yaml.safe_load(handle)
    assert request.body() == {
        "displayName": "nightly",
        "cron": "TZ=Europe/Paris 0 3 * * *",
        "maxConcurrentRunCount": 1,
        "maxRunCount": 30,
        "startTime": "2030-01-01T00:00:00Z",
        "allowQueueing": False,
        "createPipelineJobRequest": {
            "parent": PARENT,
            "pipelineJob": {
                "displayName": "Nightly Train",
                "pipelineSpec": spec,
                "runtimeConfig": {
                    "gcsOutputDirectory": "gs://bucket/root",
                    "parameterValues": {
                        "project": "test-project",
                        "schedule_cron": "TZ=Europe/Paris 0 3 * * *",
                    },
                },
                "labels": {},
            },
        },
    }


def test_schedule_cron_set_by_the_user_or_unknown_is_kept(cron_template, template):
    job = _job(
        cron_template, parameter_values={"project": "test-project", "schedule_cron": "0 * * * *"}
    )
    request = schedules.ScheduleRequest(job, "n", "0 3 * * *", 1)
    values = request.body()["createPipelineJobRequest"]["pipelineJob"]["runtimeConfig"]
    assert values["parameterValues"]["schedule_cron"] == "0 * * * *"
    plain = schedules.ScheduleRequest(_job(template), "n", "0 3 * * *", 1)
    assert "schedule_cron" not in plain.job.parameter_values
    assert list(plain.body()) == [
        "displayName",
        "cron",
        "maxConcurrentRunCount",
        "createPipelineJobRequest",
    ]
    assert schedules.with_schedule_cron({}, None, "0 3 * * *") == {}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"cron": "0 3 * *"}, "cron"),
        ({"cron": "TZ=Mars/Base 0 3 * * *"}, "cron"),
        ({"max_concurrent_run_count": 0}, "max_concurrent_run_count"),
        ({"max_concurrent_run_count": None}, "max_concurrent_run_count"),
        ({"max_run_count": 0}, "max_run_count"),
        ({"display_name": ""}, "display_name"),
        ({"start_time": "2030-01-01"}, "start_time"),
        ({"end_time": "soon"}, "end_time"),
        ({"start_time": "2030-01-02T00:00:00Z", "end_time": "2030-01-01T00:00:00Z"}, "end_time"),
        ({"end_time": "2020-01-01T00:00:00Z"}, "end_time"),
        ({"start_time": "2030-01-01T00:00:00Z", "end_time": "2030-01-01T02:59:00Z"}, "end_time"),
    ],
)
def test_schedule_validation(template, changes, field):
    fields = dict(
        job=_job(template), display_name="n", cron="0 3 * * *", max_concurrent_run_count=1
    )
    fields.update(changes)
    with pytest.raises(errors.SpecValidationError) as raised:
        schedules.ScheduleRequest(**fields)
    assert raised.value.fields == [field]


def test_an_end_time_before_any_run_names_the_first_tick(template):
    """A schedule that would start no run (its end passed, or before the cron's first tick
    after its start) is refused before anything is created, naming that tick."""
    job = _job(template)
    with pytest.raises(errors.SpecValidationError) as raised:
        schedules.ScheduleRequest(
            job, "n", "TZ=Europe/Paris 0 3 * * *", 1,
            start_time="2030-01-01T00:00:00Z", end_time="2030-01-01T01:59:59Z",
        )  # fmt: skip
    assert raised.value.problems[0].problem == (
        "Comes before the cron's first tick (2030-01-01T02:00:00Z, cron 'TZ=Europe/Paris 0 3 * * "
        "*' from 2030-01-01T00:00:00Z): the schedule would start no run."
    )
    assert raised.value.problems[0].fix == (
        "Pass an --end-time after 2030-01-01T02:00:00Z, or another --cron."
    )
    with pytest.raises(errors.SpecValidationError, match="Has passed .*would start no run"):
        schedules.ScheduleRequest(job, "n", "0 3 * * *", 1, end_time="2020-01-01T00:00:00Z")
    fits = schedules.ScheduleRequest(
        job, "n", "TZ=Europe/Paris 0 3 * * *", 1,
        start_time="2030-01-01T00:00:00Z", end_time="2030-01-01T02:00:00Z",
    )  # fmt: skip
    assert fits.body()["endTime"] == "2030-01-01T02:00:00Z"


def test_unknown_time_zone_message_keeps_its_case(template):
    with pytest.raises(errors.UserError, match="Unknown time zone 'Mars/Base'"):
        schedules.ScheduleRequest(_job(template), "n", "TZ=Mars/Base 0 3 * * *", 1)
