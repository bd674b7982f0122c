"""Google's own client, google-cloud-aiplatform, against the emulator.

The SDK talks REST (``api_transport="rest"``) to the emulator as its endpoint, with anonymous
credentials, through the high-level classes (``Model``, ``CustomJob``, ``PipelineJob``,
``PipelineJobSchedule``) and, for the services those cover, the generated ``aiplatform_v1``
clients. Each test checks what the SDK returns and what the emulator stored.

``PipelineJob.submit`` first makes sure the output bucket exists with google-cloud-storage,
which the emulator does not serve (its Cloud Storage is a folder): ``STORAGE_EMULATOR_HOST``
points the storage client at the emulator, whose 404 the SDK logs and goes on from (it catches
every error of that check), instead of retrying storage.googleapis.com for 120 s.
"""

from __future__ import annotations

import pytest
from google.api_core import client_options
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform, aiplatform_v1

from vsp.vertex_emulator import read_journal

PROJECT, LOCATION = "test-project", "us-central1"
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"
IMAGE = "us-docker.pkg.dev/p/r/serve:1"
ROOT = "gs://vsp-pipelines/root"


@pytest.fixture
def sdk(emulator, monkeypatch):
    """``aiplatform`` initialised against the emulator (REST, anonymous credentials)."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://{emulator.address}")
    aiplatform.init(
        project=PROJECT,
        location=LOCATION,
        credentials=AnonymousCredentials(),
        api_transport="rest",
        api_endpoint=f"http://{emulator.address}",
    )
    yield emulator
    aiplatform.init(api_endpoint=None, api_transport=None)


def _template(name: str) -> str:
    import vsp.compiled  # noqa: PLC0415

    return str(vsp.compiled.__path__[0]) + f"/pipelines/{name}.yaml"


def _requests(emulator, method: str, suffix: str) -> list[dict]:
    return [
        e
        for e in read_journal(emulator.state_dir)
        if e["method"] == method and e["path"].endswith(suffix)
    ]


def test_model_upload_versions_and_aliases(sdk):
    first = aiplatform.Model.upload(
        display_name="mnist",
        artifact_uri="gs://vsp-models/m1/",
        serving_container_image_uri=IMAGE,
        labels={"team": "ml"},
        sync=True,
    )
    assert first.version_id == "1" and first.display_name == "mnist"
    second = aiplatform.Model.upload(
        parent_model=first.resource_name,
        artifact_uri="gs://vsp-models/m2/",
        serving_container_image_uri=IMAGE,
        is_default_version=True,
        version_aliases=["candidate"],
        sync=True,
    )
    assert second.resource_name == first.resource_name and second.version_id == "2"
    # Both uploads went to the v1 path, and the SDK read the v1 UploadModelResponse.
    uploads = _requests(sdk, "POST", "/models:upload")
    assert [e["path"].split("/")[1] for e in uploads] == ["v1", "v1"]
    assert [e["status"] for e in uploads] == [200, 200]

    assert [m.resource_name for m in aiplatform.Model.list()] == [first.resource_name]
    registry = first.versioning_registry
    versions = {v.version_id: sorted(v.version_aliases) for v in registry.list_versions()}
    assert versions == {"1": [], "2": ["candidate", "default"]}
    assert aiplatform.Model(first.resource_name, version="1").uri == "gs://vsp-models/m1/"
    assert aiplatform.Model(f"{first.resource_name}@candidate").version_id == "2"

    registry.add_version_aliases(["stable"], version="1")
    assert aiplatform.Model(f"{first.resource_name}@stable").version_id == "1"
    registry.remove_version_aliases(["stable"], version="1")
    assert registry.get_version_info("1").version_aliases == []
    registry.delete_version("1")
    assert [v.version_id for v in registry.list_versions()] == ["2"]


def test_custom_job_create_get_list_cancel(sdk):
    job = aiplatform.CustomJob(
        display_name="train",
        worker_pool_specs=[
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {"image_uri": IMAGE, "command": ["sleep", "60"]},
            }
        ],
        staging_bucket="gs://vsp-staging",
        labels={"team": "ml"},
    )
    job.submit()
    name = job.resource_name
    assert name.startswith(f"{PARENT}/customJobs/")
    fetched = aiplatform.CustomJob.get(name)
    assert fetched.display_name == "train" and fetched.labels == {"team": "ml"}
    assert [j.resource_name for j in aiplatform.CustomJob.list()] == [name]
    job.cancel()
    assert _requests(sdk, "POST", ":cancel")[0]["status"] == 200


def test_pipeline_job_create_get_list_cancel(sdk):
    job = aiplatform.PipelineJob(
        display_name="lifecycle",
        template_path=_template("cluster_lifecycle"),
        pipeline_root=ROOT,
        parameter_values={"project": PROJECT},
        enable_caching=False,
        labels={"team": "ml"},
        job_id="lifecycle-1",
    )
    job.submit()
    assert job.resource_name == f"{PARENT}/pipelineJobs/lifecycle-1"
    stored = aiplatform.PipelineJob.get(job.resource_name)
    assert stored.state == aiplatform_v1.PipelineState.PIPELINE_STATE_PENDING
    assert stored.gca_resource.runtime_config.gcs_output_directory == ROOT
    assert stored.labels["team"] == "ml"
    listed = aiplatform.PipelineJob.list(filter='display_name="lifecycle"')
    assert [j.resource_name for j in listed] == [job.resource_name]
    job.cancel()
    cancelled = aiplatform.PipelineJob.get(job.resource_name)
    assert cancelled.state == aiplatform_v1.PipelineState.PIPELINE_STATE_CANCELLED
    # The SDK's bucket check reached the emulator, which serves no Cloud Storage JSON API.
    assert [e["status"] for e in _requests(sdk, "GET", "/storage/v1/b/vsp-pipelines")] == [404]


def test_pipeline_schedule_create_pause_resume_delete(sdk):
    job = aiplatform.PipelineJob(
        display_name="reap",
        template_path=_template("cluster_lifecycle"),
        pipeline_root=ROOT,
        parameter_values={"project": PROJECT},
    )
    schedule = job.create_schedule(
        cron="0 * * * *", display_name="hourly", max_concurrent_run_count=1
    )
    assert schedule.resource_name.startswith(f"{PARENT}/schedules/")
    assert schedule.state == aiplatform_v1.Schedule.State.ACTIVE
    schedule.pause()
    paused = aiplatform.PipelineJobSchedule.get(schedule.resource_name)
    assert paused.state == aiplatform_v1.Schedule.State.PAUSED
    schedule.resume()
    assert (
        aiplatform.PipelineJobSchedule.get(schedule.resource_name).state
        == aiplatform_v1.Schedule.State.ACTIVE
    )
    listed = aiplatform.PipelineJobSchedule.list()
    assert [s.resource_name for s in listed] == [schedule.resource_name]
    schedule.delete()
    assert aiplatform.PipelineJobSchedule.list() == []


def test_generated_v1_clients(sdk):
    options = client_options.ClientOptions(api_endpoint=f"http://{sdk.address}")
    kwargs = {"transport": "rest", "credentials": AnonymousCredentials()}
    models = aiplatform_v1.ModelServiceClient(client_options=options, **kwargs)
    operation = models.upload_model(
        parent=PARENT,
        model=aiplatform_v1.Model(
            display_name="raw",
            artifact_uri="gs://vsp-models/raw/",
            container_spec=aiplatform_v1.ModelContainerSpec(image_uri=IMAGE),
        ),
    )
    uploaded = operation.result(timeout=30)
    assert isinstance(uploaded, aiplatform_v1.UploadModelResponse)
    assert uploaded.model_version_id == "1"
    model = models.get_model(name=uploaded.model)
    assert model.display_name == "raw" and model.version_aliases == ["default"]
    assert [m.name for m in models.list_models(parent=PARENT)] == [uploaded.model]

    jobs = aiplatform_v1.JobServiceClient(client_options=options, **kwargs)
    created = jobs.create_custom_job(
        parent=PARENT,
        custom_job=aiplatform_v1.CustomJob(
            display_name="raw-job",
            job_spec=aiplatform_v1.CustomJobSpec(
                worker_pool_specs=[
                    aiplatform_v1.WorkerPoolSpec(
                        machine_spec=aiplatform_v1.MachineSpec(machine_type="n1-standard-4"),
                        replica_count=1,
                        container_spec=aiplatform_v1.ContainerSpec(
                            image_uri=IMAGE, command=["true"]
                        ),
                    )
                ]
            ),
        ),
    )
    assert [j.name for j in jobs.list_custom_jobs(parent=PARENT)] == [created.name]
    assert jobs.get_custom_job(name=created.name).display_name == "raw-job"

    pipelines = aiplatform_v1.PipelineServiceClient(client_options=options, **kwargs)
    assert list(pipelines.list_pipeline_jobs(parent=PARENT)) == []
    schedules = aiplatform_v1.ScheduleServiceClient(client_options=options, **kwargs)
    assert list(schedules.list_schedules(parent=PARENT)) == []
