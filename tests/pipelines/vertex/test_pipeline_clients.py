"""Pipeline run and schedule clients (no blind create, no duplicate schedule) and publish."""

from __future__ import annotations

import pytest
from pipeline_fakes import DIGEST, HOST, PARENT, FakeRest, copy_template, exists, lost, not_found
from pipeline_fakes import job as _job

from vsp.components.runtime.core import errors, polling
from vsp.pipelines.vertex import jobs, schedules, templates


@pytest.fixture
def template(tmp_path):
    return copy_template(tmp_path)


def _client(fake):
    return jobs.PipelineJobsClient(fake, clock=polling.FakeClock())


def test_create_posts_once_with_the_id(template):
    fake = FakeRest(post=[{"name": "created"}])
    assert _client(fake).create(_job(template)) == {"name": "created"}
    assert fake.calls == [("POST", f"v1/{PARENT}/pipelineJobs", {"pipelineJobId": "run-1"})]


def test_lost_answer_is_looked_up_not_resent(template):
    fake = FakeRest(post=[lost()], get=[{"name": "found"}])
    assert _client(fake).create(_job(template)) == {"name": "found"}
    assert [c[0] for c in fake.calls] == ["POST", "GET"]
    assert fake.calls[1][1] == f"v1/{PARENT}/pipelineJobs/run-1"


def test_lost_answer_then_absent_is_sent_again_and_409_means_ours(template):
    fake = FakeRest(post=[lost(), exists()], get=[not_found(), {"name": "ours"}])
    assert _client(fake).create(_job(template)) == {"name": "ours"}
    assert [c[0] for c in fake.calls] == ["POST", "GET", "POST", "GET"]


def test_taken_id_is_a_user_error(template):
    fake = FakeRest(post=[exists()])
    with pytest.raises(errors.UserError, match="job_id = 'run-1': a pipeline job with this id"):
        _client(fake).create(_job(template))
    assert len(fake.calls) == 1


def test_create_gives_up_after_the_attempts(template):
    fake = FakeRest(post=[lost()] * 4, get=[not_found()] * 4)
    with pytest.raises(errors.TransientError, match="not created after 4 attempts"):
        _client(fake).create(_job(template))
    assert [c[0] for c in fake.calls] == ["POST", "GET"] * 4


def _schedule(template, name="nightly"):
    return schedules.ScheduleRequest(_job(template), name, "0 3 * * *", 1)


def test_live_schedule_with_the_same_name_is_refused(template):
    live = {"name": f"{PARENT}/schedules/1", "displayName": "nightly", "state": "PAUSED"}
    fake = FakeRest(get=[{"schedules": [live]}])
    client = schedules.SchedulesClient(fake, clock=polling.FakeClock())
    with pytest.raises(errors.UserError, match="a schedule with this name already exists"):
        client.create(_schedule(template))
    assert fake.calls == [("GET", f"v1/{PARENT}/schedules", {"filter": 'display_name="nightly"'})]


def test_replace_creates_then_deletes_and_completed_ones_do_not_count(template):
    live = {"name": f"{PARENT}/schedules/1", "displayName": "nightly", "state": "ACTIVE"}
    done = {"name": f"{PARENT}/schedules/2", "displayName": "nightly", "state": "COMPLETED"}
    new = {"name": f"{PARENT}/schedules/3", "displayName": "nightly", "state": "ACTIVE"}
    fake = FakeRest(
        get=[{"schedules": [live, done], "nextPageToken": "t"}, {}, {"schedules": [new, done]}],
        delete=[{"name": f"{PARENT}/operations/9", "done": True}],
        post=[new],
    )
    client = schedules.SchedulesClient(fake, clock=polling.FakeClock())
    assert client.create(_schedule(template), replace=True) == new
    # The old one is deleted only once the new one exists, then the name is looked at again.
    assert [(c[0], c[1].rsplit("/", 1)[-1]) for c in fake.calls] == [
        ("GET", "schedules"),
        ("GET", "schedules"),
        ("POST", "schedules"),
        ("DELETE", "1"),
        ("GET", "schedules"),
    ]
    assert fake.calls[1][2] == {"filter": 'display_name="nightly"', "pageToken": "t"}


def test_a_refused_replacement_leaves_the_old_schedule(template):
    # It deleted the old one first: a 403 on the create left the pipeline with no schedule.
    live = {"name": f"{PARENT}/schedules/1", "displayName": "nightly", "state": "ACTIVE"}
    denied = errors.UserError("POST schedules -> 403 PERMISSION_DENIED")
    fake = FakeRest(get=[{"schedules": [live]}], post=[denied])
    client = schedules.SchedulesClient(fake, clock=polling.FakeClock())
    with pytest.raises(errors.UserError, match="PERMISSION_DENIED"):
        client.create(_schedule(template), replace=True)
    assert [c[0] for c in fake.calls] == ["GET", "POST"]  # no DELETE


@pytest.mark.parametrize("ours_first", [True, False])
def test_two_creates_racing_under_one_name_keep_the_earlier(template, ours_first):
    ours = {"name": f"{PARENT}/schedules/5", "displayName": "nightly", "state": "ACTIVE"}
    theirs = {"name": f"{PARENT}/schedules/4", "displayName": "nightly", "state": "ACTIVE"}
    ours["createTime"] = "2026-12-06T02:00:00.100Z" if ours_first else "2026-12-06T02:00:00.300Z"
    theirs["createTime"] = "2026-12-06T02:00:00.200Z"
    fake = FakeRest(
        get=[{}, {"schedules": [theirs, ours]}],
        post=[ours],
        delete=[{"name": f"{PARENT}/operations/9", "done": True}],
    )
    client = schedules.SchedulesClient(fake, clock=polling.FakeClock())
    kept = client.create(_schedule(template))
    assert kept == (ours if ours_first else theirs)
    deletes = [c[1].rsplit("/", 1)[-1] for c in fake.calls if c[0] == "DELETE"]
    assert deletes == ([] if ours_first else ["5"])  # the later one deletes itself


def test_a_race_lost_to_another_cron_is_an_error_not_a_success(template):
    # The loser printed "created:" with the winner's schedule, whose cron it had not asked for.
    ours = {"name": f"{PARENT}/schedules/5", "createTime": "2026-12-06T02:00:00.3Z"}
    theirs = {"name": f"{PARENT}/schedules/4", "createTime": "2026-12-06T02:00:00.2Z"}
    for schedule, cron in ((ours, "0 3 * * *"), (theirs, "0 2 * * *")):
        schedule.update(displayName="nightly", state="ACTIVE", cron=cron)
    fake = FakeRest(
        get=[{}, {"schedules": [theirs, ours]}],
        post=[ours],
        delete=[{"name": f"{PARENT}/operations/9", "done": True}],
    )
    client = schedules.SchedulesClient(fake, clock=polling.FakeClock())
    with pytest.raises(errors.UserError, match="rerun with --replace to put this one in its"):
        client.create(_schedule(template))
    assert [c[1].rsplit("/", 1)[-1] for c in fake.calls if c[0] == "DELETE"] == ["5"]


def test_schedule_filter_escapes_quotes():
    assert schedules.filter_for('a "b" \\c') == 'display_name="a \\"b\\" \\\\c"'


def test_publish_uploads_with_tags_and_returns_the_uris(template):
    calls = []

    def upload(path, tags):
        calls.append((path, tags))
        return "cluster-lifecycle", DIGEST

    published = templates.publish(template, HOST + "/", ["latest", "v1.2"], upload)
    assert calls == [(template, ["latest", "v1.2"])]
    assert published == templates.Published(
        package="cluster-lifecycle",
        version=DIGEST,
        template_uri=f"{HOST}/cluster-lifecycle/{DIGEST}",
        tag_uris=[f"{HOST}/cluster-lifecycle/latest", f"{HOST}/cluster-lifecycle/v1.2"],
    )


@pytest.mark.parametrize(
    ("host", "tags", "path", "field"),
    [
        ("https://us-central1-docker.pkg.dev/test-project/r", [], None, "host"),
        ("https://us-central1-kfp.pkg.dev/test-project", [], None, "host"),
        (HOST, ["sha256:abc"], None, "tags[0]"),
        (HOST, ["ok", "bad tag"], None, "tags[1]"),
        (HOST, [], "missing.yaml", "file"),
    ],
)
def test_publish_validation_before_any_upload(template, host, tags, path, field):
    def upload(*_):
        raise AssertionError("must not upload")

    with pytest.raises(errors.SpecValidationError) as raised:
        templates.publish(path or template, host, tags, upload)
    assert raised.value.fields == [field]


def test_shared_folder_warnings_name_each_folder_without_a_run_token():
    values = {
        "model_dir": "gs://b/model/{run}",
        "base_output_directory": "gs://b/out/",
        "training_options": {"checkpoint_dir": "/gcs/b/ckpt"},
    }
    assert schedules.shared_folder_warnings(values) == [
        "base_output_directory = 'gs://b/out/' has no {run}, so each run writes its model over "
        "the folder of the versions registered before. Fix: gs://b/out/{run} gives every run "
        "its own folder.",
        "training_options.checkpoint_dir = '/gcs/b/ckpt' has no {run}, so each run resumes from "
        "the checkpoint the run before left. Fix: /gcs/b/ckpt/{run} gives every run its own "
        "folder.",
    ]
